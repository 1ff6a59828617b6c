// Devices, availability, the Kokkos guard, and the visible-cost counters.
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include <kten/device.hpp>
#include <kten/errors.hpp>
#include <kten/runtime.hpp>

#include "../backends/backend_info.hpp"
#include "dispatch.hpp"
#include "runtime_internal.hpp"

namespace kten {

std::string Device::str() const {
  return (is_cpu() ? "cpu(" : "gpu(") + std::to_string(index_) + ")";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace {

// KTEN_EMULATE_GPUS=N: N host-memory stand-ins for gpu(0..N-1), to test device rules without a GPU.
int emulated_gpu_count() {
  static const int count = [] {
    const char* env = std::getenv("KTEN_EMULATE_GPUS");
    if (env == nullptr || *env == '\0') return 0;
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 0 || n > 64)
      throw Error(std::string("kten: KTEN_EMULATE_GPUS must be a number of GPUs from 0 to 64, got '") +
                  env + "'");
    return static_cast<int>(n);
  }();
  return count;
}

}  // namespace

bool gpus_are_emulated() { return emulated_gpu_count() > 0; }

int num_gpus() {
  if (gpus_are_emulated()) return emulated_gpu_count();
  // kten drives one GPU per process: the one Kokkos was initialised on (one MPI rank per GPU).
  return detail::cuda_device_count() > 0 ? 1 : 0;
}

Device try_gpu(int index) { return index >= 0 && index < num_gpus() ? gpu(index) : cpu(); }

std::vector<Device> try_all_gpus() {
  std::vector<Device> all;
  for (int i = 0; i < num_gpus(); ++i) all.push_back(gpu(i));
  if (all.empty()) all.push_back(cpu());
  return all;
}

void require_available(const Device& device) {
  if (device.is_cpu()) return;
  const int n = num_gpus();
  if (device.index() >= 0 && device.index() < n) return;
  std::string msg = "kten: " + device.str() + " is not available: ";
  if (gpus_are_emulated()) {
    msg += "KTEN_EMULATE_GPUS provides " + std::to_string(n) + " emulated GPU(s), gpu(0) to gpu(" +
           std::to_string(n - 1) + ")";
  } else if (detail::gpu_backend_name() == nullptr) {
    msg += "this is a host-only build (its Kokkos has no GPU backend), so there are no GPUs; "
           "use cpu(), or try_gpu() which falls back to cpu()";
  } else if (n == 0) {
    msg += "no CUDA device was found on this machine; use cpu(), or try_gpu() which falls back to cpu()";
  } else {
    msg += "kten drives one GPU per process, gpu(0) (CUDA device " +
           std::to_string(detail::kokkos_cuda_device()) +
           "); " + std::to_string(detail::cuda_device_count()) +
           " are visible. Pick another one with --kokkos-device-id=N (or one MPI rank per GPU)";
  }
  throw DeviceUnavailable(msg);
}

void synchronize(const Device& device) {
  detail::note_host_sync(device, "synchronize()", /*implicit=*/false);
  detail::with_backend(device, [](auto backend) { backend.space.fence(); });
}

ScopeGuard::ScopeGuard(int& argc, char* argv[]) {
  if (!Kokkos::is_initialized()) {
    Kokkos::initialize(argc, argv);
    owns_ = true;
  }
}

ScopeGuard::ScopeGuard() {
  if (!Kokkos::is_initialized()) {
    Kokkos::initialize();
    owns_ = true;
  }
}

ScopeGuard::~ScopeGuard() {
  if (owns_ && Kokkos::is_initialized()) Kokkos::finalize();
}

// --- visible cost ------------------------------------------------------------------------------

namespace {
struct Counters {
  std::atomic<std::uint64_t> h2d{0}, d2h{0}, d2d{0}, bytes_h2d{0}, bytes_d2h{0}, bytes_d2d{0}, syncs{0};
};
Counters& counters() {
  static Counters c;
  return c;
}
std::atomic<SyncDebug>& debug_mode() {
  static std::atomic<SyncDebug> mode{SyncDebug::Off};
  return mode;
}
}  // namespace

Stats stats() {
  auto& c = counters();
  Stats s;
  s.host_to_device = c.h2d;
  s.device_to_host = c.d2h;
  s.device_to_device = c.d2d;
  s.bytes_host_to_device = c.bytes_h2d;
  s.bytes_device_to_host = c.bytes_d2h;
  s.bytes_device_to_device = c.bytes_d2d;
  s.host_syncs = c.syncs;
  return s;
}

void reset_stats() {
  auto& c = counters();
  for (auto* a : {&c.h2d, &c.d2h, &c.d2d, &c.bytes_h2d, &c.bytes_d2h, &c.bytes_d2d, &c.syncs}) *a = 0;
}

SyncDebug set_sync_debug_mode(SyncDebug mode) { return debug_mode().exchange(mode); }
SyncDebug sync_debug_mode() { return debug_mode(); }

namespace detail {

void note_transfer(const Device& from, const Device& to, std::size_t bytes) {
  if (from == to) return;  // a copy within one device moves nothing between devices
  auto& c = counters();
  if (from.is_cpu()) {
    ++c.h2d;
    c.bytes_h2d += bytes;
  } else if (to.is_cpu()) {
    ++c.d2h;
    c.bytes_d2h += bytes;
  } else {
    ++c.d2d;
    c.bytes_d2d += bytes;
  }
}

void note_host_sync(const Device& device, const char* cause, bool implicit) {
  if (implicit && device.is_gpu()) {
    const SyncDebug mode = sync_debug_mode();
    const std::string what = std::string("implicit host synchronisation: ") + cause +
                             " waits for " + device.str();
    if (mode == SyncDebug::Error)
      throw SyncError("kten: " + what +
                      " (sync debug mode is Error). Keep values on the device, e.g. accumulate "
                      "losses in a tensor and read it once, or set_sync_debug_mode(SyncDebug::Off)");
    if (mode == SyncDebug::Warn) {
      static std::mutex m;
      std::lock_guard<std::mutex> lock(m);
      std::cerr << "kten: warning: " << what << '\n';
    }
  }
  ++counters().syncs;
}

}  // namespace detail
}  // namespace kten
