// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Convolutions (conv1d/2d/3d and their transposes), each with its gradient.
//
// One kernel serves 1-D, 2-D and 3-D: lower ranks are 3-D with unit axes (extent 1, kernel 1,
// stride 1, no padding). A convolution is three matrix products per (batch item, group), each with
// one operand gathered on the fly from the implicit im2col matrix (never materialised, not even a
// whole batch item's):
//   forward       Y (C_out/g x out_pix)  = W (C_out/g x C_in/g kvol)  * im2col(X)
//   grad_input    dX (C_in/g x in_pix)   = W^T (C_in/g x C_out/g kvol) * col2im-gather(dY)
//   grad_weight   dW (C_out/g x C_in/g kvol) = dY (C_out/g x pixels) * im2col(X)^T
// where col2im-gather reads, for each input pixel and kernel tap, the output pixel that tap came
// from (zero where the stride skips it), so the gradient is a gather, not a scatter with atomics.
// The transposed convolutions are the same products with the roles swapped: conv_transpose's
// forward is grad_input, its input gradient the forward, its weight gradient grad_weight.
// A GPU gathers from E, a zero-extended copy of the gathered tensor (dY spread out by the stride
// for grad_input), so that an element of the implicit operand is E at its row's offset plus its
// column's. On cpu(), the forward (stride 1 along w) and grad_input (stride 1) with enough
// channels and long enough rows are direct convolutions instead: a sum over taps of GEMM
// micro-tiles that read E in place (ConvDirectHostKernel), and grad_weight at stride 1 along w
// reads E in place too (ConvWeightHostKernel); the rest packs straight from the tensor. A 3x3
// (3x3x3) forward or grad_input at stride 1 with enough channels runs as Winograd on E instead
// (ConvWinogradHostKernel, winograd_tile): F(4x4, 3x3) for 2-D float32 from 16 channels, else
// F(2x2, 3x3) or F(2x2x2, 3x3x3) from 32; a GEMM per point of the transform, on the same
// micro-tiles. pad, which the padded convolution layers call first, is in pad.cpp.
#include "conv.hpp"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checked.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "fast_div.hpp"
#include "gemm_kernel.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
namespace {

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

/// \brief Which of the three products a launch computes (see the file's comment).
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

/// \brief One (batch item, group) product C (m x n, row stride ldc) = A (m x k, row stride lda)
/// * B, B gathered from `src` (the gathered tensor's first element of this item and group); for
/// grad_weight, B's rows are the output pixels from `first` on.
template <class T>
struct ConvSlab {
  const T* a;
  std::int64_t lda;
  const T* src;
  T* c;
  std::int64_t ldc;
  const T* bias;  // one per row of C, or null
  std::int64_t m, n, k, first;
};

/// \brief The operands of a launch: A (the weight, its per-group transpose, or dY), the gathered
/// tensor and its (n, c, d, h, w) strides, C and the bias per channel of C.
template <class T>
struct ConvArgs {
  ConvGeometry g;
  ConvProduct product;
  const T* a;
  const T* src;
  std::int64_t ss[5];
  T* c;
  const T* bias;
  std::int64_t pieces;  // grad_weight: the output pixels of a batch item split into this many slabs

  /// \brief Slabs: batch items x groups, times pieces for grad_weight.
  std::int64_t slabs() const { return g.batch * g.groups * (product == ConvProduct::grad_weight ? pieces : 1); }

  KOKKOS_INLINE_FUNCTION ConvSlab<T> slab(std::int64_t s) const {
    const std::int64_t grp = s % g.groups, kvol = g.kvol(), in_pix = g.in_pix(), out_pix = g.out_pix();
    if (product == ConvProduct::forward) {
      const std::int64_t n = s / g.groups, k = g.cin_g * kvol;
      return {a + grp * g.cout_g * k, k, src + n * ss[0] + grp * g.cin_g * ss[1],
              c + (n * g.groups + grp) * g.cout_g * out_pix, out_pix, bias ? bias + grp * g.cout_g : nullptr,
              g.cout_g, out_pix, k, 0};
    }
    if (product == ConvProduct::grad_input) {
      const std::int64_t n = s / g.groups, k = g.cout_g * kvol;
      return {a + grp * g.cin_g * k, k, src + n * ss[0] + grp * g.cout_g * ss[1],
              c + (n * g.groups + grp) * g.cin_g * in_pix, in_pix, bias ? bias + grp * g.cin_g : nullptr,
              g.cin_g, in_pix, k, 0};
    }
    const std::int64_t chunk = s / g.groups, n = chunk / pieces, piece = chunk % pieces;
    const std::int64_t len = (g.out[0] * g.out[1] + pieces - 1) / pieces * g.out[2], first = piece * len;  // whole rows
    const std::int64_t k = first < out_pix ? (out_pix - first < len ? out_pix - first : len) : 0;
    return {a + (n * g.groups + grp) * g.cout_g * out_pix + first, out_pix, src + n * ss[0] + grp * g.cin_g * ss[1],
            c + (chunk * g.groups + grp) * g.cout_g * g.cin_g * kvol, g.cin_g * kvol, nullptr,
            g.cout_g, g.cin_g * kvol, k, first};
  }

  /// \brief A flat index over (d, h, w) extents split back into (d, h, w): two fixed divisions.
  struct Unflatten {
    FastDiv w, h;  // by the w extent, then by the h extent
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t p, std::int64_t& d, std::int64_t& h_out, std::int64_t& w_out) const {
      const std::int64_t q = w.div(p);
      w_out = p - q * w.divisor();
      d = h.div(q);
      h_out = q - d * h.divisor();
    }
  };
  Unflatten taps, out_pixels, in_pixels;
  FastDiv by_kvol;

  /// \brief Sets the fixed divisions by the geometry's extents (after g is set).
  void prepare_divisions() {
    const auto unflatten = [](const std::int64_t* sizes) {  // an extent may be 0 (no pixels: never divided)
      return Unflatten{FastDiv(sizes[2], sizes[0] * sizes[1] * sizes[2]), FastDiv(sizes[1], sizes[0] * sizes[1])};
    };
    taps = unflatten(g.k);
    out_pixels = unflatten(g.out);
    in_pixels = unflatten(g.in);
    // p / kvol over a slab's rows (forward, grad_input) or j / kvol over its columns (grad_weight)
    by_kvol = FastDiv(g.kvol(), std::max(g.cin_g, g.cout_g) * g.kvol());
  }

  /// \brief The kernel tap kp as (kd, kh, kw), and a pixel index of the output or input as (d, h, w).
  KOKKOS_INLINE_FUNCTION void tap(std::int64_t kp, std::int64_t& kd, std::int64_t& kh, std::int64_t& kw) const {
    taps(kp, kd, kh, kw);
  }

  /// \brief The GPU kernel's gather from E, the extended operand (conv_extension; ss are E's
  /// strides): the offset of row q = channel * kvol + tap of the (channel, tap) side, the channel's
  /// plus the tap's displacement (grad_input: the flipped tap's, (k - 1 - t) dil).
  KOKKOS_INLINE_FUNCTION std::int64_t tap_offset(std::int64_t q) const {
    const std::int64_t channel = by_kvol.div(q);
    std::int64_t t[3];
    taps(q - channel * by_kvol.divisor(), t[0], t[1], t[2]);
    std::int64_t offset = channel * ss[1];
    for (int a = 0; a < 3; ++a)
      offset += (product == ConvProduct::grad_input ? g.k[a] - 1 - t[a] : t[a]) * g.dil[a] * ss[2 + a];
    return offset;
  }
  /// \brief E's offset of a pixel of the pixel side: an output pixel times the stride (forward,
  /// grad_weight), or an input pixel (grad_input: E holds dY spread out by the stride).
  KOKKOS_INLINE_FUNCTION std::int64_t pixel_offset(std::int64_t pixel) const {
    std::int64_t q[3];
    const bool input = product == ConvProduct::grad_input;
    (input ? in_pixels : out_pixels)(pixel, q[0], q[1], q[2]);
    std::int64_t offset = 0;
    for (int a = 0; a < 3; ++a) offset += q[a] * (input ? 1 : g.stride[a]) * ss[2 + a];
    return offset;
  }

  /// \brief The output pixel index along one axis that tap t of input index i came from: (i + pad -
  /// t dil) / stride when that divides and lies inside `out`, else -1.
  KOKKOS_INLINE_FUNCTION std::int64_t source(int axis, std::int64_t i, std::int64_t t) const {
    const std::int64_t q = i + g.pad[axis] - t * g.dil[axis];
    if (g.stride[axis] == 1) return q >= 0 && q < g.out[axis] ? q : -1;  // no 64-bit division
    if (q < 0 || q % g.stride[axis] != 0) return -1;
    const std::int64_t o = q / g.stride[axis];
    return o < g.out[axis] ? o : -1;
  }

  /// \brief `count` consecutive elements of im2col(X) along output pixels from (od, oh, ow), for
  /// tap (kd, kh, kw) of one channel, written to dst[t * dst_stride]: the host's packing, without
  /// divisions. Walks the pixels row by row, the bounds of d and h checked once per row.
  void im2col_run(const T* x, std::int64_t kd, std::int64_t kh, std::int64_t kw, std::int64_t od, std::int64_t oh,
                  std::int64_t ow, std::int64_t count, T* dst, std::int64_t dst_stride) const {
    const std::int64_t sw = g.stride[2], xw = ss[4];
    for (std::int64_t t = 0; t < count;) {
      const std::int64_t seg = std::min(count - t, g.out[2] - ow);
      const std::int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0], ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
      T* d = dst + t * dst_stride;
      const std::int64_t iw0 = ow * sw - g.pad[2] + kw * g.dil[2];
      if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
        for (std::int64_t e = 0; e < seg; ++e) d[e * dst_stride] = T(0);
      } else if (sw == 1) {
        copy_run(d, dst_stride, x + id * ss[2] + ih * ss[3], xw, iw0, g.in[2], seg);
      } else {
        const T* row = x + id * ss[2] + ih * ss[3];
        for (std::int64_t e = 0; e < seg; ++e) {
          const std::int64_t iw = iw0 + e * sw;
          d[e * dst_stride] = iw >= 0 && iw < g.in[2] ? row[iw * xw] : T(0);
        }
      }
      t += seg;
      ow = 0;
      if (++oh == g.out[1]) oh = 0, ++od;
    }
  }

  /// \brief `count` consecutive elements of col2im-gather(dY) along input pixels from (id, ih,
  /// iw), for tap (kd, kh, kw) of one channel (the host's packing of grad_input).
  void col2im_run(const T* y, std::int64_t kd, std::int64_t kh, std::int64_t kw, std::int64_t id, std::int64_t ih,
                  std::int64_t iw, std::int64_t count, T* dst) const {
    const std::int64_t sw = g.stride[2], yw = ss[4];
    for (std::int64_t t = 0; t < count;) {
      const std::int64_t seg = std::min(count - t, g.in[2] - iw);
      const std::int64_t od = source(0, id, kd), oh = source(1, ih, kh);
      T* d = dst + t;
      const std::int64_t q0 = iw + g.pad[2] - kw * g.dil[2];  // q = ow * stride
      if (od < 0 || oh < 0) {
        for (std::int64_t e = 0; e < seg; ++e) d[e] = T(0);
      } else if (sw == 1) {
        copy_run(d, 1, y + od * ss[2] + oh * ss[3], yw, q0, g.out[2], seg);
      } else {
        const T* row = y + od * ss[2] + oh * ss[3];
        for (std::int64_t e = 0; e < seg; ++e) {
          const std::int64_t q = q0 + e;
          d[e] = q >= 0 && q % sw == 0 && q / sw < g.out[2] ? row[q / sw * yw] : T(0);
        }
      }
      t += seg;
      iw = 0;
      if (++ih == g.in[1]) ih = 0, ++id;
    }
  }
};

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

