// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the only Kokkos execution policies kten builds (the lint, cmake/KtenLint.cmake,
// rejects any other), and where a cpu() kernel runs by its size (the serial grain).

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "core/backends.hpp"
#include "host_threads.hpp"

namespace kten::detail {

/// \brief A 1-D range policy on the backend's instance with a 64-bit index: Kokkos' default index
/// on CUDA is 32-bit, which would wrap on tensors of 2^32 elements or more.
template <class Backend>
using RangePolicy = Kokkos::RangePolicy<typename Backend::execution_space, Kokkos::IndexType<std::int64_t>>;
static_assert(std::is_same_v<RangePolicy<GpuBackend>::index_type, std::int64_t>,
              "kernels over tensors index with 64 bits on every backend");

/// \brief A team policy on the backend's instance (league and team indices fit 32 bits).
template <class Backend>
using TeamPolicy = Kokkos::TeamPolicy<typename Backend::execution_space>;

/// \brief The handle a team kernel's operator() receives on the backend (the same with or without
/// launch bounds).
template <class Backend>
using TeamMember = typename TeamPolicy<Backend>::member_type;

/// \brief A team policy whose kernel is compiled for blocks of at most `MaxThreads` threads
/// (Kokkos::LaunchBounds<MaxThreads, 1>) on a real GPU; TeamPolicy<Backend> when MaxThreads is 0
/// and on host backends (emulated GPUs included), where launch bounds mean nothing. Kokkos 3.4
/// compiles a HIP kernel without them for blocks of 1024 threads: 128 VGPRs a lane on CDNA,
/// too few for the float64 GEMM micro-tile, which then spills to scratch. Which kernels get a
/// bound is the vendor's choice (GpuKernelShape in gemm_kernel.hpp).
template <class Backend, int MaxThreads>
using BoundedTeamPolicy =
    std::conditional_t<MaxThreads == 0 || Backend::is_host || Backend::emulated, TeamPolicy<Backend>,
                       Kokkos::TeamPolicy<typename Backend::execution_space, Kokkos::LaunchBounds<MaxThreads, 1>>>;

/// \brief `league` teams on the backend, of `team_size` threads (0: the backend picks, Kokkos::AUTO)
/// with `vector_length` lanes each on a GPU, the kernel bounded to blocks of `MaxThreads` threads
/// (0: no bound; see BoundedTeamPolicy). An emulated GPU gets teams of two host threads where
/// the host has them, so the kernels' cross-thread combining and barriers run (Kokkos' OpenMP
/// backend would pick teams of one), and no vector lanes.
template <int MaxThreads = 0, class Backend>
BoundedTeamPolicy<Backend, MaxThreads> team_policy(const Backend& backend, int league, int team_size = 0,
                                                   int vector_length = 1) {
  using Policy = BoundedTeamPolicy<Backend, MaxThreads>;
  check_launch_thread<Backend, Policy>(false);  // before Kokkos sizes the team
  if constexpr (Backend::emulated)
    return Policy(backend.space, league, backend.space.concurrency() >= 2 ? 2 : 1);
  else if (team_size > 0)
    return Policy(backend.space, league, team_size, vector_length);
  else
    return Policy(backend.space, league, Kokkos::AUTO, vector_length);
}

/// \brief Scratch memory per team: level 0 (GPU shared memory) or 1 (larger, slower).
struct TeamScratch {
  int level = 0;
  std::size_t bytes = 0;
};

/// \brief `league` teams of exactly `team_size` threads, for kernels whose thread layout is fixed
/// at compile time (the tiled GEMM), with `scratch` per team; the kernel bounded to blocks of
/// `MaxThreads` threads (0: no bound; see BoundedTeamPolicy).
template <int MaxThreads = 0, class Backend>
BoundedTeamPolicy<Backend, MaxThreads> fixed_team_policy(const Backend& backend, int league, int team_size,
                                                         TeamScratch scratch) {
  using Policy = BoundedTeamPolicy<Backend, MaxThreads>;
  check_launch_thread<Backend, Policy>(false);  // before Kokkos sizes the team
  Policy policy(backend.space, league, team_size);
  return policy.set_scratch_size(scratch.level, Kokkos::PerTeam(scratch.bytes));
}

/// \brief Work (elements of a bandwidth-bound operation) below which a cpu() kernel runs on the
/// calling thread: waking the other threads (an OpenMP fork-join, about 1 us) costs more than
/// they save on less. Measured on two threads, one thread breaks even with all of them at about
/// 16K elements for an add and 6K for exp (docs/performance.md). PyTorch's grain is 32768.
inline constexpr std::int64_t host_serial_grain = 8192;

/// \brief Calls f(backend) with the backend a kernel over `work` elements runs on: `backend`,
/// except that a cpu() kernel below host_serial_grain runs on the calling thread (Kokkos::Serial,
/// where the build has it: no fork-join) instead of waking the host space's other threads.
template <class Backend, class F>
void with_grain(const Backend& backend, std::int64_t work, F&& f) {
#ifdef KOKKOS_ENABLE_SERIAL
  if constexpr (Backend::is_host && !std::is_same_v<typename Backend::execution_space, Kokkos::Serial>) {
    if (work < host_serial_grain) return f(HostOn<Kokkos::Serial>{});
  }
#else
  (void)work;  // without Serial every kernel runs on the backend's space
#endif
  f(backend);
}

}  // namespace kten::detail
