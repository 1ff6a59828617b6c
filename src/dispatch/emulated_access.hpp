// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: opening an emulated GPU's trapped memory around its kernels (emulated_memory.hpp).

#include <type_traits>

#include <kten/kokkos.hpp>

namespace kten::detail {

/// \brief While alive, emulated-GPU memory is readable (see emulated_memory.hpp): opened only
/// around the kernels and copies of an emulated GPU; a no-op unless host access to it is trapped.
/// The public kten::EmulatedGpuAccess, which applications' own kernels use.
using EmulatedAccess = EmulatedGpuAccess;

/// \brief EmulatedAccess for an emulated GPU's kernel; nothing for other backends.
template <class Backend>
struct KernelAccess {
  KernelAccess() {}  // user-provided: a scope guard, not an unused variable
  std::conditional_t<Backend::emulated, EmulatedAccess, char> open{};
};

}  // namespace kten::detail
