// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the host's vector unit as this build's compiler targets it (the -march that the Kokkos
// architecture carries), decided at compile time, and the GEMM register and cache blocking that
// fits it. No intrinsics: the kernels are plain loops the compiler vectorises; this header only
// says how wide the vectors are, how many registers hold them and how big the caches are.

#include <cmath>

#include "core/kokkos_compat.hpp"

namespace kten::detail {

/// \brief The host vector instruction set: AVX-512, AVX2 with FMA, or a generic 128-bit fallback
/// (SSE, NEON, SVE built without a fixed vector length, ...). `vector_bytes` is one register.
struct HostIsa {
#if defined(__AVX512F__)
  static constexpr const char* name = "AVX-512";
  static constexpr int vector_bytes = 64;
#elif defined(__AVX2__) && defined(__FMA__)
  static constexpr const char* name = "AVX2+FMA";
  static constexpr int vector_bytes = 32;
#else
  static constexpr const char* name = "generic 128-bit";
  static constexpr int vector_bytes = 16;
#endif
};

/// \brief The host GEMM's blocking for element type T, in the spirit of BLIS' reference shapes for
/// each ISA. A micro-tile is `rows` x `cols` of C held in registers: `cols` spans whole vectors
/// (the B operand is loaded as vectors, A broadcast), so each k step issues rows x cols/lanes fmas
/// for cols/lanes loads and `rows` broadcasts. `kc` is the k-slice depth and `nc` the widest column
/// block: a packed kc x nc slice of B stays in L2 while every row of the tile streams past it, and
/// a rows x kc strip of A stays in L1 across the slice's micro-tiles.
///  - AVX-512 (32 registers, 1-2 MiB L2): float 10 x 32 (2 x 10 zmm accumulators; BLIS' 32 x 12
///    spills in GCC), double 6 x 24 (6 x 3 zmm accumulators; BLIS' 16 x 14 spills too); k-slices
///    of 384 and column blocks sized for a 2 MiB L2.
///  - AVX2 (16 registers, 256 KiB L2 on Haswell): 6 x 16 floats, 6 x 8 doubles (BLIS' Haswell).
///  - generic 128-bit: 6 rows of two vectors, the AVX2 shape at half width.
///
/// `product_rows` bounds the height of a tile written whole without accumulating into C
/// (Winograd's products, conv_winograd.cpp). With 16 vector registers GCC 12 loads that form's six
/// broadcasts ahead of its fmas and keeps three of the 6-row tile's twelve accumulators on the
/// stack; 5 rows stay in registers (Zen 3: the 64-channel 2-D Winograd forward 35% faster).
template <class T>
struct HostGemmBlocking {
  static constexpr int lanes = HostIsa::vector_bytes / static_cast<int>(sizeof(T));
#if defined(__AVX512F__)
  static constexpr int rows = sizeof(T) == 4 ? 10 : 6, cols = (sizeof(T) == 4 ? 2 : 3) * lanes, kc = 384;
  static constexpr int nc = sizeof(T) == 4 ? 480 : 240, product_rows = rows;
#elif defined(__AVX2__) && defined(__FMA__)
  static constexpr int rows = 6, cols = 2 * lanes, kc = 256, nc = sizeof(T) == 4 ? 176 : 72, product_rows = 5;
#else
  static constexpr int rows = 6, cols = 2 * lanes, kc = 256, nc = sizeof(T) == 4 ? 128 : 64, product_rows = 5;
#endif
  static_assert(nc % cols == 0, "the column block is whole micro-tiles");
};

/// \brief a * b + c for the host micro-kernels: one fused instruction where the target has it; a
/// multiply and an add where std::fma would be a library call (x86-64 without FMA: 100x slower).
template <class T>
KOKKOS_INLINE_FUNCTION T host_fma(T a, T b, T c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(FP_FAST_FMA)
  return compat::fma(a, b, c);
#else
  return a * b + c;
#endif
}

}  // namespace kten::detail
