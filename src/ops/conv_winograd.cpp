// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cpu()'s Winograd convolutions (conv.cpp chooses them): a 3x3 (3x3x3) forward or grad_input at
// stride 1 and dilation 1 with enough channels, as F(4x4, 3x3) for 2-D float32 from 16 channels, else
// F(2x2, 3x3) or F(2x2x2, 3x3x3) from 32 (winograd_tile): a GEMM per point of the transform on the
// GEMM's micro-tiles, the transforms vectorised across tiles. Compute-bound on those GEMMs
// (ConvWinogradHostKernel); a product with a non-finite output runs as the direct convolution.
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

}  // namespace

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

}  // namespace kten::detail