/// \brief cpu(): compute-bound, BLIS' structure on the GEMM's own micro-kernels (HostGemmKernel's
/// micro_tile and edge_tile, the register tile of host_isa.hpp). One thread per tile of one slab's
/// C: per k-slice it packs the tile's kc x cols slice of the im2col operand into an L2-sized block
/// of micro-panels straight from the tensor (no im2col buffer), then streams strips of A (rows
/// contiguous: read in place, the last partial strip packed) past it. The gathering costs a few
/// integer operations per packed element, against the m (C's rows: output or input channels per
/// group) fmas each packed element feeds.
template <class T, class Member>
struct ConvHostKernel {
  using Gemm = HostGemmKernel<T, Member>;
  static constexpr int MR = Gemm::MR, NR = Gemm::NR, KC = Gemm::KC;
  ConvArgs<T> args;
  HostGemmPlan plan;

  /// \brief The most micro-panels a tile holds (HostGemmBlocking's nc / cols, at most 15).
  static constexpr int max_panels = 32;
  static_assert(HostGemmBlocking<T>::nc / NR <= max_panels, "a tile (at most nc wide) has at most max_panels panels");

  /// \brief Packs the im2col operand's rows k0 .. k0+kb, columns j0 .. j1 as micro-panels of NR
  /// columns, zero past j1. `starts` holds the pixel (d, h, w) where each panel starts (forward,
  /// grad_input): taps are decomposed once per row, pixels once per tile.
  void pack_b(T* Bs, const ConvSlab<T>& sl, std::int64_t k0, int kb, std::int64_t j0, std::int64_t j1,
              const std::int64_t (*starts)[3]) const {
    const std::int64_t kvol = args.g.kvol(), cs = args.ss[1];
    std::int64_t kd, kh, kw;
    if (args.product == ConvProduct::grad_weight) {  // columns are (channel, tap), rows output pixels
      std::int64_t od, oh, ow;
      args.out_pixels(sl.first + k0, od, oh, ow);
      for (std::int64_t jb = j0; jb < j1; jb += NR) {
        T* panel = Bs + (jb - j0) * kb;
        for (int j = 0; j < NR; ++j) {
          if (jb + j < j1) {
            args.tap((jb + j) % kvol, kd, kh, kw);
            args.im2col_run(sl.src + (jb + j) / kvol * cs, kd, kh, kw, od, oh, ow, kb, panel + j, NR);
          } else {
            for (int p = 0; p < kb; ++p) panel[p * NR + j] = T(0);
          }
        }
      }
      return;
    }
    for (int p = 0; p < kb; ++p) {  // rows are (channel, tap), columns pixels
      const T* channel = sl.src + (k0 + p) / kvol * cs;
      args.tap((k0 + p) % kvol, kd, kh, kw);
      for (std::int64_t jb = j0, panel = 0; jb < j1; jb += NR, ++panel) {
        T* out = Bs + (jb - j0) * kb + p * NR;
        const int w = j1 - jb < NR ? static_cast<int>(j1 - jb) : NR;
        const std::int64_t* at = starts[panel];
        if (args.product == ConvProduct::forward) args.im2col_run(channel, kd, kh, kw, at[0], at[1], at[2], w, out, 1);
        else args.col2im_run(channel, kd, kh, kw, at[0], at[1], at[2], w, out);
        for (int j = w; j < NR; ++j) out[j] = T(0);
      }
    }
  }

  void operator()(const Member& team) const {
    const ConvSlab<T> sl = args.slab(team.league_rank() / plan.tiles());
    const std::int64_t tile = team.league_rank() % plan.tiles();
    const std::int64_t i0 = tile / plan.tiles_n * plan.rows, j0 = tile % plan.tiles_n * plan.cols;
    const std::int64_t i1 = std::min(i0 + plan.rows, sl.m), j1 = std::min(j0 + plan.cols, sl.n);
    T* Bs = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * KC * plan.cols, 64));
    T* As = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * MR * KC, 64));
    for (std::int64_t i = i0; i < i1; ++i)
      for (std::int64_t j = j0; j < j1; ++j) sl.c[i * sl.ldc + j] = sl.bias ? sl.bias[i] : T(0);
    std::int64_t starts[max_panels][3] = {};  // the pixel where each panel starts
    if (args.product != ConvProduct::grad_weight)
      for (std::int64_t jb = j0, panel = 0; jb < j1; jb += NR, ++panel)
        (args.product == ConvProduct::forward ? args.out_pixels : args.in_pixels)(jb, starts[panel][0], starts[panel][1],
                                                                                  starts[panel][2]);
    for (std::int64_t k0 = 0; k0 < sl.k; k0 += KC) {
      const int kb = sl.k - k0 < KC ? static_cast<int>(sl.k - k0) : KC;
      pack_b(Bs, sl, k0, kb, j0, j1, starts);
      // Strips of at most MR rows, as even as they go (32 channels: 4 of 8, not 10 + 10 + 10 + 2
      // padded to 10), each read in place; only a strip's last, narrow panel packs it.
      const std::int64_t strips = (i1 - i0 + MR - 1) / MR, base = (i1 - i0) / strips, taller = (i1 - i0) % strips;
      for (std::int64_t s = 0, i = i0; s < strips; i += base + (s < taller), ++s) {
        const int h = static_cast<int>(base + (s < taller));
        const T* a = sl.a + i * sl.lda + k0;
        for (std::int64_t jb = j0; jb < j1; jb += NR) {
          const int w = j1 - jb < NR ? static_cast<int>(j1 - jb) : NR;
          const T* b = Bs + (jb - j0) * kb;
          T* c = sl.c + i * sl.ldc + jb;
          if (w == NR) {
            with_extent<MR, 1>(h, [&](auto rows) { Gemm::template micro_tile<false, NR, decltype(rows)::value>(a, sl.lda, b, kb, c, sl.ldc); });
          } else if (h == MR) {
            Gemm::template edge_tile<false, NR>(a, sl.lda, b, kb, c, sl.ldc, h, w);
          } else {
            for (int p = 0; p < kb; ++p)
              for (int r = 0; r < MR; ++r) As[p * MR + r] = r < h ? a[r * sl.lda + p] : T(0);
            Gemm::template edge_tile<true, NR>(As, 0, b, kb, c, sl.ldc, h, w);
          }
        }
      }
    }
  }
};

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

/// \brief Whether cpu()'s grad_weight runs as ConvWeightHostKernel on E: stride 1 along w (E's rows
/// then feed the micro-kernel in place) and products small enough for a thread's scratch (2^20
/// elements).
bool weight_direct_applies(const ConvGeometry& g) {
  return g.stride[2] == 1 && g.kvol() * g.cin_g * g.cout_g <= (std::int64_t(1) << 20);
}

/// \brief cpu(), grad_weight at stride 1 along w on E (X zero-extended by the padding, as the
/// forward extends it): no packing of the im2col operand at all. For one output row and one tap,
/// the input the tap reads is, channel by channel, one contiguous run of E, the channels ss[1]
/// apart: the micro-kernel reads it in place as its A operand (rows: input channels), against dY^T
/// of that row (columns: output channels), packed once per chunk of rows and reused by every tap
/// and strip.
/// The rows of a chunk within one plane lie a fixed step apart in E, so one micro-kernel call sums
/// the whole chunk (micro_tile's parts) and C's tile is loaded and stored once per chunk, not per
/// row. One thread per slab (batch item, group, band of output rows) sums into kvol (C_in/g x
/// C_out/g) products in scratch, written to the slab's partial dW at the end. Compute-bound like
/// the GEMM; E's zeros make the padding's taps add 0 * dY, NaN where dY is not finite.
template <class T, class Member>
struct ConvWeightHostKernel {
  using Gemm = HostGemmKernel<T, Member>;
  static constexpr int MR = Gemm::MR, NR = Gemm::NR;
  ConvArgs<T> args;  // src: E, ss its strides

  static std::int64_t panels(const ConvGeometry& g) { return (g.cout_g + NR - 1) / NR; }
  /// \brief Output rows packed and summed per call: as many as fill about 256 KiB, at most 16.
  static std::int64_t chunk_rows(const ConvGeometry& g) {
    const std::int64_t row = std::max<std::int64_t>(1, panels(g) * NR * g.out[2]);
    return std::clamp<std::int64_t>(std::int64_t(256 * 1024 / sizeof(T)) / row, 1, 16);
  }
  static std::size_t scratch_bytes(const ConvGeometry& g) {
    return sizeof(T) * static_cast<std::size_t>(g.kvol() * g.cin_g * g.cout_g + chunk_rows(g) * panels(g) * NR * g.out[2]) +
           sizeof(std::int64_t) * static_cast<std::size_t>(chunk_rows(g)) + 3 * 64;
  }

  void operator()(const Member& team) const {
    const ConvGeometry& g = args.g;
    const ConvSlab<T> sl = args.slab(team.league_rank());
    const std::int64_t cin = g.cin_g, cout = g.cout_g, kvol = g.kvol(), ow_n = g.out[2], lda = args.ss[1];
    const std::int64_t chunk = chunk_rows(g), panel_size = chunk * ow_n * NR, row_step = g.stride[1] * args.ss[3];
    T* Cs = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * kvol * cin * cout, 64));
    T* Bs = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * panels(g) * panel_size, 64));
    std::int64_t* row_at = static_cast<std::int64_t*>(team.team_scratch(1).get_shmem_aligned(sizeof(std::int64_t) * chunk, 64));
    for (std::int64_t q = 0; q < chunk; ++q) row_at[q] = q * ow_n * NR;  // a packed row within its panel
    for (std::int64_t e = 0; e < kvol * cin * cout; ++e) Cs[e] = T(0);
    const std::int64_t strips = (cin + MR - 1) / MR, base = strips > 0 ? cin / strips : 0, taller = strips > 0 ? cin % strips : 0;
    const std::int64_t end = (sl.first + sl.k) / ow_n;
    for (std::int64_t row = sl.first / ow_n; row < end;) {
      const std::int64_t od = row / g.out[1], oh = row % g.out[1];
      const std::int64_t rows = std::min({chunk, end - row, g.out[1] - oh});  // within one plane
      for (std::int64_t q = 0; q < panels(g); ++q)
        for (std::int64_t r = 0; r < rows; ++r)
          for (int j = 0; j < NR; ++j) {
            const std::int64_t co = q * NR + j;
            T* b = Bs + q * panel_size + r * ow_n * NR + j;
            if (co < cout) copy_run(b, NR, sl.a + co * sl.lda + (row + r) * ow_n - sl.first, 1, 0, ow_n, ow_n);
            else for (std::int64_t ow = 0; ow < ow_n; ++ow) b[ow * NR] = T(0);
          }
      const T* e_row = sl.src + od * g.stride[0] * args.ss[2] + oh * row_step;
      for (std::int64_t t = 0; t < kvol; ++t) {
        std::int64_t kd, kh, kw;
        args.tap(t, kd, kh, kw);
        const T* x = e_row + kd * g.dil[0] * args.ss[2] + kh * g.dil[1] * args.ss[3] + kw * g.dil[2];
        for (std::int64_t s = 0, ci = 0; s < strips; ci += base + (s < taller), ++s)
          for (std::int64_t q = 0; q < panels(g); ++q)
            conv_tile<T>(x + ci * lda, lda, Bs + q * panel_size, NR, static_cast<int>(ow_n), Cs + (t * cin + ci) * cout + q * NR,
                         cout, static_cast<int>(base + (s < taller)), static_cast<int>(std::min<std::int64_t>(NR, cout - q * NR)),
                         static_cast<int>(rows), row_step, row_at);
      }
      row += rows;
    }
    for (std::int64_t t = 0; t < kvol; ++t)
      for (std::int64_t ci = 0; ci < cin; ++ci)
        for (std::int64_t co = 0; co < cout; ++co) sl.c[co * sl.ldc + ci * kvol + t] = Cs[(t * cin + ci) * cout + co];
  }
};

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

