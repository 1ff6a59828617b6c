// GPU glue of a host-only build: there is no GPU runtime, so no GPUs and nothing to pin.
#include "backend_glue.hpp"

namespace kten::detail {

const char* gpu_backend_name() { return nullptr; }
std::string gpu_runtime_problem() { return {}; }
int gpu_device_count() { return 0; }
std::vector<GpuProperties> gpu_device_properties() { return {}; }
int kokkos_gpu_device() { return -1; }
std::shared_ptr<void> allocate_pinned_host(std::size_t, void**) { return nullptr; }

}  // namespace kten::detail
