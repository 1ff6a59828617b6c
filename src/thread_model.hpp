#pragma once
// Internal: kten's thread model (README, "Thread model") for the kernels that need more than
// Kokkos gives. Kokkos 3.4's host spaces expect one calling thread:
//  - OpenMP uses its thread pool only from the thread that initialised Kokkos, outside parallel
//    regions. From any other thread a range kernel runs inline on the caller (right, one core),
//    but a team kernel throws std::runtime_error.
//  - Serial keeps one team-scratch buffer per process: two threads running team kernels at once
//    overwrite each other's scratch (Kokkos made Serial thread-safe in 3.5).
// Range kernels touch no shared Kokkos state and run from any thread as they are. Team kernels
// (kten has one: the GEMM behind matmul and nn::Linear) are launched through with_team_backend().

#include <mutex>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/detail/kokkos_compat.hpp>
#include <kten/errors.hpp>

namespace kten::detail {

#ifdef KOKKOS_ENABLE_SERIAL
/// \brief Kokkos::Serial over host memory: runs host team kernels for threads that cannot use the
/// OpenMP pool.
struct SerialBackend {
  using execution_space = Kokkos::Serial;
  using memory_space = Kokkos::HostSpace;
  static constexpr bool is_host = true;
  execution_space space;
};
#endif

/// \brief Held while a team kernel is launched: Kokkos keeps team scratch per process (host) or
/// per device instance (GPU), unguarded in 3.4. Host team kernels run to completion inside the
/// launch; GPU launches are asynchronous, so there it is held only while enqueueing.
inline std::mutex& team_launch_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// \brief Calls f(backend) holding team_launch_mutex(), with `be` itself or, on a host thread that
/// cannot use the OpenMP pool, with Kokkos::Serial. Throws ThreadError when this Kokkos build has
/// no Serial space to fall back on.
template <class Backend, class F>
void with_team_backend(const Backend& be, F&& f) {
  std::lock_guard<std::mutex> lock(team_launch_mutex());
#ifdef KOKKOS_ENABLE_OPENMP
  if constexpr (std::is_same_v<typename Backend::execution_space, Kokkos::OpenMP>) {
    if (!compat::openmp_pool_usable_here()) {
#ifdef KOKKOS_ENABLE_SERIAL
      f(SerialBackend{});
      return;
#else
      throw ThreadError(
          "kten: a matrix product (matmul, nn::Linear) on the host was called from a thread that "
          "cannot use Kokkos' OpenMP thread pool (with Kokkos 3, any thread but the one that "
          "initialised Kokkos; with any Kokkos, code inside an OpenMP parallel region), and this "
          "Kokkos build has no Serial backend for kten to run it on instead. Call it from the thread "
          "that initialised Kokkos, outside parallel regions, or use a Kokkos built with "
          "-DKokkos_ENABLE_SERIAL=ON (README, \"Thread model\").");
#endif
    }
  }
#endif
  f(be);
}

}  // namespace kten::detail
