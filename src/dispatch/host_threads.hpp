// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what Kokkos 3.4's host backends need from a launch made by any thread: OpenMP's pool
// serves only the thread that initialised Kokkos (docs/semantics.md, "Thread model"), and Serial's and a GPU
// instance's scratch is per process or per instance, without a lock.

#include <mutex>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/errors.hpp>

#include "core/fail.hpp"
#include "core/backends.hpp"

namespace kten::detail {

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
      fail<ThreadError>(
          "", "this operation needs Kokkos' OpenMP thread pool, which serves only the thread that "
          "initialised Kokkos (Kokkos 3) and never code inside an OpenMP parallel region, and this "
          "Kokkos build has no Serial backend for kten to run it on instead. Call it from the thread "
          "that initialised Kokkos, outside parallel regions, or use a Kokkos built with "
          "-DKokkos_ENABLE_SERIAL=ON (docs/semantics.md, \"Thread model\")");
  }
#else
  (void)reduces;
#endif
}

}  // namespace kten::detail