/// \brief The source index along one axis of E's index e, or -1 for a zero.
KOKKOS_INLINE_FUNCTION std::int64_t extension_source(const ConvExtension& x, int axis, std::int64_t e) {
  const std::int64_t q = e - x.front[axis], step = x.step[axis];
  if (q < 0) return -1;
  if (step == 1) return q < x.src[axis] ? q : -1;  // no 64-bit division
  return q % step == 0 && q / step < x.src[axis] ? q / step : -1;
}

/// \brief One row of E split into N phases (ConvExtension::phases), host only: d[p len + j] = row[(N j
/// + p - front) rs] where that column lies inside the row's n, else 0. The columns whose N
/// sources all lie inside, from a contiguous row, in one pass that reads N adjacent elements and
/// writes one to each phase (a de-interleave GCC vectorises; N strided passes over the row took
/// twice E's time for N = 4), the rest one by one.
template <int N, class T>
void split_row(T* d, std::int64_t len, const T* row, std::int64_t rs, std::int64_t front, std::int64_t n) {
  const std::int64_t lo = std::clamp<std::int64_t>(front <= 0 ? 0 : (front + N - 1) / N, 0, len);
  const std::int64_t hi = rs == 1 ? std::clamp<std::int64_t>(n + front < 0 ? 0 : (n + front) / N, lo, len) : lo;
  const auto one_by_one = [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j)
      for (int p = 0; p < N; ++p) {
        const std::int64_t c = N * j + p - front;
        d[p * len + j] = c >= 0 && c < n ? row[c * rs] : T(0);
      }
  };
  one_by_one(0, lo);
  if (hi > lo) {  // (the row's element N lo - front exists only then)
    const T* r = row + N * lo - front;
    for (std::int64_t j = 0; j < hi - lo; ++j)
      for (int p = 0; p < N; ++p) d[p * len + lo + j] = r[N * j + p];
  }
  one_by_one(hi, len);
}

/// \brief Fills E, `span` elements of one row along w per index: a whole row on the host (one
/// pass over the source, rows mapped once each), one element on a GPU (adjacent threads, adjacent
/// elements). Bandwidth-bound, against the kvol times each element is then read.
template <class T>
struct ExtendKernel {
  const T* src;
  std::int64_t ss[5];
  T* e;
  ConvExtension x;
  std::int64_t channels, span, count;  // count: the indices
  FastDiv by_w, by_h, by_d, by_c;      // E's index into (n, c, d, h, w)
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t first = index * span, row = by_w.div(first), ew = first - row * x.ext[2];
    const std::int64_t dh = by_h.div(row), nc = by_d.div(dh), n = by_c.div(nc);
    const std::int64_t sh = extension_source(x, 1, row - dh * x.ext[1]), sd = extension_source(x, 0, dh - nc * x.ext[0]);
    T* d = e + first;
    if (index == count - 1)
      for (std::int64_t j = 0; j < x.tail; ++j) d[span + j] = T(0);
    if (sd < 0 || sh < 0) {
      for (std::int64_t j = 0; j < span; ++j) d[j] = T(0);
      return;
    }
    const T* r = src + n * ss[0] + (nc - n * channels) * ss[1] + sd * ss[2] + sh * ss[3];
    if constexpr (!KTEN_DEVICE_PASS) {
      if (x.phases == 2) return split_row<2>(d, span / 2, r, ss[4], x.front[2], x.src[2]);
      if (x.phases == 4) return split_row<4>(d, span / 4, r, ss[4], x.front[2], x.src[2]);
    }
    if (x.step[2] == 1) return copy_run(d, 1, r, ss[4], ew - x.front[2], x.src[2], span);
    for (std::int64_t j = 0; j < span; ++j) {
      const std::int64_t sw = extension_source(x, 2, ew + j);
      d[j] = sw < 0 ? T(0) : r[sw * ss[4]];
    }
  }
};

/// \brief cpu(), the forward at stride 1 along w and grad_input at stride 1: a direct convolution
/// on E, read in place. One output row of C (m channels by one pixel row) is the sum over taps t
/// of A_t (m x c: the weight of tap t) times c rows of E that lie a channel apart, from the tap's
/// offset: the GEMM's micro-kernel with B's rows in place (ldb = E's channel stride), its
/// accumulators held in registers across all the taps (micro_tile's parts). The im2col
/// path re-packs each input element kvol times and feeds it to m fmas, which with few channels
/// (m = 16: 16 fmas per packed element) makes the packing the bound; here each E element is
/// loaded from L1 by the micro-kernel itself, and the kernel is compute-bound like the GEMM. The
/// zeros of the padding are multiplied as the im2col path multiplies them, so a non-finite weight
/// reaches the padded border as NaN there too. One thread per output row; the taps in the weight's
/// order, then the channels (the im2col path sums channels first: results differ by rounding).
template <class T, class Member>
struct ConvDirectHostKernel {
  static constexpr int MR = HostGemmBlocking<T>::rows, NR = HostGemmBlocking<T>::cols, lanes = HostGemmBlocking<T>::lanes;
  const T* a;  // per (group, tap): A_t, m x c, rows contiguous
  const T* e;
  T* c;
  const T* bias;  // per channel of C, or null
  std::int64_t m, ch;
  ConvGeometry g;
  bool flip;  // grad_input: C's pixels are the input's, and tap t reads E at (k - 1 - t) dil, stride 1
  ConvExtension x;

  void operator()(const Member& team) const {
    const std::int64_t* cext = flip ? g.in : g.out;
    const std::int64_t* k = g.k;
    const std::int64_t rows = cext[0] * cext[1], pix = rows * cext[2], width = cext[2];
    const std::int64_t slab = team.league_rank() / rows, row = team.league_rank() % rows;
    const std::int64_t grp = slab % g.groups, pd = row / cext[1], ph = row % cext[1];
    const std::int64_t sd = flip ? 1 : g.stride[0], sh = flip ? 1 : g.stride[1];
    const std::int64_t cs = x.ext[0] * x.ext[1] * x.ext[2], kvol = g.kvol();
    const T* eb = e + slab * ch * cs + (pd * sd * x.ext[1] + ph * sh) * x.ext[2];
    const T* ag = a + grp * kvol * m * ch;
    T* cr = c + slab * m * pix + row * width;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < width; ++j) cr[i * pix + j] = bias ? bias[grp * m + i] : T(0);
    // Column tiles as even as they go in whole vectors, at most NR wide (64 floats: 32 + 32, not
    // 48 + 16); strips of channels as even as they go, at most MR.
    const std::int64_t vectors = (width + lanes - 1) / lanes, per_tile = NR / lanes;
    const std::int64_t tiles = (vectors + per_tile - 1) / per_tile, tile_w = (vectors + tiles - 1) / tiles * lanes;
    const std::int64_t strips = (m + MR - 1) / MR, base = m / strips, taller = m % strips;
    // Where each tap reads in E, from the row's start; the taps in the weight's order.
    std::int64_t* taps = static_cast<std::int64_t*>(team.team_scratch(1).get_shmem(sizeof(std::int64_t) * kvol));
    for (std::int64_t kd = 0, t = 0; kd < k[0]; ++kd)
      for (std::int64_t kh = 0; kh < k[1]; ++kh)
        for (std::int64_t kw = 0; kw < k[2]; ++kw, ++t)
          taps[t] = (((flip ? k[0] - 1 - kd : kd) * g.dil[0]) * x.ext[1] + (flip ? k[1] - 1 - kh : kh) * g.dil[1]) * x.ext[2] +
                    (flip ? k[2] - 1 - kw : kw) * g.dil[2];
    for (std::int64_t j0 = 0; j0 < width; j0 += tile_w) {
      const int w = static_cast<int>(std::min(tile_w, width - j0));
      for (std::int64_t s = 0, i = 0; s < strips; i += base + (s < taller), ++s)
        conv_tile<T>(ag + i * ch, ch, eb + j0, cs, static_cast<int>(ch), cr + i * pix + j0, pix, static_cast<int>(base + (s < taller)),
                     w, static_cast<int>(kvol), m * ch, taps);
    }
  }
};

/// \brief Whether cpu()'s direct convolution takes a product: stride 1 along w (grad_input: every
/// axis), a row of C's pixels that fills at least three quarters of the `lanes`-wide vectors it
/// spans, and at least 8 channels summed per tap (the micro-kernel's run of k steps before it
/// moves to the next tap's rows).
bool direct_applies(ConvProduct product, const ConvGeometry& g, std::int64_t lanes) {
  const bool forward = product == ConvProduct::forward;
  const std::int64_t width = forward ? g.out[2] : g.in[2], summed = forward ? g.cin_g : g.cout_g;
  const std::int64_t vectors = (width + lanes - 1) / lanes;
  const bool strides = forward ? g.stride[2] == 1 : g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  return product != ConvProduct::grad_weight && strides && width >= lanes && 4 * width >= 3 * vectors * lanes && summed >= 8;
}

/// \brief Whether a product on `src` runs as cpu()'s direct convolution.
bool direct_on(ConvProduct product, const ConvGeometry& g, const Tensor& src) {
  return src.device().is_cpu() &&
         direct_applies(product, g, HostIsa::vector_bytes / static_cast<std::int64_t>(dtype_size(src.dtype())));
}

/// \brief Winograd F(R, 3) along one axis (R = 2 or 4 outputs per tile, A = R + 2 points): the
/// input side B^T d, the output side A^T m and the kernel side G's rows, as explicit sums (a
/// product by one of the matrices' zeros would turn an infinity into NaN and cost a multiply).
/// F(4, 3)'s points are 0, 1, -1, 1/2, -2 and infinity: a third of the float32 rounding error of
/// Lavin and Gray's 0, +-1, +-2 (Barabasz et al.'s choice; 2-D, 32 channels, simulated: 5 u against
/// 16 u of the sum of |w x|) for two more operations per 1-D transform.
template <int R>
struct WinogradAxis;

