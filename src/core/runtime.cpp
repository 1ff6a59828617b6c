// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Visible cost: the transfer, synchronisation and fence counters, and the sync debug mode.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <kten/kokkos.hpp>
#include <kten/runtime.hpp>

#include "kokkos_compat.hpp"

#include "backends.hpp"
#include "fail.hpp"
#include "runtime_internal.hpp"

namespace kten {

// --- visible cost ------------------------------------------------------------------------------

namespace {
struct Counters {
  std::atomic<std::uint64_t> h2d{0}, d2h{0}, d2d{0}, bytes_h2d{0}, bytes_d2h{0}, bytes_d2d{0}, syncs{0}, contiguous{0}, bytes_contiguous{0};
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
  s.contiguous_copies = c.contiguous;
  s.bytes_contiguous_copies = c.bytes_contiguous;
  return s;
}

void reset_stats() {
  auto& c = counters();
  for (auto* a : {&c.h2d, &c.d2h, &c.d2d, &c.bytes_h2d, &c.bytes_d2h, &c.bytes_d2d, &c.syncs, &c.contiguous, &c.bytes_contiguous}) *a = 0;
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

void note_contiguous_copy(std::size_t bytes) {
  auto& c = counters();
  ++c.contiguous;
  c.bytes_contiguous += bytes;
}

void note_host_sync(const Device& device, const char* cause, bool implicit) {
  if (implicit && device.is_gpu()) {
    const SyncDebug mode = sync_debug_mode();
    const std::string what = std::string("implicit host synchronisation: ") + cause +
                             " waits for " + device.str();
    if (mode == SyncDebug::Error)
      fail<SyncError>("", what,
                      " (sync debug mode is Error). Keep values on the device, e.g. accumulate "
                      "losses in a tensor and read it once, or set_sync_debug_mode(SyncDebug::Off)");
    if (mode == SyncDebug::Warn) {
      static std::mutex m;
      std::lock_guard<std::mutex> lock(m);
      std::cerr << error_message("", "warning: ", what) << '\n';
    }
  }
  ++counters().syncs;
}

namespace {
std::atomic<std::uint64_t> gpu_fences{0};
}

void fence(const Device& device) {
  if (device.is_gpu()) ++gpu_fences;
  with_backend(device, [](auto backend) { backend.space.fence(); });
}

std::uint64_t gpu_fence_count() { return gpu_fences; }

namespace {
// This thread's StreamGuards' instances, innermost last (copies: a misused guard cannot leave a
// dangling pointer behind).
thread_local std::vector<Kokkos::DefaultExecutionSpace> guarded_instances;
}

const Kokkos::DefaultExecutionSpace* guarded_instance() {
  return guarded_instances.empty() ? nullptr : &guarded_instances.back();
}

std::mutex& shared_scratch_mutex() {
  static std::mutex mutex;
  return mutex;
}

bool host_pool_usable_here() {
#ifdef KOKKOS_ENABLE_OPENMP
  return compat::openmp_pool_usable_here();
#else
  return true;
#endif
}

}  // namespace detail

StreamGuard::StreamGuard(const Kokkos::DefaultExecutionSpace& space)
    : space_(space), depth_(detail::guarded_instances.size()) {
  detail::current_instance<Kokkos::DefaultExecutionSpace>().fence();  // what kten queued before
  detail::guarded_instances.push_back(space);
}

StreamGuard::~StreamGuard() {
  if (detail::guarded_instances.size() != depth_ + 1) {
    // Destroyed out of order, or on another thread: which instance kten should use is lost.
    std::fprintf(stderr, "%s\n", detail::error_message("StreamGuard", "destroyed out of order or on a thread other than "
                                                       "the one that made it; destroy guards in reverse order on "
                                                       "their own thread").c_str());
    std::abort();
  }
  space_.fence();
  detail::guarded_instances.pop_back();
}

}  // namespace kten
