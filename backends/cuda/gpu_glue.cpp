// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// CUDA glue: the runtime's view of the devices, pinned host memory, and streams for applications.
#include "backend_glue.hpp"
#include "pinned_view.hpp"
#include "stream_instance.hpp"

#include <cuda_runtime.h>

#include <Kokkos_Core.hpp>

#include <kten/kokkos.hpp>

#include "core/fail.hpp"

namespace kten::detail {

const char* gpu_backend_name() { return "Cuda"; }

std::string gpu_runtime_problem() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status) +
           "; check the driver with nvidia-smi, and CUDA_VISIBLE_DEVICES";
  }
  if (count == 0) return "the CUDA runtime sees no device; check CUDA_VISIBLE_DEVICES";
  return {};
}

int gpu_device_count() {
  // Counted once; a runtime that fails counts none (and its sticky error is cleared).
  static const int count = [] { int n = 0; return cudaGetDeviceCount(&n) == cudaSuccess ? n : ((void)cudaGetLastError(), 0); }();
  return count;
}

int kokkos_gpu_device() { return Kokkos::Cuda().cuda_device(); }

std::shared_ptr<void> allocate_pinned_host(std::size_t bytes, void** data) {
  return allocate_pinned_view<Kokkos::CudaHostPinnedSpace>(bytes, data);
}

MemoryHome gpu_memory_home(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error: a runtime that cannot tell
    return MemoryHome::unknown;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice: return MemoryHome::gpu;
    case cudaMemoryTypeManaged: return MemoryHome::unknown;
    default: return MemoryHome::host;  // unregistered or page-locked host memory
  }
}

std::vector<GpuProperties> gpu_device_properties() {
  std::vector<GpuProperties> out;
  const int used = Kokkos::is_initialized() ? kokkos_gpu_device() : -1;
  for (int i = 0; i < gpu_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount, i == used});
  }
  return out;
}

}  // namespace kten::detail

namespace kten {

std::shared_ptr<const Kokkos::DefaultExecutionSpace> new_stream_instance() {
  cudaStream_t stream = nullptr;
  const auto status = cudaStreamCreate(&stream);
  if (status != cudaSuccess)
    throw Error(detail::error_message("new_stream_instance", "cudaStreamCreate failed: ", cudaGetErrorName(status), ": ",
                                      cudaGetErrorString(status)));
  return detail::instance_owning(stream, [](cudaStream_t s) { (void)cudaStreamDestroy(s); });
}

}  // namespace kten