template <>
struct WinogradAxis<2> {
  static constexpr int A = 4;
  static constexpr double G[A][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  template <class T>
  KOKKOS_INLINE_FUNCTION static void in(const T (&d)[A], T (&v)[A]) {
    v[0] = d[0] - d[2];
    v[1] = d[1] + d[2];
    v[2] = d[2] - d[1];
    v[3] = d[1] - d[3];
  }
  template <class T>
  KOKKOS_INLINE_FUNCTION static void out(const T (&m)[A], T (&y)[2]) {
    y[0] = m[0] + m[1] + m[2];
    y[1] = m[1] - m[2] - m[3];
  }
};

template <>
struct WinogradAxis<4> {
  static constexpr int A = 6;
  static constexpr double G[A][3] = {{1, 0, 0},
                                     {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                     {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                     {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                     {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                     {0, 0, 1}};
  template <class T>
  KOKKOS_INLINE_FUNCTION static void in(const T (&d)[A], T (&v)[A]) {
    const T s13 = d[3] - d[1], s24 = d[4] - d[2];
    v[0] = (d[0] + d[4]) - T(2) * d[2] + T(1.5) * s13;
    v[1] = (d[4] - d[1]) + T(0.5) * d[2] + T(2.5) * d[3];
    v[2] = (d[4] + d[1]) - T(2.5) * d[2] + T(0.5) * d[3];
    v[3] = s24 + T(2) * s13;
    v[4] = s24 - T(0.5) * s13;
    v[5] = (d[1] + d[5]) - T(2) * d[3] + T(1.5) * s24;
  }
  template <class T>
  KOKKOS_INLINE_FUNCTION static void out(const T (&m)[A], T (&y)[4]) {
    const T p12 = m[1] + m[2], d12 = m[1] - m[2];
    y[0] = m[0] + p12 + m[3] + m[4];
    y[1] = d12 + T(0.5) * m[3] - T(2) * m[4];
    y[2] = p12 + T(0.25) * m[3] + T(4) * m[4];
    y[3] = d12 + T(0.125) * m[3] - T(8) * m[4] + m[5];
  }
};

/// \brief The input side along one axis, in place: A arrays of n tiles' values, s apart.
/// Vectorised across the tiles.
template <int R, class T>
void winograd_in(T* v, std::int64_t s, std::int64_t n) {
  constexpr int A = WinogradAxis<R>::A;
  KTEN_IVDEP  // A loads and A stores of one array each: more streams than GCC's overlap checks
  for (std::int64_t i = 0; i < n; ++i) {
    T d[A], t[A];
    for (int j = 0; j < A; ++j) d[j] = v[j * s + i];
    WinogradAxis<R>::in(d, t);
    for (int j = 0; j < A; ++j) v[j * s + i] = t[j];
  }
}

/// \brief The output side along one axis, in place: A arrays become the R outputs in the first R.
template <int R, class T>
void winograd_out(T* v, std::int64_t s, std::int64_t n) {
  constexpr int A = WinogradAxis<R>::A;
  KTEN_IVDEP
  for (std::int64_t i = 0; i < n; ++i) {
    T m[A], y[R];
    for (int j = 0; j < A; ++j) m[j] = v[j * s + i];
    WinogradAxis<R>::out(m, y);
    for (int j = 0; j < R; ++j) v[j * s + i] = y[j];
  }
}

/// \brief G's entry (point p, tap t) of a 3^D kernel in the A^D-point transform, the product of
/// the 1-D G along each axis.
template <class T, int D, int R>
T winograd_g(int p, std::int64_t t) {
  using Axis = WinogradAxis<R>;
  constexpr int A = Axis::A;
  const double gd = D == 3 ? Axis::G[p / (A * A)][t / 9] : 1;
  return static_cast<T>(gd * Axis::G[p / A % A][t / 3 % 3] * Axis::G[p % A][t % 3]);
}

/// \brief The points of F(R^D, 3^D): (R + 2)^D.
constexpr std::int64_t winograd_points(int dims, int r) { return dims == 2 ? (r + 2) * (r + 2) : (r + 2) * (r + 2) * (r + 2); }

/// \brief The blocks of Winograd's tiles that one thread transforms at a time: `cols` tiles of
/// `rows` tile rows (R^D output pixels per tile) of one tile plane, at most 128 tiles and as many
/// as keep V and M within about 1 MiB (the thread's L2), but at least 16 where the plane has them;
/// per channel, P rows (one per point) of the block's tiles, tb apart, the channels ld apart.
template <class T, int D, int R>
struct WinogradBlocks {
  static constexpr int A = WinogradAxis<R>::A;  // points per axis
  static constexpr int P = D == 2 ? A * A : A * A * A;
  static constexpr int outputs = D == 2 ? R * R : R * R * R;  // per tile
  std::int64_t ext[3];    // E's extents
  std::int64_t tiles[3];  // per axis (1 along an axis 2-D does not have)
  std::int64_t rows, cols;

  /// \brief The blocks of `tiles` for `channels` rows of V and M together, on E's extents `ext`.
  static WinogradBlocks plan(const std::int64_t* ext, const std::int64_t* tiles, std::int64_t channels) {
    const std::int64_t per_tile = channels * P * static_cast<std::int64_t>(sizeof(T));
    const std::int64_t tb = std::clamp<std::int64_t>((std::int64_t(1) << 20) / per_tile, 16, 128);
    const std::int64_t cols = std::min(tiles[2], tb);
    return {{ext[0], ext[1], ext[2]}, {tiles[0], tiles[1], tiles[2]}, std::clamp<std::int64_t>(tb / cols, 1, tiles[1]), cols};
  }
  std::int64_t row_blocks() const { return (tiles[1] + rows - 1) / rows; }
  std::int64_t col_blocks() const { return (tiles[2] + cols - 1) / cols; }
  /// \brief A channel's P rows and one cache line more, so that a GEMM tile's rows, a channel
  /// apart, do not all fall in one L1 set.
  static std::int64_t stride_of(std::int64_t tb) { return P * tb + 64 / static_cast<std::int64_t>(sizeof(T)); }

  /// \brief V_p = B^T d B of `ch` channels of E (from `es`, the first channel's tile plane, the
  /// channels E's channel volume apart) for the tiles tx0 .. tx0 + ncols of tile rows th0 .. th0 +
  /// nrows, one channel at a time (its P rows in L1): along w from E's rows, then along h and d
  /// in place. E's rows are split into R phases (ConvExtension::phases): tile x's column j is
  /// element x + j / R of phase j % R, so every load is a plain vector load across the tiles (on
  /// columns R x + j, AVX2 spent more on the shuffles than on the transform's arithmetic).
  void inputs(const T* es, std::int64_t ch, std::int64_t th0, std::int64_t nrows, std::int64_t tx0, std::int64_t ncols,
              T* V) const {
    const std::int64_t tb = nrows * ncols, ld = stride_of(tb), cs = ext[0] * ext[1] * ext[2], phase = ext[2] / R;
    for (std::int64_t k = 0; k < ch; ++k) {
      T* v = V + k * ld;
      for (std::int64_t r = 0; r < nrows; ++r)
        for (int id = 0; id < (D == 3 ? A : 1); ++id)
          for (int ih = 0; ih < A; ++ih) {
            const T* row = es + k * cs + (id * ext[1] + R * (th0 + r) + ih) * ext[2] + tx0;
            T* b = v + (id * A + ih) * A * tb + r * ncols;
            KTEN_IVDEP  // A stores to V and A phase streams of E: more streams than GCC's overlap checks
            for (std::int64_t i = 0; i < ncols; ++i) {
              T d[A], t[A];
              for (int j = 0; j < A; ++j) d[j] = row[j % R * phase + j / R + i];
              WinogradAxis<R>::in(d, t);
              for (int j = 0; j < A; ++j) b[j * tb + i] = t[j];
            }
          }
      for (int id = 0; id < (D == 3 ? A : 1); ++id)
        for (int jw = 0; jw < A; ++jw) winograd_in<R>(v + (id * A * A + jw) * tb, A * tb, tb);
      if constexpr (D == 3)
        for (int j = 0; j < A * A; ++j) winograd_in<R>(v + j * tb, A * A * tb, tb);
    }
  }
};

/// \brief cpu(), the forward and grad_input of a 3x3 (3x3x3) convolution at stride 1 and
/// dilation 1, 2-D or 3-D (`D` axes), as Winograd F(R^D, 3^D) (R from winograd_tile): each R^D tile of
/// C is A^T [sum over channels U ⊙ B^T d B] A, d the tile's (R + 2)^D window of E. The products
/// per point of the transform are a GEMM, U_p (m x ch) times V_p (ch x tiles), on the GEMM's
/// micro-kernel. Compute-bound on those GEMMs, whose k (the channels) is short; the transforms,
/// vectorised across the tiles of a block on V and M in L1 and L2, and E are bandwidth-bound
/// (docs/performance.md has the shares). One thread per block of one (batch item, group). The
/// transforms spread a non-finite input over its whole tile: a block whose outputs are not all
/// finite sets bad[block], and the caller then runs the direct convolution instead.
template <class T, class Member, int D, int R>
struct ConvWinogradHostKernel {
  using Blocks = WinogradBlocks<T, D, R>;
  static constexpr int A = Blocks::A, P = Blocks::P, MR = HostGemmBlocking<T>::product_rows, NR = HostGemmBlocking<T>::cols;
  const T* u;  // per (group, point): U_p, m x ch, rows contiguous
  const T* e;
  T* c;
  const T* bias;  // per channel of C, or null
  std::int64_t m, ch;
  const std::int64_t* cext;  // C's pixels (d, h, w)
  Blocks blocks;
  std::int64_t groups;
  int* bad;

  static std::size_t scratch_bytes(std::int64_t m, std::int64_t ch, const Blocks& blocks) {
    return sizeof(T) * static_cast<std::size_t>((m + ch) * Blocks::stride_of(blocks.rows * blocks.cols) + R * blocks.cols) + 3 * 64;
  }

  void operator()(const Member& team) const {
    const std::int64_t col_blocks = blocks.col_blocks(), row_blocks = blocks.row_blocks(), block = team.league_rank();
    const std::int64_t cb = block % col_blocks, hb = block / col_blocks % row_blocks;
    const std::int64_t td = block / col_blocks / row_blocks % blocks.tiles[0], slab = block / col_blocks / row_blocks / blocks.tiles[0];
    const std::int64_t grp = slab % groups, th0 = hb * blocks.rows, nrows = std::min(blocks.rows, blocks.tiles[1] - th0);
    const std::int64_t tx0 = cb * blocks.cols, ncols = std::min(blocks.cols, blocks.tiles[2] - tx0), tb = nrows * ncols;
    const std::int64_t* ext = blocks.ext;
    const std::int64_t ld = Blocks::stride_of(tb), pix = cext[0] * cext[1] * cext[2];
    auto& pool = team.team_scratch(1);
    T* V = static_cast<T*>(pool.get_shmem_aligned(sizeof(T) * ch * ld, 64));
    T* M = static_cast<T*>(pool.get_shmem_aligned(sizeof(T) * m * ld, 64));
    T* spare = static_cast<T*>(pool.get_shmem_aligned(sizeof(T) * R * blocks.cols, 64));
    blocks.inputs(e + slab * ch * ext[0] * ext[1] * ext[2] + R * td * ext[1] * ext[2], ch, th0, nrows, tx0, ncols, V);
    // M_p = U_p V_p: column tiles of at most NR, strips of m as even as they go (at most MR, the
    // rows that stay in registers in this form) over each (V's tile stays in L1), written whole (no
    // zeroing first).
    const std::int64_t strips = (m + MR - 1) / MR, base = m / strips, taller = m % strips;
    const T* ug = u + grp * P * m * ch;
    for (int p = 0; p < P; ++p)
      for (std::int64_t j0 = 0; j0 < tb; j0 += NR)
        for (std::int64_t s = 0, i = 0; s < strips; i += base + (s < taller), ++s)
          conv_tile<T, false>(ug + (p * m + i) * ch, ch, V + p * tb + j0, ld, static_cast<int>(ch), M + i * ld + p * tb + j0,
                              ld, static_cast<int>(base + (s < taller)), static_cast<int>(std::min<std::int64_t>(NR, tb - j0)));
    // C's tiles = A^T M A: along d and h in place, then along w into C's rows, with the bias. The
    // block's whole tiles along w, then the last one of a row whose extent R does not divide; rows
    // past C's last (the last tile row's) go to `spare`.
    const std::int64_t full = std::min(ncols, cext[2] / R - tx0), last = full < ncols ? cext[2] - R * (tx0 + full) : 0;
    int nonfinite = 0;  // y - y is 0 for every finite y
    for (std::int64_t k = 0; k < m; ++k) {
      T* v = M + k * ld;
      if constexpr (D == 3)
        for (int j = 0; j < A * A; ++j) winograd_out<R>(v + j * tb, A * A * tb, tb);
      for (int od = 0; od < (D == 3 ? R : 1); ++od)
        for (int jw = 0; jw < A; ++jw) winograd_out<R>(v + (od * A * A + jw) * tb, A * tb, tb);
      const T add = bias ? bias[grp * m + k] : T(0);
      for (std::int64_t r = 0; r < nrows; ++r)
        for (int od = 0; od < (D == 3 ? R : 1); ++od)
          for (int oh = 0; oh < R; ++oh) {
            const std::int64_t yd = R * td + od, yh = R * (th0 + r) + oh;
            if (D == 3 && yd >= cext[0]) continue;
            T* out = yh < cext[1] ? c + (slab * m + k) * pix + (yd * cext[1] + yh) * cext[2] + R * tx0 : spare;
            const T* b = v + (od * A + oh) * A * tb + r * ncols;  // point (od, oh, jw) at b + jw tb
            const auto tile = [&](std::int64_t i, T (&y)[R]) {
              T mw[A];
              for (int j = 0; j < A; ++j) mw[j] = b[j * tb + i];
              WinogradAxis<R>::out(mw, y);
            };
            KTEN_IVDEP  // A rows of M and one of C: more streams than GCC's overlap checks
            for (std::int64_t i = 0; i < full; ++i) {
              T y[R];
              tile(i, y);
              for (int q = 0; q < R; ++q) {
                out[R * i + q] = y[q] + add;
                nonfinite |= y[q] - y[q] != T(0);
              }
            }
            if (last > 0) {
              T y[R];
              tile(full, y);
              for (int q = 0; q < last; ++q) {
                out[R * full + q] = y[q] + add;
                nonfinite |= y[q] - y[q] != T(0);
              }
            }
          }
    }
    bad[block] = nonfinite;
  }
};

/// \brief R, the outputs per axis of the tiles with which cpu() runs a forward or grad_input as
/// Winograd (ConvWinogradHostKernel), or 0 where it does not: 2-D or 3-D, every spatial axis a
/// 3-tap kernel at stride 1 and dilation 1.
/// - 4, F(4x4, 3x3), for 2-D float32 (36 points for 16 outputs, 4x fewer multiplications than the
///   direct sum, at 3-5x F(2x2)'s rounding error) from 16 channels on both sides (forward + input
///   gradient, two threads, AVX2: 8x16x64x64 1.6 ms against the direct path's 2.0, 4x24x64x64 1.4
///   against 2.3, 8x8x64x64 0.70 against 0.68);
/// - else 2, F(2x2, 3x3) (16 for 4, 2.25x fewer: float64 keeps the smaller error) and F(2x2x2,
///   3x3x3) (64 for 8, 3.4x fewer), from 32 channels (with 16, 2-D 8x16x64x64 took 1.6 ms against
///   1.3, 3-D 2x16x32x32x32 6.7-7.1 against 6.1-6.4, one thread, AVX-512).
/// The smallest block (16 tiles) of V and M must fit in 4 MiB: up to 1820 channels on the two sides
/// together for F(4x4) (wider 2-D float32 layers take F(2x2)), 4096 (float32) and 2048 (float64)
/// for F(2x2), 1024 and 512 for F(2x2x2); wider layers keep the direct path.
int winograd_tile(const ConvGeometry& g, int dims, std::int64_t element_bytes) {
  if (dims < 2) return 0;
  for (int a = 3 - dims; a < 3; ++a)
    if (g.k[a] != 3 || g.stride[a] != 1 || g.dil[a] != 1) return 0;
  const std::int64_t least = std::min(g.cin_g, g.cout_g);
  const auto fits = [&](int r) {
    return (g.cin_g + g.cout_g) * winograd_points(dims, r) * 16 * element_bytes <= (std::int64_t(4) << 20);
  };
  if (dims == 2 && element_bytes == 4 && least >= 16 && fits(4)) return 4;
  return least >= 32 && fits(2) ? 2 : 0;
}

/// \brief One slab's B operand on a GPU, read from E (team_gemm_tile's gather): rows (channel,
/// tap) and columns pixels, or for grad_weight rows pixels (from the slab's first) and columns
/// (channel, tap). E is zero-extended (conv_extension), so an element is E at the row's offset
/// plus the column's, with no bounds to check.
template <class T>
struct ConvGather {
  static constexpr bool gathered = true;
  const ConvArgs<T>& args;
  const T* e;  // the slab's first element of E
  std::int64_t first;
  KOKKOS_INLINE_FUNCTION std::int64_t row(std::int64_t p) const {
    return args.product == ConvProduct::grad_weight ? args.pixel_offset(first + p) : args.tap_offset(p);
  }
  KOKKOS_INLINE_FUNCTION std::int64_t col(std::int64_t j) const {
    return args.product == ConvProduct::grad_weight ? args.tap_offset(j) : args.pixel_offset(j);
  }
  KOKKOS_INLINE_FUNCTION T at(std::int64_t offset) const { return e[offset]; }
};

/// \brief GPUs (real and emulated): the GEMM's SIMT tile (team_gemm_tile, gemm_kernel.hpp), one
/// team per BM x BN tile of one slab's C, its B slices gathered from E (adjacent threads, adjacent
/// pixels: coalesced along w for stride 1). Compute-bound like the GEMM: a gathered element costs
/// a shared-memory lookup of its row's and column's offsets (found once per slice and per tile)
/// and one addition, against the BM fmas it feeds; a tile of few rows (GpuNarrowTiling) where C
/// has few channels, so that the fmas are not spent on padding.
template <class T, class Tile, class Member>
struct ConvTeamKernel {
  ConvArgs<T> args;
  std::int64_t tiles_m, tiles_n;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t tiles = tiles_m * tiles_n, tile = team.league_rank() % tiles;
    const ConvSlab<T> sl = args.slab(team.league_rank() / tiles);
    team_gemm_tile<T, Tile>(
        team, tile / tiles_n * Tile::BM, tile % tiles_n * Tile::BN, sl.m, sl.n, sl.k, true,
        args.product != ConvProduct::grad_weight, [&](std::int64_t i, std::int64_t p) { return sl.a[i * sl.lda + p]; },
        ConvGather<T>{args, sl.src, sl.first},
        [&](std::int64_t i, std::int64_t j, T v) { sl.c[i * sl.ldc + j] = v + (sl.bias ? sl.bias[i] : T(0)); });
  }
};

/// \brief The largest m, n and k over the slabs of a launch (the tiling's extents).
template <class T>
ConvSlab<T> largest_slab(const ConvArgs<T>& args) {
  ConvSlab<T> s = args.slab(0);
  if (args.product == ConvProduct::grad_weight)
    s.k = (args.g.out[0] * args.g.out[1] + args.pieces - 1) / args.pieces * args.g.out[2];
  return s;
}

/// \brief Whether tiling `Narrow` pads an m x n product less than `Wide` (the padded area of C).
template <class Narrow, class Wide>
constexpr bool pads_less(std::int64_t m, std::int64_t n) {
  const auto area = [&](std::int64_t bm, std::int64_t bn) {
    return static_cast<double>((m + bm - 1) / bm * bm) * static_cast<double>((n + bn - 1) / bn * bn);
  };
  return area(Narrow::BM, Narrow::BN) < area(Wide::BM, Wide::BN);
}

template <class Tile, class Backend, class T>
void launch_conv_team(const char* op, const Backend& backend, const ConvArgs<T>& args, const ConvSlab<T>& s) {
  const std::int64_t tiles_m = (s.m + Tile::BM - 1) / Tile::BM, tiles_n = (s.n + Tile::BN - 1) / Tile::BN;
  const std::int64_t league = args.slabs() * tiles_m * tiles_n;
  if (league > INT32_MAX) fail<ShapeError>(op, "the convolution has more tiles than a GPU launch can hold");
  run(op, backend, fixed_team_policy<gpu_launch_bound>(backend, static_cast<int>(league), Tile::threads, TeamScratch{0, Tile::scratch_bytes}),
      ConvTeamKernel<T, Tile, TeamMember<Backend>>{args, tiles_m, tiles_n});
}

/// \brief Runs one product on the backend (args.pieces already chosen).
template <class Backend, class T>
void run_conv(const char* op, const Backend& backend, const ConvArgs<T>& args) {
  const ConvSlab<T> s = largest_slab(args);
  if (args.slabs() == 0 || s.m == 0 || s.n == 0) return;
  if constexpr (Backend::is_host) {
    const double macs = static_cast<double>(args.slabs()) * s.m * s.n * std::max<std::int64_t>(s.k, 1);
    const double elements = macs / host_gemm_macs_per_element;
    with_grain(backend, elements < 1e18 ? static_cast<std::int64_t>(elements) : INT64_MAX, [&](const auto& on) {
      using On = std::decay_t<decltype(on)>;
      using Weight = ConvWeightHostKernel<T, TeamMember<On>>;
      if (args.product == ConvProduct::grad_weight && weight_direct_applies(args.g)) {  // args.src is E
        if (args.slabs() > INT32_MAX) fail<ShapeError>(op, "the convolution has more slabs than one launch can hold");
        return run(op, on, fixed_team_policy(on, static_cast<int>(args.slabs()), 1, TeamScratch{1, Weight::scratch_bytes(args.g)}),
                   Weight{args});
      }
      using Kernel = ConvHostKernel<T, TeamMember<On>>;
      const std::int64_t threads = on.space.concurrency();
      const int per_slab = static_cast<int>(std::max<std::int64_t>(1, (threads + args.slabs() - 1) / args.slabs()));
      const HostGemmPlan plan = plan_host_gemm<T>(GemmShape{s.m, s.n, s.k, 0, 0, 0, 0}, per_slab);
      const std::int64_t league = args.slabs() * plan.tiles();
      if (league > INT32_MAX) fail<ShapeError>(op, "the convolution has more tiles than one launch can hold");
      run(op, on, fixed_team_policy(on, static_cast<int>(league), 1, TeamScratch{1, Kernel::Gemm::scratch_bytes(plan)}),
          Kernel{args, plan});
    });
  } else if constexpr (Backend::emulated) {
    if (backend.space.concurrency() >= 2) launch_conv_team<EmulatedTiling<T, 2>>(op, backend, args, s);
    else launch_conv_team<EmulatedTiling<T, 1>>(op, backend, args, s);
  } else {
    // The tile that pads C the least: the narrow one for few channels (32 of them fill a quarter of
    // the 128 x 128 float tile), the GEMM's when they tie (fewer tiles gather each element).
    if (pads_less<GpuNarrowTiling<T>, GpuTiling<T>>(s.m, s.n))
      launch_conv_team<GpuNarrowTiling<T>>(op, backend, args, s);
    else
      launch_conv_team<GpuTiling<T>>(op, backend, args, s);
  }
}


// --- the products on tensors --------------------------------------------------------------------

/// \brief The (n, c, d, h, w) strides of a tensor (N, C, spatial...) of `dims` spatial axes, the
/// missing leading spatial axes (extent 1) with stride 0.
void strides_3d(const Tensor& t, int dims, std::int64_t* out) {
  out[0] = t.strides()[0];
  out[1] = t.strides()[1];
  for (int a = 0; a < 3; ++a) out[2 + a] = a < 3 - dims ? 0 : t.strides()[2 + a - (3 - dims)];
}

/// \brief (N, channels, sizes of the last `dims` of the three spatial axes).
Shape conv_shape(std::int64_t batch, std::int64_t channels, const std::int64_t* sizes, int dims) {
  Shape s{batch, channels};
  for (int a = 3 - dims; a < 3; ++a) s.push_back(sizes[a]);
  return s;
}

/// \brief E for `channels` channels per batch item of `src` (any strided view of `dims` spatial
/// axes), as `x` extends it.
Tensor conv_extension(const char* op, const Tensor& src, int dims, std::int64_t batch, std::int64_t channels,
                      const ConvExtension& x) {
  const std::int64_t rows = checked_numel(Shape{batch, channels, x.ext[0], x.ext[1]}, op);
  const auto size = checked_add(checked_numel(Shape{rows, x.ext[2]}, op), x.tail);
  if (!size) fail<ShapeError>(op, "the convolution's padded operand has more elements than a tensor can hold");
  const Tensor e = empty({*size}, src.device(), src.dtype());
  if (rows * x.ext[2] == 0) return e;
  launch_views(op, [&](const auto& backend, auto* psrc, auto* pe) {
    using T = std::remove_pointer_t<decltype(pe)>;
    const std::int64_t span = std::decay_t<decltype(backend)>::is_host ? x.ext[2] : 1, count = rows * x.ext[2] / span;
    ExtendKernel<T> kernel{psrc, {}, pe, x, channels, span, count, FastDiv(x.ext[2], rows * x.ext[2]),
                           FastDiv(x.ext[1], rows), FastDiv(x.ext[0], rows / x.ext[1]), FastDiv(channels, batch * channels)};
    strides_3d(src, dims, kernel.ss);
    for_each_index(op, backend, count, kernel, e.numel());
  }, src, e);
  return e;
}

/// \brief How `product` extends the operand it gathers into E (ConvExtension), `tail` zeros after.
ConvExtension extension_of(ConvProduct product, const ConvGeometry& g, std::int64_t tail) {
  const bool input = product == ConvProduct::grad_input;
  ConvExtension x{};
  for (int t = 0; t < 3; ++t) {
    const std::int64_t span = (g.k[t] - 1) * g.dil[t];
    x.front[t] = input ? span - g.pad[t] : g.pad[t];
    x.step[t] = input ? g.stride[t] : 1;
    x.src[t] = input ? g.out[t] : g.in[t];
    x.ext[t] = (input ? g.in[t] - 1 : (g.out[t] - 1) * g.stride[t]) + span + 1;  // the last pixel's last tap
  }
  x.tail = tail;
  return x;
}

/// \brief One product: C = A * gathered `src`, with a bias per channel of C (or none). `a` is
/// contiguous (the weight, its per-group transpose, or dY); `src` may be any strided view. cpu()
/// packs B straight from `src` or, for grad_weight at stride 1 along w, reads E in place
/// (ConvWeightHostKernel); a GPU gathers B from E (ConvGather). E is a zero-extended copy.
Tensor conv_product(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a,
                    const Tensor& src, const Tensor* bias, std::int64_t pieces, const Shape& c_shape) {
  Tensor c = empty(c_shape, src.device(), src.dtype());
  if (c.numel() == 0) return c;  // nothing to sum: no copy of src either
  const Tensor bias_c = bias ? bias->contiguous() : c;
  const bool extended = !src.device().is_cpu() || (product == ConvProduct::grad_weight && weight_direct_applies(g));
  const std::int64_t channels = g.groups * (product == ConvProduct::grad_input ? g.cout_g : g.cin_g);
  const ConvExtension x = extension_of(product, g, 0);
  const Tensor b = extended ? conv_extension(op, src, dims, g.batch, channels, x) : src;
  launch_views(op, [&](const auto& backend, auto* pa, auto* pb, auto* pc, auto* pbias) {
    using T = std::remove_pointer_t<decltype(pc)>;
    ConvArgs<T> args{g, product, pa, pb, {}, pc, bias ? pbias : nullptr, pieces, {}, {}, {}, {}};
    if (extended) {
      const std::int64_t plane = x.ext[1] * x.ext[2], volume = x.ext[0] * plane;  // E is contiguous
      const std::int64_t e_strides[5] = {channels * volume, volume, plane, x.ext[2], 1};
      std::copy(e_strides, e_strides + 5, args.ss);
    } else {
      strides_3d(src, dims, args.ss);
    }
    args.prepare_divisions();
    run_conv(op, backend, args);
  }, a, b, c, bias_c);
  return c;
}

/// \brief cpu()'s direct convolution (ConvDirectHostKernel): the forward (`a` the weight as
/// (groups, kvol, C_out/g, C_in/g)) or grad_input (`a` as (groups, kvol, C_in/g, C_out/g)) on E, a
/// zero-extended copy of `src` (any strided view): its size plus the padding.
Tensor conv_direct(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a, const Tensor& src,
                   const Tensor* bias, const Shape& c_shape) {
  const bool forward = product == ConvProduct::forward;
  const std::int64_t* pixels = forward ? g.out : g.in;  // C's
  // grad_input at stride 1 (direct_applies): step 1. An edge tile reads fewer than a vector's
  // lanes past a row: the tail.
  const ConvExtension x = extension_of(product, g, HostIsa::vector_bytes / 4);
  const std::int64_t m = forward ? g.cout_g : g.cin_g, ch = forward ? g.cin_g : g.cout_g;
  Tensor c = empty(c_shape, src.device(), src.dtype());
  if (c.numel() == 0) return c;  // no batch, or no channels of C (m = 0: no strips to cut)
  const Tensor e = conv_extension(op, src, dims, g.batch, g.groups * ch, x);
  const Tensor bias_c = bias ? bias->contiguous() : c;
  launch_views(op, [&](const auto& backend, auto* pa, auto* pe, auto* pc, auto* pbias) {
    using T = std::remove_pointer_t<decltype(pc)>;
    using Backend = std::decay_t<decltype(backend)>;
    if constexpr (!Backend::is_host) {
      fail<Error>(op, "the direct convolution runs on cpu() only");
    } else {
      const std::int64_t league = g.batch * g.groups * pixels[0] * pixels[1];
      if (league > INT32_MAX) fail<ShapeError>(op, "the convolution has more rows than one launch can hold");
      const double work = static_cast<double>(c.numel()) * ch * g.kvol() / host_gemm_macs_per_element;
      const std::string label = std::string(op) + " [direct]";  // profilers (and a test) see which path ran
      with_grain(backend, work < 1e18 ? static_cast<std::int64_t>(work) : INT64_MAX, [&](const auto& on) {
        using Kernel = ConvDirectHostKernel<T, TeamMember<std::decay_t<decltype(on)>>>;
        run(label.c_str(), on, fixed_team_policy(on, static_cast<int>(league), 1, TeamScratch{1, sizeof(std::int64_t) * g.kvol()}),
            Kernel{pa, pe, pc, bias ? pbias : nullptr, m, ch, g, !forward, x});
      });
    }
  }, a, e, c, bias_c);
  return c;
}

/// \brief Winograd's tiles along each axis of C's `pixels` (r outputs per tile; 1 tile along an axis
/// 2-D does not have), and `x` extended to whole tiles (zeros past the last pixel) and split into r
/// phases along w, each one element longer than the tiles (tile x reads x and x + 1 of a phase).
void winograd_tiles(const std::int64_t* pixels, int dims, int r, std::int64_t* tiles, ConvExtension& x) {
  for (int t = 3 - dims; t < 3; ++t) {
    tiles[t] = (pixels[t] + r - 1) / r;
    x.ext[t] = t == 2 ? r * (tiles[t] + 1) : r * tiles[t] + 2;
  }
  for (int t = 0; t < 3 - dims; ++t) tiles[t] = 1;
  x.phases = r;  // unit-stride loads in the input's transform
}

/// \brief cpu()'s Winograd convolution (ConvWinogradHostKernel) of a forward or grad_input, `a` as
/// conv_direct takes it. Where the weight or an output is not finite, the transforms would have
/// spread a special value over whole tiles: the product is run as conv_direct instead.
Tensor conv_winograd(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a, const Tensor& src,
                     const Tensor* bias, const Shape& c_shape) {
  const bool forward = product == ConvProduct::forward;
  const std::int64_t* pixels = forward ? g.out : g.in;  // C's
  ConvExtension x = extension_of(product, g, 0);
  std::int64_t tiles[3];
  const int r = winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(src.dtype())));
  winograd_tiles(pixels, dims, r, tiles, x);
  const std::int64_t m = forward ? g.cout_g : g.cin_g, ch = forward ? g.cin_g : g.cout_g, kvol = g.kvol();
  Tensor c = empty(c_shape, src.device(), src.dtype());
  if (c.numel() == 0) return c;
  const Tensor e = conv_extension(op, src, dims, g.batch, g.groups * ch, x);
  const Tensor u = empty({g.groups * winograd_points(dims, r) * m * ch}, src.device(), src.dtype());
  const Tensor bias_c = bias ? bias->contiguous() : c;
  bool finite = true;
  launch_views(op, [&](const auto& backend, auto* pa, auto* pe, auto* pc, auto* pbias, auto* pu) {
    using T = std::remove_pointer_t<decltype(pc)>;
    using Backend = std::decay_t<decltype(backend)>;
    if constexpr (!Backend::is_host) {
      fail<Error>(op, "the Winograd convolution runs on cpu() only");
    } else {
      for (std::int64_t i = 0; i < g.groups * kvol * m * ch; ++i) finite = finite && pa[i] - pa[i] == T(0);
      if (!finite) return;
      const auto on_tiles = [&](auto d, auto tile) {  // std::integral_constants: the 2 or 3 spatial axes, R
        constexpr int D = decltype(d)::value, R = decltype(tile)::value;
        using Blocks = WinogradBlocks<T, D, R>;
        // U_p = G w G^T per (group, channel pair), w the 3^D taps in the weight's order (grad_input:
        // reversed, the flipped kernel).
        const std::int64_t mc = m * ch;
        std::fill(pu, pu + g.groups * Blocks::P * mc, T(0));
        for (std::int64_t grp = 0; grp < g.groups; ++grp)
          for (std::int64_t t = 0; t < kvol; ++t)
            for (int p = 0; p < Blocks::P; ++p) {
              const T coef = winograd_g<T, D, R>(p, t);
              if (coef == T(0)) continue;
              const T* w = pa + (grp * kvol + (forward ? t : kvol - 1 - t)) * mc;
              T* up = pu + (grp * Blocks::P + p) * mc;
              for (std::int64_t i = 0; i < mc; ++i) up[i] += coef * w[i];
            }
        const Blocks blocks = Blocks::plan(x.ext, tiles, m + ch);
        const std::int64_t league = g.batch * g.groups * tiles[0] * blocks.row_blocks() * blocks.col_blocks();
        if (league > INT32_MAX) fail<ShapeError>(op, "the convolution has more tiles than one launch can hold");
        std::vector<int> bad(static_cast<std::size_t>(league), 0);
        const double work = static_cast<double>(c.numel()) * ch * Blocks::P / Blocks::outputs / host_gemm_macs_per_element;
        const std::string label = std::string(op) + " [winograd]";  // profilers (and a test) see which path ran
        with_grain(backend, work < 1e18 ? static_cast<std::int64_t>(work) : INT64_MAX, [&](const auto& on) {
          using Kernel = ConvWinogradHostKernel<T, TeamMember<std::decay_t<decltype(on)>>, D, R>;
          run(label.c_str(), on,
              fixed_team_policy(on, static_cast<int>(league), 1,
                                TeamScratch{1, Kernel::scratch_bytes(m, ch, blocks)}),
              Kernel{pu, pe, pc, bias ? pbias : nullptr, m, ch, pixels, blocks, g.groups, bad.data()});
        });
        finite = std::find(bad.begin(), bad.end(), 1) == bad.end();
      };
      using Two = std::integral_constant<int, 2>;
      if (dims == 3) return on_tiles(std::integral_constant<int, 3>{}, Two{});
      if (r == 2) return on_tiles(Two{}, Two{});
      if constexpr (sizeof(T) == 4) on_tiles(Two{}, std::integral_constant<int, 4>{});  // F(4x4) is float32's alone
    }
  }, a, e, c, bias_c, u);
  return finite ? c : conv_direct(op, product, g, dims, a, src, bias, c_shape);
}

/// \brief Y = conv(X, W) + b: the forward product (X any strided view).
Tensor conv_forward(const char* op, const ConvGeometry& g, int dims, const Tensor& x, const Tensor& w, const Tensor* b) {
  const Shape y_shape = conv_shape(g.batch, g.groups * g.cout_g, g.out, dims);
  const bool winograd = x.device().is_cpu() && winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(x.dtype()))) > 0;
  if (winograd || direct_on(ConvProduct::forward, g, x)) {  // A: the weight as (groups, kvol, C_out/g, C_in/g), a small copy
    const Tensor a = w.reshape({g.groups, g.cout_g, g.cin_g, g.kvol()}).permute({0, 3, 1, 2}).contiguous();
    return (winograd ? conv_winograd : conv_direct)(op, ConvProduct::forward, g, dims, a, x, b, y_shape);
  }
  return conv_product(op, ConvProduct::forward, g, dims, w.contiguous(), x, b, 1, y_shape);
}

