// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to backends/: page-locked host memory as a Kokkos View of the vendor's pinned space.

#include <cstddef>
#include <memory>

#include <Kokkos_Core.hpp>

#include <kten/kokkos.hpp>  // own_view

namespace kten::detail {

/// \brief `bytes` of page-locked host memory in PinnedSpace (Kokkos::CudaHostPinnedSpace,
/// HIPHostPinnedSpace): the owner, with `*data` set. Throws what Kokkos throws when it fails.
template <class PinnedSpace>
std::shared_ptr<void> allocate_pinned_view(std::size_t bytes, void** data) {
  using Pinned = Kokkos::View<double*, PinnedSpace>;
  Pinned view(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kten::pinned"), bytes / sizeof(double) + 1);
  *data = view.data();
  return own_view(std::move(view));
}

}  // namespace kten::detail
