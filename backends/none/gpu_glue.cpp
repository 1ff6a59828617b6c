// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GPU glue of a host-only build: there is no GPU runtime, so no GPUs and nothing to pin.
#include "backend_glue.hpp"

#include <Kokkos_Core.hpp>

#include <kten/kokkos.hpp>

namespace kten::detail {

const char* gpu_backend_name() { return nullptr; }
std::string gpu_runtime_problem() { return {}; }
int gpu_device_count() { return 0; }
std::vector<GpuProperties> gpu_device_properties() { return {}; }
int kokkos_gpu_device() { return -1; }
std::shared_ptr<void> allocate_pinned_host(std::size_t, void**) { return nullptr; }
MemoryHome gpu_memory_home(const void*) { return MemoryHome::unknown; }

}  // namespace kten::detail

namespace kten {

// The host backends run in order on their one instance: an application's queue is that instance.
std::shared_ptr<const Kokkos::DefaultExecutionSpace> new_stream_instance() {
  return std::make_shared<const Kokkos::DefaultExecutionSpace>();
}

}  // namespace kten