/// \brief dX from dY (any strided view), plus a bias per input channel (conv_transpose's forward).
Tensor conv_grad_input(const char* op, const ConvGeometry& g, int dims, const Tensor& dy, const Tensor& w, const Tensor* b) {
  const Shape dx_shape = conv_shape(g.batch, g.groups * g.cin_g, g.in, dims);
  const Tensor w4 = w.reshape({g.groups, g.cout_g, g.cin_g, g.kvol()});
  const bool winograd = dy.device().is_cpu() && winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(dy.dtype()))) > 0;
  if (winograd || direct_on(ConvProduct::grad_input, g, dy))  // A: (groups, kvol, C_in/g, C_out/g), a small copy
    return (winograd ? conv_winograd : conv_direct)(op, ConvProduct::grad_input, g, dims, w4.permute({0, 3, 2, 1}).contiguous(),
                                                    dy, b, dx_shape);
  // A: the weight as (groups, C_in/g, C_out/g, kvol), a small copy.
  return conv_product(op, ConvProduct::grad_input, g, dims, w4.permute({0, 2, 1, 3}).contiguous(), dy, b, 1, dx_shape);
}

/// \brief dW (the weight's shape `w_shape`) from X (any strided view) and dY. The sum over
/// pixels is cut into slabs of whole output rows, at least 1024 pixels (batch items times pieces), about 64 of them,
/// each written to its own partial product and then summed: parallel work for a single batch item,
/// and slabs that do not depend on the number of threads.
Tensor conv_grad_weight(const char* op, const ConvGeometry& g, int dims, const Tensor& x, const Tensor& dy, const Shape& w_shape) {
  if (g.batch == 0) return zeros(w_shape, x.device(), x.dtype());
  const std::int64_t wanted = (64 + g.batch * g.groups - 1) / (g.batch * g.groups);
  const std::int64_t pieces = std::max<std::int64_t>(1, std::min({wanted, g.out_pix() / 1024, g.out[0] * g.out[1]}));
  const std::int64_t chunks = g.batch * pieces;
  const Tensor partial = conv_product(op, ConvProduct::grad_weight, g, dims, dy.contiguous(), x, nullptr, pieces,
                                      {chunks, g.groups * g.cout_g, g.cin_g * g.kvol()});
  return (chunks == 1 ? partial : sum(partial, 0)).reshape(w_shape);
}

