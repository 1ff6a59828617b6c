#pragma once
// Internal: the glue Kokkos does not give, implemented per backend under backends/.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <kten/info.hpp>

namespace kten::detail {

/// \brief CUDA devices the driver shows; 0 in a host-only build (backends/cuda).
int cuda_device_count();
/// \brief Properties of every CUDA device; empty in a host-only build (backends/cuda).
std::vector<GpuProperties> cuda_device_properties();
/// \brief The GPU backend this build enables ("Cuda"), or nullptr in a host-only build.
const char* gpu_backend_name();
/// \brief The CUDA device Kokkos was initialised on (-1 in a host-only build).
int kokkos_cuda_device();
/// \brief Page-locked host memory the GPU can DMA from (CudaHostPinnedSpace): the owning View,
/// with `*data` set; nullptr in a host-only build. Throws what Kokkos throws when it fails.
std::shared_ptr<void> allocate_pinned_host(std::size_t bytes, void** data);
/// \brief The CPU model name (backends/host).
std::string host_cpu_model();

}  // namespace kten::detail
