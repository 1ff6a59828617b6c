// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the glue Kokkos does not give, one implementation per backend folder: backends/host/
// (always), and for the GPU exactly one of backends/cuda/ or backends/none/ (host-only builds),
// picked by src/CMakeLists.txt. A new GPU vendor (HIP, SYCL) is a new folder implementing these.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <kten/info.hpp>

namespace kten::detail {

/// \brief The GPU backend this build enables ("Cuda"), or nullptr in a host-only build.
const char* gpu_backend_name();
/// \brief Empty when the GPU runtime can be initialised, else what is missing (no driver, no
/// device, ...); checked before Kokkos is initialised. Always empty in a host-only build.
std::string gpu_runtime_problem();
/// \brief GPUs the vendor runtime shows (0 in a host-only build or without a usable GPU).
int gpu_device_count();
/// \brief Properties of every GPU the runtime shows; empty in a host-only build.
std::vector<GpuProperties> gpu_device_properties();
/// \brief The vendor ordinal of the GPU Kokkos was initialised on (-1 in a host-only build).
int kokkos_gpu_device();
/// \brief Page-locked host memory the GPU can DMA from: the owner, with `*data` set; nullptr in a
/// host-only build. Throws what Kokkos throws when it fails.
std::shared_ptr<void> allocate_pinned_host(std::size_t bytes, void** data);
/// \brief The CPU model name (backends/host).
std::string host_cpu_model();

/// \brief Where memory lives, as the GPU runtime sees it.
enum class MemoryHome {
  host,     ///< ordinary (or page-locked) host memory: no GPU kernel may read it as device memory
  gpu,      ///< device memory: host code must not dereference it
  unknown,  ///< managed memory, or a runtime that cannot tell (host-only builds): both may work
};
/// \brief Where `p` points, by the GPU runtime's pointer attributes (cudaPointerGetAttributes,
/// hipPointerGetAttributes); MemoryHome::unknown in a host-only build.
MemoryHome gpu_memory_home(const void* p);

}  // namespace kten::detail