/// \brief The bias gradient: dY summed over the batch and every spatial axis.
Tensor bias_grad(const Tensor& dy) {
  std::vector<int> axes{0};
  for (int a = 2; a < dy.ndim(); ++a) axes.push_back(a);
  return sum(dy, axes);
}

// --- arguments and their checks ------------------------------------------------------------------

/// \brief A size argument (stride, padding, ...) as one value per spatial axis: one value applies to
/// every axis. ShapeError for another length or a value below `least`.
std::vector<std::int64_t> per_axis(const char* op, const char* what, const Shape& v, int dims, std::int64_t least) {
  if (v.size() != 1 && v.size() != static_cast<std::size_t>(dims))
    fail<ShapeError>(op, what, " ", v, " must hold 1 or ", dims, " values");
  std::vector<std::int64_t> out(dims, v[0]);
  for (int a = 0; a < dims; ++a) {
    if (v.size() > 1) out[a] = v[a];
    if (out[a] < least) fail<ShapeError>(op, what, " ", v, " must be >= ", least);
  }
  return out;
}

/// \brief a * b + c over a convolution's sizes and attributes; a ShapeError where it leaves int64
/// (a stride, padding, dilation or group count near 2^63, from a caller or a model file).
std::int64_t geometry_mad(const char* op, std::int64_t a, std::int64_t b, std::int64_t c) {
  const auto product = checked_mul(a, b);
  const auto result = product ? checked_add(*product, c) : std::nullopt;
  if (!result)
    fail<ShapeError>(op, "the geometry overflows 64 bits (", a, " * ", b, " + ", c,
                     "): the stride, padding, dilation or groups is too large");
  return *result;
}

