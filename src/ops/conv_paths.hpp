// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the convolutions' paths, which conv.cpp chooses among, and what they share: the
// geometry, E (the zero-extended operand, conv_extension.cpp) and the micro-tile on the GEMM's
// micro-kernels. The paths: the implicit GEMM on every device (conv_gemm.cpp), cpu()'s direct
// convolution (conv_direct.cpp) and cpu()'s Winograd (conv_winograd.cpp).

#include <cstdint>
#include <type_traits>

#include <kten/tensor.hpp>

#include "gemm_kernel.hpp"

namespace kten::detail {

/// \brief A convolution's sizes, spatial axes as (d, h, w): the input side (x, what im2col reads)
/// and the output side (y), per group cin_g and cout_g channels.
struct ConvGeometry {
  std::int64_t batch = 1, groups = 1, cin_g = 1, cout_g = 1;
  std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  KOKKOS_INLINE_FUNCTION std::int64_t in_pix() const { return in[0] * in[1] * in[2]; }
  KOKKOS_INLINE_FUNCTION std::int64_t out_pix() const { return out[0] * out[1] * out[2]; }
  KOKKOS_INLINE_FUNCTION std::int64_t kvol() const { return k[0] * k[1] * k[2]; }
};

/// \brief Which of the three products a launch computes (conv.cpp's overview).
enum class ConvProduct { forward, grad_input, grad_weight };

/// \brief d[e * ds] = row[(i0 + e) * rs] where 0 <= i0 + e < n, else zero, for e < count: one
/// row segment of the im2col operand at stride 1, the padding as two zero fills around a plain
/// copy (a vector copy when both sides are contiguous).
template <class T>
KOKKOS_INLINE_FUNCTION void copy_run(T* d, std::int64_t ds, const T* row, std::int64_t rs, std::int64_t i0, std::int64_t n,
                                     std::int64_t count) {
  const std::int64_t lo = -i0 < 0 ? 0 : -i0 < count ? -i0 : count, end = n - i0 < count ? n - i0 : count, hi = end > lo ? end : lo;
  for (std::int64_t e = 0; e < lo; ++e) d[e * ds] = T(0);
  if (ds == 1 && rs == 1) {
    const T* r = row + i0;
    for (std::int64_t e = lo; e < hi; ++e) d[e] = r[e];
  } else {
    for (std::int64_t e = lo; e < hi; ++e) d[e * ds] = row[(i0 + e) * rs];
  }
  for (std::int64_t e = hi; e < count; ++e) d[e * ds] = T(0);
}

/// \brief f(std::integral_constant<int, E>) for the smallest E = Max - i Step (i >= 0) that is >= v:
/// a strip's height (Step 1) or a panel's width in whole vectors as a micro-tile's compile-time
/// extent.
template <int Max, int Step, class F>
void with_extent(int v, F&& f) {
  if constexpr (Max > Step) {
    if (v <= Max - Step) return with_extent<Max - Step, Step>(v, f);
  }
  f(std::integral_constant<int, Max>{});
}

/// \brief c (h x w, row stride ldc) += a (h x kb, rows lda apart) b (kb rows ldb apart), h <= MR,
/// w <= NR, summed over `parts` (micro_tile's a_step and b_offsets): the micro-kernel of the strip's
/// height and the narrowest whole-vector width, through a buffer when w is narrower (the direct
/// convolution and ConvWeightHostKernel, whose operands are read in place). With Accumulate false,
/// c = a b (Winograd's products: no zeroing of c first). One instantiation per element type,
/// whichever host space runs the kernel.
template <class T, bool Accumulate = true>
void conv_tile(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, int kb, T* c, std::int64_t ldc, int h, int w,
               int parts = 1, std::int64_t a_step = 0, const std::int64_t* b_offsets = nullptr) {
  using Gemm = HostGemmKernel<T, TeamMember<HostBackend>>;  // its micro-kernels are static: any member type
  with_extent<Gemm::MR, 1>(h, [&](auto rows) {
    with_extent<Gemm::NR, HostGemmBlocking<T>::lanes>(w, [&](auto cols) {
      constexpr int R = decltype(rows)::value, W = decltype(cols)::value;
      if (W == w)
        return Gemm::template micro_tile<false, W, R, Accumulate>(a, lda, b, kb, c, ldc, ldb, parts, a_step, b_offsets);
      T edge[R * W] = {};
      if (Accumulate)
        for (int r = 0; r < R; ++r)
          for (int j = 0; j < w; ++j) edge[r * W + j] = c[r * ldc + j];
      Gemm::template micro_tile<false, W, R>(a, lda, b, kb, edge, W, ldb, parts, a_step, b_offsets);
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < w; ++j) c[r * ldc + j] = edge[r * W + j];
    });
  });
}

