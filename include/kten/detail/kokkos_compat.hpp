#pragma once
/// \file kokkos_compat.hpp
/// \brief Every difference between Kokkos 3.4 and Kokkos 4.x/5.x that kten meets, in one place.

#include <Kokkos_Core.hpp>

namespace kten::detail::compat {

/// \brief Kokkos' version as 10000*major + 100*minor + patch.
inline constexpr int kokkos_version = KOKKOS_VERSION;

// Math functions: Kokkos::Experimental:: until 3.6, Kokkos:: from 3.7 on (the Experimental
// spellings were deprecated in 4.0 and removed later).
#if KOKKOS_VERSION >= 30700
namespace math = ::Kokkos;
#else
namespace math = ::Kokkos::Experimental;
#endif

/// \brief Host threads of the default host execution space (static in 3.x, a member in 4.x).
inline int host_concurrency() { return Kokkos::DefaultHostExecutionSpace().concurrency(); }

}  // namespace kten::detail::compat
