// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file kokkos_compat.hpp
/// \brief Every difference between Kokkos 3.4 and Kokkos 4.x/5.x that kten meets, in one place.

#include <cmath>

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

/// \brief Fused multiply-add a * b + c with one rounding, in host and device code, where a kernel
/// needs exactly one (whether a plain a * b + c contracts is the compiler's choice: GCC does for
/// C++ by default, -ffp-contract=fast; nvcc and hipcc do in device code); CUDA and HIP device code
/// call the device library's fma.
template <class T>
KOKKOS_INLINE_FUNCTION T fma(T a, T b, T c) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// \brief Fully unrolls the next loop (constant trip count): GCC only vectorizes register-blocked
/// micro-kernels once they are unrolled.
#if defined(__CUDA_ARCH__) || defined(__clang__)
#define KTEN_UNROLL _Pragma("unroll")
#elif defined(__NVCC__)  // nvcc's host pass: its front end knows neither spelling
#define KTEN_UNROLL
#elif defined(__GNUC__)
#define KTEN_UNROLL _Pragma("GCC unroll 32")
#else
#define KTEN_UNROLL
#endif

/// \brief Asserts that the next loop's iterations are independent (no store feeds a later load):
/// a loop with more streams than GCC checks for overlap at run time (10) is otherwise left scalar.
/// GCC only: clang's `vectorize(assume_safety)` is a warning (an error under -Werror) wherever its
/// optimiser cannot vectorise the loop, as at -O1.
#if defined(__clang__) || defined(__NVCC__)  // nvcc's front end does not know the GCC spelling
#define KTEN_IVDEP
#elif defined(__GNUC__)
#define KTEN_IVDEP _Pragma("GCC ivdep")
#else
#define KTEN_IVDEP
#endif

/// \brief 1 in the device pass of a CUDA or HIP compilation, else 0: a host-only branch of a kernel
/// that is also compiled for GPUs is left out there (`if constexpr (!KTEN_DEVICE_PASS)`), so that
/// its registers do not count against every GPU launch of the kernel.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define KTEN_DEVICE_PASS 1
#else
#define KTEN_DEVICE_PASS 0
#endif

/// \brief Keeps a device function out of line on AMD GPUs: inlined into ResampleGradKernel's loops
/// over three axes, every axis' parameters stayed live in scalar registers, and the kernel spilled 4
/// of gfx90a's 102 (out of line: 101, no spill). Elsewhere the function inlines as usual.
#if defined(__HIP_DEVICE_COMPILE__)
#define KTEN_OUT_OF_LINE_ON_AMD __attribute__((noinline))
#else
#define KTEN_OUT_OF_LINE_ON_AMD
#endif

/// \brief Host threads of the default host execution space (static in 3.x, a member in 4.x).
inline int host_concurrency() { return Kokkos::DefaultHostExecutionSpace().concurrency(); }

#ifdef KOKKOS_ENABLE_OPENMP
/// \brief True when the calling thread may launch team kernels on the OpenMP thread pool. Kokkos
/// 3.x ties the pool to the thread that initialised Kokkos, outside any parallel region (from
/// elsewhere range kernels run inline on the caller and team kernels throw); Kokkos 4 launches
/// from any thread outside a parallel region (its in_parallel() is deprecated, then removed).
inline bool openmp_pool_usable_here() {
#if KOKKOS_VERSION < 40000
  return !Kokkos::OpenMP::in_parallel();
#else
  return omp_get_level() == 0;
#endif
}
#endif

}  // namespace kten::detail::compat

/// \brief Kokkos 3.x may call a custom reducer's join with volatile arguments; 4.x never does and
/// dropped the requirement. Expands to that overload where it is needed, with `body` over dest, src.
#if KOKKOS_VERSION < 40000
#define KTEN_VOLATILE_JOIN(T, body) \
  KOKKOS_INLINE_FUNCTION void join(volatile T& dest, const volatile T& src) const { body }
#else
#define KTEN_VOLATILE_JOIN(T, body)
#endif
