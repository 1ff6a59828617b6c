// CUDA glue: device count and properties from the CUDA runtime. In a build whose Kokkos has no
// CUDA this file reports no devices.
#include "../backend_info.hpp"

#include <Kokkos_Core.hpp>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace kten::detail {

#ifdef KOKKOS_ENABLE_CUDA
const char* gpu_backend_name() { return "Cuda"; }
int kokkos_cuda_device() { return Kokkos::Cuda().cuda_device(); }

std::shared_ptr<void> allocate_pinned_host(std::size_t bytes, void** data) {
  using Pinned = Kokkos::View<double*, Kokkos::CudaHostPinnedSpace>;
  auto view = std::make_shared<Pinned>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kten::pinned"),
                                       bytes / sizeof(double) + 1);
  *data = view->data();
  return view;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

std::vector<GpuProperties> cuda_device_properties() {
  std::vector<GpuProperties> out;
  const int used = Kokkos::is_initialized() ? kokkos_cuda_device() : -1;
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount, i == used});
  }
  return out;
}
#else
const char* gpu_backend_name() { return nullptr; }
int kokkos_cuda_device() { return -1; }
std::shared_ptr<void> allocate_pinned_host(std::size_t, void**) { return nullptr; }
int cuda_device_count() { return 0; }
std::vector<GpuProperties> cuda_device_properties() { return {}; }
#endif

}  // namespace kten::detail
