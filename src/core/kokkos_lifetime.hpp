// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: Kokkos' lifetime as kten sees it. A ScopeGuard is optional: kten starts Kokkos on its
// first kernel or allocation when nobody has (and finalises it at exit), and refuses any use after
// Kokkos::finalize with a kten::Error. Tensors and models dropped after finalize leave their memory
// to the process' end (own_view in <kten/kokkos.hpp>), never an abort.

#include <atomic>

namespace kten::detail {

/// \brief 1 while Kokkos runs with kten's finalize hook in place; 0 before kten has seen it
/// running, 2 once Kokkos::finalize has run.
extern std::atomic<int> kokkos_state;

/// \brief ensure_kokkos()'s slow path: notes the application's Kokkos, starts one when nobody
/// has, or throws kten::Error after Kokkos::finalize.
void start_kokkos_for_kten();

/// \brief Kokkos runs for kten's next kernel or allocation (one load on the fast path).
inline void ensure_kokkos() {
  if (kokkos_state.load(std::memory_order_acquire) != 1) start_kokkos_for_kten();
}

/// \brief Notes that Kokkos runs (ScopeGuard, the application's own initialisation): hooks its
/// finalize, so that a later use is an error and not a crash.
void note_kokkos_running();

}  // namespace kten::detail
