#pragma once
// Internal: the one place where a runtime Device becomes a Kokkos backend (execution space
// instance + memory space) and a runtime DType becomes an element type, and the one way to launch
// a kernel over tensors: launch() checks the operands, picks the backend and element type, and
// hands the kernel typed pointers; for_each_index() runs a functor over a 64-bit index range.

#include <cstdint>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/errors.hpp>
#include <kten/tensor.hpp>

#include "checks.hpp"
#include "storage.hpp"

namespace kten::detail {

/// \brief True when this build's Kokkos has a device execution space (CUDA, HIP, SYCL, ...).
inline constexpr bool has_gpu_backend =
    !std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>;

/// \brief cpu(): a host execution space over host memory, host algorithms. Space is the default
/// host space, or Kokkos::Serial for threads that cannot use the OpenMP pool (README, "Thread model").
template <class Space>
struct HostOn {
  using execution_space = Space;
  using memory_space = Kokkos::HostSpace;
  /// \brief Host algorithms, and host code may touch the memory directly.
  static constexpr bool is_host = true;
  /// \brief An emulated GPU (KTEN_EMULATE_GPUS).
  static constexpr bool emulated = false;
  execution_space space;
};

/// \brief An emulated GPU (KTEN_EMULATE_GPUS): host threads execute, over host memory, but every
/// "host or device" branch takes the device one, so tests run the code a GPU runs.
template <class Space>
struct EmulatedGpuOn {
  using execution_space = Space;
  using memory_space = Kokkos::HostSpace;
  static constexpr bool is_host = false;
  static constexpr bool emulated = true;
  execution_space space;
};

using HostBackend = HostOn<Kokkos::DefaultHostExecutionSpace>;
using EmulatedGpuBackend = EmulatedGpuOn<Kokkos::DefaultHostExecutionSpace>;

/// \brief A real GPU: Kokkos' default (device) execution space and its memory space. Nothing
/// here names a vendor; backends/<vendor>/ holds what Kokkos does not give.
struct GpuBackend {
  using execution_space = Kokkos::DefaultExecutionSpace;
  using memory_space = typename execution_space::memory_space;
  static constexpr bool is_host = false;
  static constexpr bool emulated = false;
  execution_space space;
};

/// \brief While alive, emulated-GPU memory is readable (see emulated_memory.hpp): opened only
/// around the kernels and copies of an emulated GPU; a no-op unless host access to it is trapped.
class EmulatedAccess {
 public:
  EmulatedAccess();
  ~EmulatedAccess();
  EmulatedAccess(const EmulatedAccess&) = delete;
  EmulatedAccess& operator=(const EmulatedAccess&) = delete;
};

/// \brief EmulatedAccess for an emulated GPU's kernel; nothing for other backends.
template <class Backend>
struct KernelAccess {
  KernelAccess() {}  // user-provided: a scope guard, not an unused variable
  std::conditional_t<Backend::emulated, EmulatedAccess, char> open{};
};

/// \brief Kokkos 3.4's OpenMP backend serves only the thread that initialised Kokkos, outside
/// parallel regions; other threads get host work run on Kokkos::Serial (ThreadError without it).
bool host_pool_usable_here();

/// \brief Calls f(backend) for the backend that serves `device`; throws DeviceUnavailable when
/// the device cannot be used in this process.
template <class F>
decltype(auto) with_backend(const Device& device, F&& f) {
  require_available(device);
  if (device.is_gpu() && !gpus_are_emulated()) {
    if constexpr (has_gpu_backend) return f(GpuBackend{});
  }
#if defined(KOKKOS_ENABLE_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
  if constexpr (std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>) {
    if (!host_pool_usable_here()) {
      if (device.is_gpu()) return f(EmulatedGpuOn<Kokkos::Serial>{});
      return f(HostOn<Kokkos::Serial>{});
    }
  }
#endif
  if (device.is_gpu()) return f(EmulatedGpuBackend{});
  return f(HostBackend{});
}

/// \brief Calls f(T{}) with T = float for float32 and double for float64.
template <class F>
decltype(auto) with_dtype(DType dtype, F&& f) {
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

/// \brief A 1-D range policy on the backend's instance with a 64-bit index: Kokkos' default index
/// on CUDA is 32-bit, which would wrap on tensors of 2^32 elements or more.
template <class Backend>
using RangePolicy = Kokkos::RangePolicy<typename Backend::execution_space, Kokkos::IndexType<std::int64_t>>;
static_assert(std::is_same_v<RangePolicy<GpuBackend>::index_type, std::int64_t>,
              "kernels over tensors index with 64 bits on every backend");

/// \brief A team policy on the backend's instance (league and team indices fit 32 bits).
template <class Backend>
using TeamPolicy = Kokkos::TeamPolicy<typename Backend::execution_space>;

/// \brief Held while a launch uses state Kokkos 3.4 keeps per process or per instance without a
/// lock: Serial's team and reduction scratch (several threads may run on Serial at once), and a
/// GPU instance's team scratch (held while the kernel is queued). Host launches complete inside.
std::mutex& shared_scratch_mutex();

template <class Policy>
struct IsTeamPolicy : std::false_type {};
template <class... Properties>
struct IsTeamPolicy<Kokkos::TeamPolicy<Properties...>> : std::true_type {};

template <class Backend, class Policy, bool Reduces>
std::unique_lock<std::mutex> lock_shared_scratch() {
  // A Serial range kernel (every small cpu() operation) uses no scratch: no lock for it.
  constexpr bool serial =
#ifdef KOKKOS_ENABLE_SERIAL
      std::is_same_v<typename Backend::execution_space, Kokkos::Serial> && (Reduces || IsTeamPolicy<Policy>::value);
#else
      false;
#endif
  constexpr bool gpu_team = std::is_same_v<Backend, GpuBackend> && IsTeamPolicy<Policy>::value;
  if constexpr (serial || gpu_team) return std::unique_lock<std::mutex>(shared_scratch_mutex());
  else return {};
}

/// \brief Throws ThreadError for a launch Kokkos' OpenMP backend would refuse on this thread (a
/// team kernel or a reduction off its pool): only in a Kokkos without Serial to fall back on.
template <class Backend, class Policy>
void check_launch_thread(bool reduces) {
#ifdef KOKKOS_ENABLE_OPENMP
  if constexpr (std::is_same_v<typename Backend::execution_space, Kokkos::OpenMP>) {
    if ((reduces || IsTeamPolicy<Policy>::value) && !host_pool_usable_here())
      throw ThreadError(
          "kten: this operation needs Kokkos' OpenMP thread pool, which serves only the thread that "
          "initialised Kokkos (Kokkos 3) and never code inside an OpenMP parallel region, and this "
          "Kokkos build has no Serial backend for kten to run it on instead. Call it from the thread "
          "that initialised Kokkos, outside parallel regions, or use a Kokkos built with "
          "-DKokkos_ENABLE_SERIAL=ON (README, \"Thread model\")");
  }
#else
  (void)reduces;
#endif
}

/// \brief The only place kten calls Kokkos::parallel_for: on the backend's policy, with an
/// emulated GPU's memory open while the kernel runs.
template <class Backend, class Policy, class Functor>
void run(const char* label, const Backend&, const Policy& policy, const Functor& functor) {
  check_launch_thread<Backend, Policy>(false);
  const auto lock = lock_shared_scratch<Backend, Policy, false>();
  KernelAccess<Backend> access;
  Kokkos::parallel_for(label, policy, functor);
}

/// \brief The only place kten calls Kokkos::parallel_reduce (result in `reducer`'s View).
template <class Backend, class Policy, class Functor, class Reducer>
void run_reduce(const char* label, const Backend&, const Policy& policy, const Functor& functor,
                const Reducer& reducer) {
  check_launch_thread<Backend, Policy>(true);
  const auto lock = lock_shared_scratch<Backend, Policy, true>();
  KernelAccess<Backend> access;
  Kokkos::parallel_reduce(label, policy, functor, reducer);
}

/// \brief Work (elements of a bandwidth-bound operation) below which a cpu() kernel runs on the
/// calling thread: waking the other threads (an OpenMP fork-join, about 1 us) costs more than
/// they save on less. Measured on two threads, one thread breaks even with all of them at about
/// 16K elements for an add and 6K for exp (docs/performance.md). PyTorch's grain is 32768.
inline constexpr std::int64_t host_serial_grain = 8192;

/// \brief Calls f(backend) with the backend a kernel over `work` elements runs on: `be`, except
/// that a cpu() kernel below host_serial_grain runs on the calling thread (Kokkos::Serial, where
/// the build has it: no fork-join) instead of waking the host space's other threads.
template <class Backend, class F>
void with_grain(const Backend& be, std::int64_t work, F&& f) {
#ifdef KOKKOS_ENABLE_SERIAL
  if constexpr (Backend::is_host && !std::is_same_v<typename Backend::execution_space, Kokkos::Serial>) {
    if (work < host_serial_grain) return f(HostOn<Kokkos::Serial>{});
  }
#else
  (void)work;  // without Serial every kernel runs on the backend's space
#endif
  f(be);
}

/// \brief Runs functor(i) for i in [0, n) on the backend, asynchronously. `work` is the number of
/// elements the whole range touches (n when each index touches one), which decides whether a
/// cpu() kernel is worth waking every thread for.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& be, std::int64_t n, const Functor& functor, std::int64_t work) {
  with_grain(be, work, [&](const auto& on) {
    run(label, on, RangePolicy<std::decay_t<decltype(on)>>(on.space, 0, n), functor);
  });
}

/// \brief for_each_index over n indices that touch one element each.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& be, std::int64_t n, const Functor& functor) {
  for_each_index(label, be, n, functor, n);
}