/// \brief A convolution's zero-extended operand E (the GPU kernel's B; cpu()'s direct convolution
/// and weight gradient): per batch item and channel, over `ext` extents, E[e] = src[(e - front) /
/// step] (d, h, w) where that divides and lies inside src's extents `src`, else 0; then `tail`
/// zeros. The forward and
/// grad_weight extend X by the padding; grad_input spreads dY out by the stride (step) with a
/// front of (k - 1) dil - pad, so that every tap reads E at a fixed displacement. With `phases`
/// above 1 (cpu()'s Winograd, R of them, step 1 along w; host only: a whole row per index), each
/// row of E holds its columns R j + p, phase p after phase p - 1, ext[2] / R of each.
struct ConvExtension {
  std::int64_t front[3], ext[3], src[3], step[3], tail;
  int phases;
};

/// \brief The points of F(R^D, 3^D): (R + 2)^D.
constexpr std::int64_t winograd_points(int dims, int r) { return dims == 2 ? (r + 2) * (r + 2) : (r + 2) * (r + 2) * (r + 2); }

// --- E (conv_extension.cpp) --------------------------------------------------------------------

/// \brief The (n, c, d, h, w) strides of a tensor (N, C, spatial...) of `dims` spatial axes, the
/// missing leading spatial axes (extent 1) with stride 0.
void strides_3d(const Tensor& t, int dims, std::int64_t* out);
/// \brief E for `channels` channels per batch item of `src` (any strided view of `dims` spatial
/// axes), as `x` extends it.
Tensor conv_extension(const char* op, const Tensor& src, int dims, std::int64_t batch, std::int64_t channels,
                      const ConvExtension& x);
/// \brief How `product` extends the operand it gathers into E (ConvExtension), `tail` zeros after.
ConvExtension extension_of(ConvProduct product, const ConvGeometry& g, std::int64_t tail);

// --- the paths -----------------------------------------------------------------------------------

/// \brief The implicit GEMM (conv_gemm.cpp): C = A * gathered `src`, with a bias per channel of C
/// (or none); `pieces` slabs per batch item for grad_weight.
Tensor conv_product(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a,
                    const Tensor& src, const Tensor* bias, std::int64_t pieces, const Shape& c_shape);
/// \brief Whether a product on `src` runs as cpu()'s direct convolution (conv_direct.cpp).
bool direct_on(ConvProduct product, const ConvGeometry& g, const Tensor& src);
/// \brief cpu()'s direct convolution of a forward or grad_input (conv_direct.cpp).
Tensor conv_direct(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a, const Tensor& src,
                   const Tensor* bias, const Shape& c_shape);
/// \brief R of cpu()'s Winograd tiles for a product, or 0 where it does not run (conv_winograd.cpp).
int winograd_tile(const ConvGeometry& g, int dims, std::int64_t element_bytes);
/// \brief cpu()'s Winograd convolution of a forward or grad_input (conv_winograd.cpp).
Tensor conv_winograd(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a, const Tensor& src,
                     const Tensor* bias, const Shape& c_shape);

}  // namespace kten::detail
