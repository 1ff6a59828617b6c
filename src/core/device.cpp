// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Devices, their availability, and the Kokkos lifetime guard.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>
#include <kten/errors.hpp>

#include "backend_glue.hpp"
#include "fail.hpp"
#include "kokkos_lifetime.hpp"

namespace kten {

std::string Device::str() const {
  return (is_cpu() ? "cpu(" : "gpu(") + std::to_string(index_) + ")";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace {

// KTEN_EMULATE_GPUS=N: N host-memory stand-ins for gpu(0..N-1), to test device rules and the GPU
// code paths without a GPU. Read once; a bad value is an error at ScopeGuard (where kten starts)
// and otherwise means no emulated GPUs, reported once on stderr, so try_gpu() never throws.
struct Emulation {
  int count = 0;
  std::string error;  // why KTEN_EMULATE_GPUS was rejected
};

const Emulation& emulation() {
  static const Emulation e = [] {
    Emulation r;
    const char* env = std::getenv("KTEN_EMULATE_GPUS");
    if (env == nullptr || *env == '\0') return r;
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 0 || n > 64)
      r.error = detail::error_message("", "KTEN_EMULATE_GPUS must be a number of GPUs from 0 to 64, got '", env,
                                      "'; unset it to use real devices");
    else if (n > 0 && detail::gpu_backend_name() != nullptr)  // with_backend has no emulated kernels there
      r.error = detail::error_message("", "KTEN_EMULATE_GPUS=", env, " emulates GPUs in a host-only build (cmake --preset cpu); this ",
                                      detail::gpu_backend_name(), " build runs gpu() on its GPU: unset it");
    else
      r.count = static_cast<int>(n);
    return r;
  }();
  return e;
}

// Outside ScopeGuard (which throws instead), a bad KTEN_EMULATE_GPUS means no emulated GPUs,
// said once on stderr.
const Emulation& checked_emulation() {
  const Emulation& e = emulation();
  static std::once_flag warned;
  if (!e.error.empty())
    std::call_once(warned, [&] { std::cerr << e.error << " (ignored: no emulated GPUs)\n"; });
  return e;
}

// Kokkos 3.4 also claims legacy flags (--threads, --numa, --device, --ndevices, --help) and aborts
// on values it cannot parse, so only kten's and Kokkos' own --kokkos-* flags reach it; they are
// removed from the application's command line, everything else stays for the application.
bool is_kokkos_flag(const char* arg) { return std::strncmp(arg, "--kokkos-", 9) == 0; }

void initialize_kokkos(int& argc, char* argv[]) {
  const Emulation& e = emulation();
  if (!e.error.empty()) throw Error(e.error);
  // Kokkos starts its GPU backend even when the GPUs are emulated: check it can.
  if (detail::gpu_backend_name() != nullptr) {
    const std::string problem = detail::gpu_runtime_problem();
    if (!problem.empty())
      detail::fail("", "this build runs its kernels on ", detail::gpu_backend_name(),
                   " GPUs, but no usable GPU was found (", problem,
                   "). Run it on a node with a GPU, or use a CPU build of kten (cmake --preset cpu)");
  }
  const int count = argv != nullptr ? argc : 0;
  std::vector<char*> kokkos_args{count > 0 ? argv[0] : nullptr};
  int kept = count > 0 ? 1 : 0;
  for (int i = 1; i < count; ++i) {
    if (is_kokkos_flag(argv[i])) kokkos_args.push_back(argv[i]);
    else argv[kept++] = argv[i];
  }
  for (int i = kept; i < count; ++i) argv[i] = nullptr;
  if (argv != nullptr) argc = kept;
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  kokkos_args.push_back(nullptr);
  if (kokkos_args[0] == nullptr) Kokkos::initialize();
  else Kokkos::initialize(kokkos_argc, kokkos_args.data());
}

}  // namespace

bool gpus_are_emulated() { return checked_emulation().count > 0; }

int num_gpus() {
  if (gpus_are_emulated()) return checked_emulation().count;
  // kten drives one GPU per process: the one Kokkos was initialised on (one MPI rank per GPU).
  static const int count = detail::gpu_device_count() > 0 ? 1 : 0;
  return count;
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
  std::string why;
  if (gpus_are_emulated()) {
    why = "KTEN_EMULATE_GPUS provides " + std::to_string(n) + " emulated GPU(s), gpu(0) to gpu(" +
          std::to_string(n - 1) + ")";
  } else if (!emulation().error.empty()) {
    why = emulation().error;
  } else if (detail::gpu_backend_name() == nullptr) {
    why = "this is a host-only build (its Kokkos has no GPU backend), so there are no GPUs; "
          "use cpu(), or try_gpu() which falls back to cpu()";
  } else if (n == 0) {
    why = std::string("no ") + detail::gpu_backend_name() +
          " device was found on this machine; use cpu(), or try_gpu() which falls back to cpu()";
  } else {
    why = "kten drives one GPU per process, gpu(0) (device " + std::to_string(detail::kokkos_gpu_device()) +
          "); " + std::to_string(detail::gpu_device_count()) +
          " are visible. Pick another one with --kokkos-device-id=N (or one MPI rank per GPU)";
  }
  detail::fail<DeviceUnavailable>("", device, " is not available: ", why);
}

namespace detail {

std::atomic<int> kokkos_state{0};

namespace {

std::mutex& lifetime_mutex() {
  static std::mutex m;
  return m;
}

void finalize_at_exit() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

// Under lifetime_mutex(). Kokkos runs its finalize hooks once and forgets them: one per start.
void note_running_locked() {
  if (kokkos_state.load(std::memory_order_relaxed) == 1) return;
  Kokkos::push_finalize_hook([] { kokkos_state.store(2, std::memory_order_release); });
  kokkos_state.store(1, std::memory_order_release);
}

}  // namespace

void note_kokkos_running() {
  std::lock_guard<std::mutex> lock(lifetime_mutex());
  note_running_locked();
}

void start_kokkos_for_kten() {
  std::lock_guard<std::mutex> lock(lifetime_mutex());
  if (kokkos_state.load(std::memory_order_relaxed) == 1) return;
  if (Kokkos::is_initialized()) return note_running_locked();  // the application's Kokkos
  if (kokkos_state.load(std::memory_order_relaxed) == 2)
    fail("", "kten was used after Kokkos::finalize: the ScopeGuard (or the application's own "
             "Kokkos::finalize) has already ended Kokkos. Keep the tensors and models you still use "
             "inside the guard's scope, or drop the ScopeGuard and let kten start Kokkos on first use "
             "and finalise it at exit");
  // Nobody has started Kokkos (no ScopeGuard, as a libtorch user writes): kten starts it with
  // default settings and finalises it when the program exits.
  int argc = 0;
  initialize_kokkos(argc, nullptr);
  std::atexit(finalize_at_exit);
  note_running_locked();
}

}  // namespace detail

ScopeGuard::ScopeGuard(int& argc, char* argv[]) {
  if (!Kokkos::is_initialized()) {
    initialize_kokkos(argc, argv);
    owns_ = true;
  }
  detail::note_kokkos_running();
}

ScopeGuard::ScopeGuard() {
  if (!Kokkos::is_initialized()) {
    int argc = 0;
    initialize_kokkos(argc, nullptr);
    owns_ = true;
  }
  detail::note_kokkos_running();
}

ScopeGuard::~ScopeGuard() {
  if (owns_ && Kokkos::is_initialized()) Kokkos::finalize();
}

}  // namespace kten