/// \brief `league` teams on the backend, of `team_size` threads (0: the backend picks, Kokkos::AUTO)
/// with `vector_length` lanes each on a GPU. An emulated GPU gets teams of two host threads where
/// the host has them, so the kernels' cross-thread combining and barriers run (Kokkos' OpenMP
/// backend would pick teams of one), and no vector lanes.
template <class Backend>
TeamPolicy<Backend> team_policy(const Backend& be, int league, int team_size = 0, int vector_length = 1) {
  check_launch_thread<Backend, TeamPolicy<Backend>>(false);  // before Kokkos sizes the team
  if constexpr (Backend::emulated)
    return TeamPolicy<Backend>(be.space, league, be.space.concurrency() >= 2 ? 2 : 1);
  else if (team_size > 0)
    return TeamPolicy<Backend>(be.space, league, team_size, vector_length);
  else
    return TeamPolicy<Backend>(be.space, league, Kokkos::AUTO, vector_length);
}

/// \brief The typed pointer to a tensor's first element (libtorch's data_ptr<T>()); a pinned
/// buffer that a queued copy may still read is waited for first, since the kernel may write it.
template <class T>
T* data_ptr(const Tensor& t) {
  const Storage& storage = *t.storage();
  if (storage.pinned) wait_for_pending_reader(storage);
  return static_cast<T*>(storage.data);
}

