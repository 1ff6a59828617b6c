// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The convolutions' implicit GEMM (conv.cpp's overview): three matrix products per (batch item,
// group), one operand gathered on the fly from the implicit im2col matrix. cpu() packs it straight
// from the tensor into the GEMM's micro-panels (ConvHostKernel), or for grad_weight at stride 1 along
// w reads E in place (ConvWeightHostKernel); GPUs gather it from E inside the GEMM's SIMT tile
// (ConvTeamKernel). Compute-bound like the GEMM, whose micro-kernels and tiles they are.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_paths.hpp"
#include "core/checked.hpp"
#include "dispatch/dispatch.hpp"
#include "fast_div.hpp"

namespace kten::detail {
namespace {

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

}  // namespace

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

}  // namespace kten::detail