/// \brief x (N, C, spatial...) and w (O, I, kernel...) checked for a convolution of `dims` spatial
/// axes: ranks, dtypes and devices, groups and the bias. An unbatched x (C, spatial...) is seen
/// with a batch of one.
void check_conv_operands(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t groups) {
  check_defined(x, op);
  check_defined(w, op);
  check_compatible(op, x, w);
  if (b.defined()) check_compatible(op, x, b);
  if (x.ndim() != dims + 2)
    fail<ShapeError>(op, "expects an input of ", dims + 2, " axes (N, C, spatial...) or ", dims + 1, " unbatched, got shape ", x.shape());
  if (w.ndim() != dims + 2)
    fail<ShapeError>(op, "expects a weight of ", dims + 2, " axes, got shape ", w.shape(), " for input ", x.shape());
  if (groups < 1) fail<ShapeError>(op, "groups must be >= 1, got ", groups);
}

/// \brief The geometry of conv{dims}d(x, w) and its output shape's spatial sizes.
ConvGeometry conv_geometry(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b,
                           const Shape& stride, const Shape& padding, const Shape& dilation, std::int64_t groups) {
  check_conv_operands(op, dims, x, w, b, groups);
  const std::int64_t cin = x.shape()[1], cout = w.shape()[0];
  if (cin % groups != 0 || cout % groups != 0)
    fail<ShapeError>(op, "groups ", groups, " must divide the input channels and the weight's output channels: input ",
                     x.shape(), ", weight ", w.shape());
  const std::int64_t expected = geometry_mad(op, w.shape()[1], groups, 0);
  if (expected != cin)
    fail<ShapeError>(op, "the input's ", cin, " channels do not match the weight: input ", x.shape(), ", weight ", w.shape(),
                     " with groups ", groups, " expects ", expected, " channels");
  if (b.defined() && (b.ndim() != 1 || b.shape()[0] != cout))
    fail<ShapeError>(op, "the bias must have shape (", cout, "), got ", b.shape(), " for weight ", w.shape());
  const auto s = per_axis(op, "stride", stride, dims, 1), p = per_axis(op, "padding", padding, dims, 0),
             d = per_axis(op, "dilation", dilation, dims, 1);
  ConvGeometry g;
  g.batch = x.shape()[0];
  g.groups = groups;
  g.cin_g = cin / groups;
  g.cout_g = cout / groups;
  for (int a = 0; a < dims; ++a) {
    const int t = 3 - dims + a;
    g.in[t] = x.shape()[2 + a];
    g.k[t] = w.shape()[2 + a];
    g.stride[t] = s[a];
    g.pad[t] = p[a];
    g.dil[t] = d[a];
    if (g.in[t] == 0) fail<ShapeError>(op, "the input ", x.shape(), " has an empty spatial axis (PyTorch's refusal too)");
    const std::int64_t span = geometry_mad(op, d[a], g.k[t] - 1, 1), padded = geometry_mad(op, 2, p[a], g.in[t]);
    if (g.k[t] < 1 || span > padded)
      fail<ShapeError>(op, "the kernel (", w.shape(), ", dilation ", dilation, ") is larger than the padded input (",
                       x.shape(), ", padding ", padding, ")");
    g.out[t] = (padded - span) / s[a] + 1;
  }
  return g;
}

/// \brief The geometry of conv_transpose{dims}d(x, w): the convolution whose input gradient it
/// is, its input side the transposed convolution's output.
ConvGeometry conv_transpose_geometry(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b,
                                     const Shape& stride, const Shape& padding, const Shape& output_padding,
                                     std::int64_t groups, const Shape& dilation) {
  check_conv_operands(op, dims, x, w, b, groups);
  const std::int64_t cin = x.shape()[1], cout = geometry_mad(op, w.shape()[1], groups, 0);
  if (cin % groups != 0)
    fail<ShapeError>(op, "groups ", groups, " must divide the input channels: input ", x.shape(), ", weight ", w.shape());
  if (w.shape()[0] != cin)
    fail<ShapeError>(op, "the input's ", cin, " channels do not match the weight: input ", x.shape(), ", weight ",
                     w.shape(), " expects ", w.shape()[0], " channels");
  if (b.defined() && (b.ndim() != 1 || b.shape()[0] != cout))
    fail<ShapeError>(op, "the bias must have shape (", cout, "), got ", b.shape(), " for weight ", w.shape(), " and groups ", groups);
  const auto s = per_axis(op, "stride", stride, dims, 1), p = per_axis(op, "padding", padding, dims, 0),
             op_ = per_axis(op, "output_padding", output_padding, dims, 0), d = per_axis(op, "dilation", dilation, dims, 1);
  ConvGeometry g;
  g.batch = x.shape()[0];
  g.groups = groups;
  g.cin_g = cout / groups;
  g.cout_g = cin / groups;
  for (int a = 0; a < dims; ++a) {
    const int t = 3 - dims + a;
    g.out[t] = x.shape()[2 + a];
    g.k[t] = w.shape()[2 + a];
    g.stride[t] = s[a];
    g.pad[t] = p[a];
    g.dil[t] = d[a];
    if (g.out[t] == 0) fail<ShapeError>(op, "the input ", x.shape(), " has an empty spatial axis (PyTorch's refusal too)");
    if (op_[a] >= s[a] && op_[a] >= d[a])
      fail<ShapeError>(op, "output_padding ", output_padding, " must be smaller than the stride ", stride, " or the dilation ", dilation);
    // (out - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    const std::int64_t strided = geometry_mad(op, g.out[t] - 1, s[a], op_[a] + 1);
    g.in[t] = geometry_mad(op, -2, p[a], geometry_mad(op, d[a], g.k[t] - 1, strided));
    if (g.k[t] < 1 || g.in[t] < 1)
      fail<ShapeError>(op, "the output size ", g.in[t], " along spatial axis ", a, " is below 1: input ", x.shape(), ", weight ",
                       w.shape(), ", stride ", stride, ", padding ", padding, ", dilation ", dilation);
  }
  return g;
}

// --- the public forms ------------------------------------------------------------------------

