// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// HIP glue (AMD GPUs through ROCm): the runtime's view of the devices, pinned host memory, and streams for applications.
#include "backend_glue.hpp"
#include "pinned_view.hpp"
#include "stream_instance.hpp"
#include "hip/kokkos_hip.hpp"

#include <hip/hip_runtime.h>

#include <Kokkos_Core.hpp>

#include <kten/kokkos.hpp>

#include "core/fail.hpp"

namespace kten::detail {

const char* gpu_backend_name() { return "HIP"; }

std::string gpu_runtime_problem() {
  int count = 0;
  const hipError_t status = hipGetDeviceCount(&count);
  const char* check = "; check the amdgpu driver and /dev/kfd (rocm-smi lists the GPUs), and HIP_VISIBLE_DEVICES / "
                      "ROCR_VISIBLE_DEVICES";
  if (status == hipErrorNoDevice || (status == hipSuccess && count == 0)) {
    (void)hipGetLastError();
    return std::string("the HIP runtime finds no AMD GPU, hipErrorNoDevice") + check;
  }
  if (status != hipSuccess) {
    (void)hipGetLastError();  // clear the sticky error
    return std::string(hipGetErrorName(status)) + ": " + hipGetErrorString(status) + check;
  }
  return {};
}

int gpu_device_count() {
  // Counted once; a runtime that fails counts none (and its sticky error is cleared).
  static const int count = [] { int n = 0; return hipGetDeviceCount(&n) == hipSuccess ? n : ((void)hipGetLastError(), 0); }();
  return count;
}

int kokkos_gpu_device() { return kokkos_hip::HIP().hip_device(); }

std::shared_ptr<void> allocate_pinned_host(std::size_t bytes, void** data) {
  return allocate_pinned_view<kokkos_hip::HIPHostPinnedSpace>(bytes, data);
}

MemoryHome gpu_memory_home(const void* p) {
  hipPointerAttribute_t attributes{};
  if (hipPointerGetAttributes(&attributes, p) != hipSuccess) {
    (void)hipGetLastError();  // ROCm knows nothing of plain host memory: an error, cleared here
    return MemoryHome::host;
  }
  if (attributes.isManaged) return MemoryHome::unknown;
  return attributes.memoryType == hipMemoryTypeDevice || attributes.memoryType == hipMemoryTypeArray ? MemoryHome::gpu
                                                                                                     : MemoryHome::host;
}

std::vector<GpuProperties> gpu_device_properties() {
  std::vector<GpuProperties> out;
  const int used = Kokkos::is_initialized() ? kokkos_gpu_device() : -1;
  for (int i = 0; i < gpu_device_count(); ++i) {
    hipDeviceProp_t p{};
    if (hipGetDeviceProperties(&p, i) != hipSuccess) continue;
    // gcnArchName ("gfx90a:sramecc+:xnack-") says which GPU it is; name is often a marketing
    // string, or empty on older ROCm releases. Both, when they differ.
    std::string name = p.gcnArchName;
    if (p.name[0] != '\0' && name.rfind(p.name, 0) != 0) name = std::string(p.name) + " (" + name + ")";
    out.push_back({i, name, p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount, i == used});
  }
  return out;
}

}  // namespace kten::detail

namespace kten {

std::shared_ptr<const Kokkos::DefaultExecutionSpace> new_stream_instance() {
  hipStream_t stream = nullptr;
  const auto status = hipStreamCreate(&stream);
  if (status != hipSuccess)
    throw Error(detail::error_message("new_stream_instance", "hipStreamCreate failed: ", hipGetErrorName(status), ": ",
                                      hipGetErrorString(status)));
  return detail::instance_owning(stream, [](hipStream_t s) { (void)hipStreamDestroy(s); });
}

}  // namespace kten