/// \brief A Kokkos profiling region for its lifetime (Kokkos 3.4 has no ScopedRegion): profilers
/// and Kokkos Tools show kten's operations, module calls and epochs by their kten:: names.
class Region {
 public:
  explicit Region(const char* name) { Kokkos::Profiling::pushRegion(name); }
  explicit Region(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~Region() { Kokkos::Profiling::popRegion(); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

/// \brief The one way to run a kernel over tensors: checks that every operand is defined and that
/// all live on one device with one dtype, then calls kernel(backend, T* first, T* rest...).
template <class Kernel, class... Tensors>
void launch(const char* op, Kernel&& kernel, const Tensor& first, const Tensors&... rest) {
  (check_compatible(op, first, rest), ...);
  check_defined(first, op);
  Region region(op);
  const auto operands = std::forward_as_tuple(first, rest...);  // nvcc cannot capture a pack
  with_backend(first.device(), [&](auto be) {
    with_dtype(first.dtype(), [&](auto zero) {
      using T = decltype(zero);
      std::apply([&](const auto&... t) { kernel(be, data_ptr<T>(t)...); }, operands);
    });
  });
}

/// \brief Blocks until all work queued on `device` has finished.
void fence(const Device& device);

/// \brief An unmanaged 1-D View over raw memory of a backend.
template <class Backend, class T>
using RawView = Kokkos::View<T*, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace kten::detail