Tensor conv_nd(const char* op, int dims, const Tensor& x_in, const Tensor& w, const Tensor& b, const Shape& stride,
               const Shape& padding, const Shape& dilation, std::int64_t groups) {
  check_defined(x_in, op);
  const bool unbatched = x_in.ndim() == dims + 1;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const ConvGeometry g = conv_geometry(op, dims, x, w, b, stride, padding, dilation, groups);
  const bool with_bias = b.defined();
  Tensor y = conv_forward(op, g, dims, x.detach(), w.detach(), with_bias ? &b : nullptr);
  if (with_bias ? recording(x, w, b) : recording(x, w)) {
    std::vector<const Tensor*> inputs{&x, &w};
    if (with_bias) inputs.push_back(&b);
    record(op, y, inputs, [x = saved(x), w = saved(w), g, dims, with_bias, op](const Tensor& gy, const Needs& needs) {
      const Tensor dy = gy.contiguous();
      Grads grads{needs[0] ? conv_grad_input(op, g, dims, dy, w, nullptr) : Tensor(),
                  needs[1] ? conv_grad_weight(op, g, dims, x, dy, w.shape()) : Tensor()};
      if (with_bias) grads.push_back(needs[2] ? bias_grad(dy) : Tensor());
      return grads;
    }, [&] {  // the registry's order: stride, padding, dilation (one per axis each), groups
      ops::OpAttrs a;
      for (const auto* v : {g.stride, g.pad, g.dil}) a.ints.insert(a.ints.end(), v + 3 - dims, v + 3);
      a.ints.push_back(groups);
      return a;
    });
  }
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose_nd(const char* op, int dims, const Tensor& x_in, const Tensor& w, const Tensor& b, const Shape& stride,
                         const Shape& padding, const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  check_defined(x_in, op);
  const bool unbatched = x_in.ndim() == dims + 1;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const ConvGeometry g = conv_transpose_geometry(op, dims, x, w, b, stride, padding, output_padding, groups, dilation);
  const bool with_bias = b.defined();
  Tensor y = conv_grad_input(op, g, dims, x.detach(), w.detach(), with_bias ? &b : nullptr);
  if (with_bias ? recording(x, w, b) : recording(x, w)) {
    std::vector<const Tensor*> inputs{&x, &w};
    if (with_bias) inputs.push_back(&b);
    record(op, y, inputs, [x = saved(x), w = saved(w), g, dims, with_bias, op](const Tensor& gy, const Needs& needs) {
      const Tensor dy = gy.contiguous();
      Grads grads{needs[0] ? conv_forward(op, g, dims, dy, w, nullptr) : Tensor(),
                  needs[1] ? conv_grad_weight(op, g, dims, dy, x, w.shape()) : Tensor()};
      if (with_bias) grads.push_back(needs[2] ? bias_grad(dy) : Tensor());
      return grads;
    }, [&] {  // the registry's order: stride, padding, output_padding (one per axis each), groups, dilation
      ops::OpAttrs a;
      for (const auto* v : {g.stride, g.pad}) a.ints.insert(a.ints.end(), v + 3 - dims, v + 3);
      const auto extra = per_axis(op, "output_padding", output_padding, dims, 0);
      a.ints.insert(a.ints.end(), extra.begin(), extra.end());
      a.ints.push_back(groups);
      a.ints.insert(a.ints.end(), g.dil + 3 - dims, g.dil + 3);
      return a;
    });
  }
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace

double conv_multiply_adds(int dims, const Tensor& x, const Tensor& w, const Shape& stride, const Shape& padding,
                          const Shape& dilation, std::int64_t groups) {
  const ConvGeometry g = conv_geometry("conv_multiply_adds", dims, x, w, Tensor(), stride, padding, dilation, groups);
  const double per_pixel = static_cast<double>(g.batch) * static_cast<double>(g.groups) * static_cast<double>(g.cout_g) *
                           static_cast<double>(g.cin_g);
  double out_pixels = 1, taps = 1;
  for (int t = 3 - dims; t < 3; ++t) out_pixels *= static_cast<double>(g.out[t]), taps *= static_cast<double>(g.k[t]);
  const double direct = per_pixel * out_pixels * taps;
  const int r = x.device().is_cpu() ? winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(x.dtype()))) : 0;
  if (r == 0) return 3 * direct;
  // conv_winograd's tiles of C (dims 3 runs F(2x2x2) whatever the tile says for 2-D).
  const int tile = dims == 3 ? 2 : r;
  const auto winograd = [&](const std::int64_t* pixels) {
    double tiles = 1;
    for (int t = 3 - dims; t < 3; ++t) tiles *= static_cast<double>((pixels[t] + tile - 1) / tile);
    return per_pixel * tiles * static_cast<double>(winograd_points(dims, tile));
  };
  return winograd(g.out) + winograd(g.in) + direct;  // forward, grad_input, grad_weight
}

}  // namespace detail

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv1d", 1, x, w, b, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv2d", 2, x, w, b, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv3d", 3, x, w, b, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose1d", 1, x, w, b, stride, padding, output_padding, groups, dilation);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose2d", 2, x, w, b, stride, padding, output_padding, groups, dilation);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose3d", 3, x, w, b, stride, padding, output_padding, groups, dilation);
}

}  // namespace kten

namespace kten::ops {

namespace {
// The registry's encoding of the size arguments: one value per spatial axis each, in the public
// function's order, groups where the function has it.
Shape ints_at(const OpAttrs& a, int first, int dims) {
  return Shape(a.ints.begin() + first, a.ints.begin() + first + dims);
}
Tensor conv_row(const std::vector<Tensor>& x, const OpAttrs& a, int dims) {
  Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t) = {
      conv1d, conv2d, conv3d};
  return f[dims - 1](x[0], x[1], x[2], ints_at(a, 0, dims), ints_at(a, dims, dims), ints_at(a, 2 * dims, dims), a.ints.at(3 * dims));
}
Tensor conv_transpose_row(const std::vector<Tensor>& x, const OpAttrs& a, int dims) {
  Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t,
                      const Shape&) = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
  return f[dims - 1](x[0], x[1], x[2], ints_at(a, 0, dims), ints_at(a, dims, dims), ints_at(a, 2 * dims, dims),
                     a.ints.at(3 * dims), ints_at(a, 3 * dims + 1, dims));
}
}  // namespace

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

// A convolution's window and its group count (PyTorch's groups, at least 1).
void check_conv(const OnnxNode& n) {
  check_window(n);
  const std::int64_t group = node_int(n, "group", 1);
  if (group < 1) onnx_invalid(n, "attribute 'group' is " + std::to_string(group) + "; it must be at least 1");
}

std::vector<Tensor> onnx_conv(OnnxCall& c) {
  Tensor x = c.at(0);
  const Tensor& w = c.at(1);
  const int spatial = spatial_axes(c, x);
  Window win = window_of(c, spatial, Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()));
  const Tensor b = c.has(2) ? c.in[2] : Tensor();
  const std::int64_t groups = c.attr_int("group", 1);
  if (!win.symmetric()) {  // kten's convolutions pad both sides alike: uneven pads go first
    x = pad(x, torch_pads(win.begin, win.end));
    win.begin.assign(win.begin.size(), 0);
  }
  using Conv = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&,
                          const Shape&, std::int64_t);
  const Conv by_rank[3] = {conv1d, conv2d, conv3d};
  if (Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()) != win.kernel)
    fail<ShapeError>("onnx", c.where(), ": kernel_shape ", win.kernel, " differs from the weight's ",
                     w.shape());
  return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, win.dilation, groups)};
}

void check_conv_transpose(const OnnxNode& n) {
  check_conv(n);
  const auto it = n.attributes.find("output_padding");
  if (it != n.attributes.end())
    for (std::int64_t p : it->second.ints)
      if (p < 0 || p > kMaxWindow)
        onnx_invalid(
            n, "attribute 'output_padding' holds " + std::to_string(p) + "; it must lie in [0, 2^31 - 1]");
  if (n.attributes.count("output_shape")) onnx_refuse(n, "output_shape (give pads and output_padding)");
}

std::vector<Tensor> onnx_conv_transpose(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const Tensor& w = c.at(1);
  const int spatial = spatial_axes(c, x);
  const Window win = window_of(c, spatial, Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()));
  const Shape output_padding = c.attr_ints("output_padding", Shape(static_cast<std::size_t>(spatial), 0));
  const Tensor b = c.has(2) ? c.in[2] : Tensor();
  const std::int64_t groups = c.attr_int("group", 1);
  using ConvT = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&,
                           const Shape&, std::int64_t, const Shape&);
  const ConvT by_rank[3] = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
  if (win.symmetric())
    return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, output_padding, groups, win.dilation)};
  // Uneven pads crop the unpadded result: `begin` elements before, `end` after.
  Tensor y = by_rank[spatial - 1](x, w, b, win.stride, Shape(win.begin.size(), 0), output_padding, groups,
                                  win.dilation);
  for (int i = 0; i < spatial; ++i) {
    const std::int64_t keep = y.size(i + 2) - win.begin[i] - win.end[i];
    if (keep < 1) fail<ShapeError>("onnx", c.where(), ": pads leave no output along spatial axis ", i);
    y = y.narrow(i + 2, win.begin[i], keep);
  }
  return {y};
}


// Conv and ConvTranspose: attributes as the registry orders them (conv.cpp).
std::function<std::string(OnnxEmit&)> convolution(int dims, bool transposed) {
  return [dims, transposed](OnnxEmit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const Shape& w = e.t(1).shape();
    const std::vector<std::int64_t> stride = e.ints(0, n), pad = e.ints(n, n);
    std::vector<OnnxAttr> attrs{attr_is("kernel_shape", Shape(w.begin() + 2, w.end())),
                                attr_is("strides", stride), attr_is("pads", onnx_pads(pad, pad))};
    if (transposed) {
      attrs.push_back(attr_is("output_padding", e.ints(2 * n, n)));
      attrs.push_back(attr_i("group", e.i(3 * n)));
      attrs.push_back(attr_is("dilations", e.ints(3 * n + 1, n)));
    } else {
      attrs.push_back(attr_is("dilations", e.ints(2 * n, n)));
      attrs.push_back(attr_i("group", e.i(3 * n)));
    }
    std::vector<std::string> inputs{e.in[0], e.in[1]};
    if (e.in.size() > 2) inputs.push_back(e.in[2]);
    return e.node(transposed ? "ConvTranspose" : "Conv", inputs, attrs);
  };
}


}  // namespace

// The registry's rows of this family (registry.hpp). Attributes: conv{d}d's ints are stride,
// padding, dilation (d values each) and groups; conv_transpose{d}d's stride, padding,
// output_padding, groups, dilation; pad's ints are the pads, its reals the mode (PaddingMode's
// index) and the value.
std::vector<OpDef> conv_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real;
  const DTypes floating = DTypes::floating;
  std::vector<OpDef> rows = {
      {"conv1d", "conv1d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 1); }},
      {"conv2d", "conv2d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 2); }},
      {"conv3d", "conv3d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 3); }},
      {"conv_transpose1d", "conv_transpose1d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 1); }},
      {"conv_transpose2d", "conv_transpose2d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 2); }},
      {"conv_transpose3d", "conv_transpose3d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 3); }},
  };
  // Conv and ConvTranspose take 1 to 3 spatial axes: the 2-D rows carry them.
  set_onnx(rows, "conv1d", {}, {{"kten::conv1d", convolution(1, false)}});
  set_onnx(rows, "conv2d", {{"Conv", 13, kOnnxLastOpset, 2, 3, 1, true, onnx_conv, check_conv, 0}},
           {{"kten::conv2d", convolution(2, false)}});
  set_onnx(rows, "conv3d", {}, {{"kten::conv3d", convolution(3, false)}});
  set_onnx(rows, "conv_transpose1d", {}, {{"kten::conv_transpose1d", convolution(1, true)}});
  set_onnx(
      rows, "conv_transpose2d",
      {{"ConvTranspose", 13, kOnnxLastOpset, 2, 3, 1, true, onnx_conv_transpose, check_conv_transpose, 0}},
      {{"kten::conv_transpose2d", convolution(2, true)}});
  set_onnx(rows, "conv_transpose3d", {}, {{"kten::conv_transpose3d", convolution(3, true)}});
  return rows;
}

}  // namespace kten::ops
