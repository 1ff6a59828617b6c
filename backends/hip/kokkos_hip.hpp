// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Kokkos' HIP backend across releases: in Kokkos::Experimental in 3.x, moved to Kokkos:: in 4.0 (the
// old spellings deprecated, then removed). The only place kten spells either; vendor glue, so it
// lives under backends/ (core/kokkos_compat.hpp holds the vendor-neutral differences).

#include <Kokkos_Core.hpp>

namespace kten::detail {

#if KOKKOS_VERSION >= 40000
namespace kokkos_hip = ::Kokkos;
/// \brief The wavefront width as Kokkos knows it.
inline constexpr int hip_warp_size = ::Kokkos::Impl::HIPTraits::WarpSize;
#else
namespace kokkos_hip = ::Kokkos::Experimental;
/// \brief The wavefront width as Kokkos knows it.
inline constexpr int hip_warp_size = ::Kokkos::Experimental::Impl::HIPTraits::WarpSize;
#endif

}  // namespace kten::detail
