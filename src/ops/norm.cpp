// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Batch, group and instance normalisation (torch.nn.functional's batch_norm, group_norm and
// instance_norm) as one kernel with its gradient, on the row kernels of rows.hpp, the structure of
// LayerNorm's (src/nn/layer_norm.cpp). Each normalises "sets" of elements of a contiguous (N, C, S)
// tensor (S: the spatial extents' product) by their own mean and variance: batch norm a channel
// across the batch, group norm C / G channels of one sample, instance norm one channel of one
// sample (group norm with G = C). A set is walked by one thread on the host, one team on a GPU.
//
// Bandwidth-bound. The forward makes three folds over a set (mean, the correction c, the
// variance) and one write; the backward two folds over x and g and one write of dx. Only the first
// pass of each reads memory while a set fits in cache (a BatchNorm2d channel of 8x64x64 float32
// values is 128 KiB, a core's L2): one read of x and one write of y forward, one read of x and g
// and one write of dx backward. A set larger than the cache costs up to three reads of x forward
// and two of x and g backward. The parameters' gradients come out of the backward's folds
// (per-set sums, summed over the batch by kten::sum for group and instance norm): no extra pass.
// A GPU runs one team per set, and cuts a set of more than kNormPiece elements into pieces (below).
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"
#include "rows.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief One piece of a set: blocks [a0, a1), elements [k0, k1) of each.
struct NormPiece {
  std::int64_t a0, a1, k0, k1;
  KOKKOS_INLINE_FUNCTION std::int64_t count() const { return (a1 - a0) * (k1 - k0); }
};

/// \brief Where the statistics sets lie in a contiguous (N, C, S) tensor and which channel (weight
/// and bias) each element belongs to. Set s is `blocks` runs of `len` contiguous elements,
/// `stride` apart, from s * set_stride; block a of set s is channel (s % groups) * per_group + a *
/// step. Batch norm: a set per channel c, its N blocks of S (stride C S, set_stride S, groups C,
/// per_group 1, step 0). Group norm: a set per (n, g), a block per channel (C / G blocks of S,
/// stride S, set_stride C / G * S, groups G, per_group C / G, step 1).
struct NormSets {
  std::int64_t sets, blocks, len, stride, set_stride, groups, per_group, step;
  KOKKOS_INLINE_FUNCTION std::int64_t start(std::int64_t s, std::int64_t a) const { return s * set_stride + a * stride; }
  KOKKOS_INLINE_FUNCTION std::int64_t channel(std::int64_t s, std::int64_t a) const { return (s % groups) * per_group + a * step; }
  KOKKOS_INLINE_FUNCTION std::int64_t count() const { return blocks * len; }
  /// \brief A whole set as one piece.
  KOKKOS_INLINE_FUNCTION NormPiece whole() const { return {0, blocks, 0, len}; }
  /// \brief Block a of a set as one piece.
  KOKKOS_INLINE_FUNCTION NormPiece block(std::int64_t a) const { return {a, a + 1, 0, len}; }
  /// \brief The set element e belongs to: batch norm's layout is (blocks, sets, len), group norm's
  /// (sets, blocks, len).
  KOKKOS_INLINE_FUNCTION std::int64_t set_of(std::int64_t e) const { return step == 0 ? (e / len) % sets : e / (blocks * len); }
  /// \brief The block of its set element e belongs to.
  KOKKOS_INLINE_FUNCTION std::int64_t block_of(std::int64_t e) const { return step == 0 ? e / (len * sets) : (e / len) % blocks; }
};

// A GPU with few large sets (BatchNorm2d of 32 channels: 32 sets of 32K elements) would run one
// team per set on a few of its SMs, each thread's loads in a chain: 0.008 of a copy's bandwidth on
// an H200. There each set is cut into pieces of about kNormPiece elements, one team per piece
// folds its own moments (or gradient sums), one thread per set combines its pieces in order
// (Chan's pairwise update for the variance, so no cancellation), and one thread per element
// writes y (or dx): every pass is spread over the whole GPU, and the order of every sum depends
// on the shape alone. Still bandwidth-bound: x is read twice forward (the pieces' folds after the
// first hit cache), x and g twice backward.
constexpr std::int64_t kNormPiece = 2048;

/// \brief How a GPU cuts every set into pieces: a block into `per_block` pieces of up to kNormPiece
/// elements, or (batch norm with blocks shorter than a piece) `blocks_per_piece` whole blocks into
/// one piece. A group norm piece stays inside one block (one channel), whose gradient sums the
/// weight's gradient needs.
struct NormPieces {
  std::int64_t per_block = 1, blocks_per_piece = 1, per_set = 1;
  explicit NormPieces(const NormSets& l) {
    if (l.len >= kNormPiece || l.step != 0) per_block = (l.len + kNormPiece - 1) / kNormPiece;
    else blocks_per_piece = kNormPiece / (l.len > 0 ? l.len : 1);
    per_set = (l.blocks + blocks_per_piece - 1) / blocks_per_piece * per_block;
  }
  /// \brief Piece q of a set.
  KOKKOS_INLINE_FUNCTION NormPiece piece(const NormSets& l, std::int64_t q) const {
    const std::int64_t a0 = q / per_block * blocks_per_piece, k0 = q % per_block * kNormPiece;
    return {a0, a0 + blocks_per_piece < l.blocks ? a0 + blocks_per_piece : l.blocks, k0,
            k0 + kNormPiece < l.len ? k0 + kNormPiece : l.len};
  }
};

/// \brief Whether the sets are cut into pieces: on a GPU, when a set has more than kNormPiece
/// elements (and so more than one piece).
bool split_sets(const Device& device, const NormSets& l) {
  return device.is_gpu() && l.sets > 0 && l.count() > kNormPiece && NormPieces(l).per_set > 1;
}

/// \brief The sum over piece p of set s of f(e), e each element's index (blocks of one element
/// walked as one strided row).
template <class T, class Row, class F>
KOKKOS_INLINE_FUNCTION T piece_sum(const Row& row, const NormSets& l, std::int64_t s, const NormPiece& p, const F& f) {
  if (p.k1 - p.k0 == 1) return row_sum<T>(row, p.a1 - p.a0, [&](std::int64_t i) { return f(l.start(s, p.a0 + i) + p.k0); });
  T total = T(0);
  for (std::int64_t a = p.a0; a < p.a1; ++a) {
    const std::int64_t e0 = l.start(s, a) + p.k0;
    total += row_sum<T>(row, p.k1 - p.k0, [&](std::int64_t k) { return f(e0 + k); });
  }
  return total;
}

/// \brief A piece's moments (rows.hpp's corrected two-pass algorithm, LayerNorm's).
template <class T, class Row>
KOKKOS_INLINE_FUNCTION Moments<T> moments(const Row& row, const NormSets& l, std::int64_t s, const NormPiece& p, const T* x) {
  return corrected_moments(x, static_cast<T>(p.count()), [&](const auto& f) { return piece_sum<T>(row, l, s, p, f); });
}

/// \brief Where the forward keeps each set's statistics (SetStats): mean + c is the set's mean,
/// var its biased variance.
template <class T>
struct SetStatsOut {
  T* mean;
  T* c;
  T* var;
  T* rstd;
  KOKKOS_INLINE_FUNCTION void write(std::int64_t s, const Centring<T>& st, T v) const {
    mean[s] = st.mean;
    c[s] = st.c;
    var[s] = v;
    rstd[s] = st.rstd;
  }
};

/// \brief Each piece's mean and sum of squared deviations (M2), by the corrected two-pass
/// algorithm within the piece; row r is piece r % per_set of set r / per_set.
template <class T>
struct PieceMoments {
  const T* x;
  T* piece_mean;
  T* piece_m2;
  NormSets l;
  NormPieces pc;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const Moments<T> m = moments(row, l, r / pc.per_set, pc.piece(l, r % pc.per_set), x);
    row.once([&]() {
      piece_mean[r] = m.mean + m.c;
      piece_m2[r] = m.m2;
    });
  }
};

/// \brief Set s's mean, biased variance and 1 / sqrt(var + eps) from its pieces' moments, combined
/// in order by Chan's update (c, the forward's correction, is 0 here).
template <class T>
struct CombineMoments {
  const T* piece_mean;
  const T* piece_m2;
  SetStatsOut<T> out;
  NormSets l;
  NormPieces pc;
  T eps;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t s) const {
    T n = T(0), mean = T(0), m2 = T(0);
    for (std::int64_t q = 0; q < pc.per_set; ++q) {
      const T nq = static_cast<T>(pc.piece(l, q).count()), total = n + nq;
      const T delta = piece_mean[s * pc.per_set + q] - mean;
      mean += delta * (nq / total);
      m2 += piece_m2[s * pc.per_set + q] + (q == 0 ? T(0) : delta * delta * (n * nq / total));
      n = total;
    }
    const T var = m2 / n;
    out.write(s, {mean, T(0), T(1) / math::sqrt(var + eps)}, var);
  }
};

/// \brief y = ((x - mean) - c) * (rstd w) + b, one thread per element.
template <class T>
struct NormApply {
  const T* x;
  const T* w;
  const T* b;
  T* y;
  RowStatistics<T> stats;
  NormSets l;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const std::int64_t s = l.set_of(e), ch = l.channel(s, l.block_of(e));
    const Centring<T> st = stats.of(s);
    y[e] = st.centred(x[e]) * (st.rstd * w[ch]) + b[ch];
  }
};

/// \brief A piece's sums of g and of g * xhat: the parameters' gradients (bias, weight) over it.
template <class T>
struct GradSums {
  T g, g_xhat;
};
template <class T, class Row>
KOKKOS_INLINE_FUNCTION GradSums<T> grad_sums(const Row& row, const NormSets& l, std::int64_t s, const NormPiece& p, const T* x,
                                             const T* g, const Centring<T>& st) {
  const T sum_g = piece_sum<T>(row, l, s, p, [&](std::int64_t e) { return g[e]; });
  return {sum_g, piece_sum<T>(row, l, s, p, [&](std::int64_t e) { return g[e] * st.xhat(x[e]); })};
}

/// \brief Where a kernel stores GradSums: the pieces' sums, or the parameters' partial gradients
/// (partial_b takes g, partial_w g xhat; per set for batch norm, a set being a channel, per block,
/// a channel of one sample, for group norm).
template <class T>
struct GradSumsOut {
  T* g;
  T* g_xhat;
  KOKKOS_INLINE_FUNCTION void write(std::int64_t i, const GradSums<T>& sums) const {
    g[i] = sums.g;
    g_xhat[i] = sums.g_xhat;
  }
};

/// \brief Each piece's sums of g and g * xhat.
template <class T>
struct PieceGradSums {
  const T* x;
  const T* g;
  RowStatistics<T> stats;
  GradSumsOut<T> out;
  NormSets l;
  NormPieces pc;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const std::int64_t s = r / pc.per_set;
    const GradSums<T> sums = grad_sums(row, l, s, pc.piece(l, r % pc.per_set), x, g, stats.of(s));
    row.once([&]() { out.write(r, sums); });
  }
};

/// \brief Set s's mean of g w and of g w xhat from its pieces' sums, in order; and, when `params`,
/// the parameters' partial sums as NormBackward writes them (per set for batch norm, per block
/// for group norm, whose pieces never span two blocks).
template <class T>
struct CombineGradSums {
  const T* piece_g;
  const T* piece_g_xhat;
  const T* w;
  T* mean_gw;
  T* mean_gw_xhat;
  GradSumsOut<T> partials;
  NormSets l;
  NormPieces pc;
  bool params;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t s) const {
    T sum_gw = T(0), sum_gw_xhat = T(0);
    GradSums<T> block{T(0), T(0)};
    for (std::int64_t q = 0; q < pc.per_set; ++q) {
      const std::int64_t a = pc.piece(l, q).a0;
      const T wc = w[l.channel(s, a)], pg = piece_g[s * pc.per_set + q], pgx = piece_g_xhat[s * pc.per_set + q];
      sum_gw += wc * pg;
      sum_gw_xhat += wc * pgx;
      block.g += pg;
      block.g_xhat += pgx;
      const bool block_ends = l.step != 0 && (q + 1) % pc.per_block == 0;
      if (params && block_ends) partials.write(s * l.blocks + a, block);
      if (block_ends) block = {T(0), T(0)};
    }
    if (params && l.step == 0) partials.write(s, block);
    const T count = static_cast<T>(l.count());
    mean_gw[s] = sum_gw / count;
    mean_gw_xhat[s] = sum_gw_xhat / count;
  }
};

/// \brief dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat)), one thread per element.
template <class T>
struct NormGradApply {
  const T* x;
  const T* g;
  const T* w;
  RowStatistics<T> stats;
  const T* mean_gw;
  const T* mean_gw_xhat;
  T* dx;
  NormSets l;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const std::int64_t s = l.set_of(e), ch = l.channel(s, l.block_of(e));
    dx[e] = stats.of(s).grad(x[e], g[e] * w[ch], mean_gw[s], mean_gw_xhat[s]);
  }
};

/// \brief block(a)(e) for every element e of set s, as piece_sum walks a whole set: block(a)
/// gives the per-block function (its constants, such as the channel's weight, out of the loop).
template <class Row, class Block>
KOKKOS_INLINE_FUNCTION void set_for_each(const Row& row, const NormSets& l, std::int64_t s, const Block& block) {
  if (l.len == 1) {
    row.for_each(l.blocks, [&](std::int64_t a) { block(a)(l.start(s, a)); });
    return;
  }
  for (std::int64_t a = 0; a < l.blocks; ++a) {
    const auto f = block(a);
    const std::int64_t e0 = l.start(s, a);
    row.for_each(l.len, [&](std::int64_t k) { f(e0 + k); });
  }
}

/// \brief y = ((x - mean) - c) / sqrt(var + eps) * w + b over each set, by LayerNorm's corrected
/// two-pass algorithm (c, the mean of x - mean, takes the first mean's rounding off again); var is
/// biased, as PyTorch's. Keeps each set's mean, c, var and 1 / sqrt(var + eps).
template <class T>
struct NormForward {
  const T* x;
  const T* w;
  const T* b;
  T* y;
  SetStatsOut<T> out;
  NormSets l;
  T eps;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t s, const Row& row) const {
    const Moments<T> m = moments(row, l, s, l.whole(), x);
    const T var = m.m2 / static_cast<T>(l.count());
    const Centring<T> st{m.mean, m.c, T(1) / math::sqrt(var + eps)};
    set_for_each(row, l, s, [&](std::int64_t a) {
      const std::int64_t ch = l.channel(s, a);
      const T scale = st.rstd * w[ch], shift = b[ch];
      return [x = x, y = y, st, scale, shift](std::int64_t e) { y[e] = st.centred(x[e]) * scale + shift; };
    });
    row.once([&]() { out.write(s, st, var); });
  }
};

/// \brief dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over each set, gw = g * w, xhat =
/// ((x - mean) - c) * rstd as the forward centred it. The sums of g and g * xhat it folds are also
/// the parameters' gradients, written to `partials` when `params`.
template <class T>
struct NormBackward {
  const T* x;
  const T* g;
  const T* w;
  RowStatistics<T> stats;
  T* dx;
  GradSumsOut<T> partials;
  NormSets l;
  bool want_dx, params;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t s, const Row& row) const {
    const Centring<T> st = stats.of(s);
    T sum_gw = T(0), sum_gw_xhat = T(0);
    if (l.step == 0) {
      const GradSums<T> sums = grad_sums(row, l, s, l.whole(), x, g, st);
      const T wc = w[l.channel(s, 0)];
      sum_gw = wc * sums.g;
      sum_gw_xhat = wc * sums.g_xhat;
      if (params) row.once([&]() { partials.write(s, sums); });
    } else {
      for (std::int64_t a = 0; a < l.blocks; ++a) {
        const GradSums<T> sums = grad_sums(row, l, s, l.block(a), x, g, st);
        const T wc = w[l.channel(s, a)];
        sum_gw += wc * sums.g;
        sum_gw_xhat += wc * sums.g_xhat;
        if (params) row.once([&]() { partials.write(s * l.blocks + a, sums); });
      }
    }
    if (!want_dx) return;
    const T count = static_cast<T>(l.count());
    const T mean_gw = sum_gw / count, mean_gw_xhat = sum_gw_xhat / count;
    set_for_each(row, l, s, [&](std::int64_t a) {
      const T wc = w[l.channel(s, a)];
      return [x = x, g = g, dx = dx, st, wc, mean_gw, mean_gw_xhat](std::int64_t e) {
        dx[e] = st.grad(x[e], g[e] * wc, mean_gw, mean_gw_xhat);
      };
    });
  }
};

/// \brief The per-set statistics of a normalisation: mean + c is the set's mean, var its biased
/// variance.
struct SetStats {
  Tensor mean, c, var, rstd;
};

/// \brief Normalises the sets of x (any shape (N, C, ...), checked by the caller) with weight
/// and bias of shape (C) (defined: ones and zeros stand in for none), records the gradient, and
/// returns y with the sets' statistics.
std::pair<Tensor, SetStats> normalise(const char* op, const char* grad_op, const Tensor& x_in, const Tensor& weight,
                                      const Tensor& bias, double eps, bool per_channel_sets, std::int64_t groups) {
  const Tensor x = x_in.detach().contiguous();  // a copy only for a strided view
  const std::int64_t n = x.shape()[0], channels = x.shape()[1];
  std::int64_t inner = 1;  // the spatial extents' product: fits, as x's element count does
  for (int d = 2; d < x.ndim(); ++d) inner *= x.shape()[d];
  const std::int64_t per_group = channels / groups;
  const NormSets l = per_channel_sets ? NormSets{channels, n, inner, channels * inner, inner, channels, 1, 0}
                                      : NormSets{n * groups, per_group, inner, inner, per_group * inner, groups, per_group, 1};
  Tensor y = empty(x.shape(), x.device(), x.dtype());
  SetStats st{empty({l.sets}, x.device(), x.dtype()), empty({l.sets}, x.device(), x.dtype()),
              empty({l.sets}, x.device(), x.dtype()), empty({l.sets}, x.device(), x.dtype())};
  const Tensor w = weight.detach().contiguous(), b = bias.detach().contiguous();
  const bool split = split_sets(x.device(), l);
  const NormPieces pc(l);
  const std::int64_t pieces = split ? l.sets * pc.per_set : 0;  // under x's element count: fits
  const Tensor moments = empty({2 * pieces}, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* px, auto* pw, auto* pb, auto* py, auto* pmean, auto* pcorr, auto* pvar, auto* prstd,
                 auto* pmoments) {
    using T = std::remove_pointer_t<decltype(px)>;
    const SetStatsOut<T> out{pmean, pcorr, pvar, prstd};
    if (!split)
      return for_each_row(op, backend, RowLayout{l.sets, l.count(), 1}, NormForward<T>{px, pw, pb, py, out, l, static_cast<T>(eps)});
    for_each_row(op, backend, RowLayout{pieces, kNormPiece, 1}, PieceMoments<T>{px, pmoments, pmoments + pieces, l, pc});
    for_each_index(op, backend, l.sets, CombineMoments<T>{pmoments, pmoments + pieces, out, l, pc, static_cast<T>(eps)});
    for_each_index(op, backend, x.numel(), NormApply<T>{px, pw, pb, py, {pmean, pcorr, prstd}, l});
  }, x, w, b, y, st.mean, st.c, st.var, st.rstd, moments);
  if (recording(x_in, weight, bias))
    record(op, y, {&x_in, &weight, &bias}, [x = saved(x), w, st, l, n, channels, grad_op, split, pc, pieces](const Tensor& g_in,
                                                                                                     const Needs& needs) {
      const Tensor g = g_in.contiguous();
      Grads grads(3);
      const bool params = needs[1] || needs[2];
      const Shape partial_shape = l.step == 0 ? Shape{params ? l.sets : 0} : Shape{params ? l.sets : 0, l.blocks};
      const Tensor dx = empty(needs[0] ? x.shape() : Shape{0}, x.device(), x.dtype());
      const Tensor partial_w = empty(partial_shape, x.device(), x.dtype()), partial_b = empty(partial_shape, x.device(), x.dtype());
      // split: the pieces' sums of g and g xhat, then each set's mean of g w and g w xhat
      const Tensor sums = empty({split ? 2 * pieces + 2 * l.sets : 0}, x.device(), x.dtype());
      launch(grad_op, [&](const auto& backend, auto* px, auto* pg, auto* pw, auto* pmean, auto* pcorr, auto* prstd, auto* pdx,
                          auto* ppw, auto* ppb, auto* psums) {
        using T = std::remove_pointer_t<decltype(px)>;
        const RowStatistics<T> stats{pmean, pcorr, prstd};
        const GradSumsOut<T> partials{ppb, ppw};
        if (!split)
          return for_each_row(grad_op, backend, RowLayout{l.sets, l.count(), 1},
                              NormBackward<T>{px, pg, pw, stats, pdx, partials, l, needs[0], params});
        T* const mean_gw = psums + 2 * pieces;
        for_each_row(grad_op, backend, RowLayout{pieces, kNormPiece, 1}, PieceGradSums<T>{px, pg, stats, {psums, psums + pieces}, l, pc});
        for_each_index(grad_op, backend, l.sets,
                       CombineGradSums<T>{psums, psums + pieces, pw, mean_gw, mean_gw + l.sets, partials, l, pc, params});
        if (needs[0])
          for_each_index(grad_op, backend, x.numel(), NormGradApply<T>{px, pg, pw, stats, mean_gw, mean_gw + l.sets, pdx, l});
      }, x, g, w, st.mean, st.c, st.rstd, dx, partial_w, partial_b, sums);
      if (needs[0]) grads[0] = dx;
      // Group norm's partials are (N, C): the batch's sum, in one order on every device.
      const auto over_batch = [&](const Tensor& p) { return l.step == 0 ? p : sum(p.reshape({n, channels}), 0); };
      if (needs[1]) grads[1] = over_batch(partial_w);
      if (needs[2]) grads[2] = over_batch(partial_b);
      return grads;
    }, [&] {  // group and instance norm's: the groups, and eps
      ops::OpAttrs a = ops::OpAttrs::of_ints({groups});
      a.reals = {eps};
      return a;
    });
  return {y, st};
}


/// \brief Checks a normalisation's input: defined, of rank 2 at least, channels on axis 1.
void check_norm_input(const char* op, const Tensor& x) {
  check_defined(x, op);
  if (x.ndim() < 2) fail<ShapeError>(op, "expects an input (N, C, ...) with channels on axis 1, got shape ", x.shape());
}

/// \brief Checks an optional per-channel tensor (weight, bias, running statistics): undefined, or
/// of shape (C) on x's device in x's dtype.
void check_per_channel(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  check_same_device(op, t.device(), x.device());
  check_dtype(op, what, t, x.dtype(), "convert it with .astype(...)");
  if (t.shape() != Shape{x.shape()[1]})
    fail<ShapeError>(op, what, " has shape ", t.shape(), " but the input of shape ", x.shape(), " has ", x.shape()[1],
                     " channels (axis 1): expected (", x.shape()[1], ")");
}

/// \brief t, or `fill` of shape (C) when t is undefined (no weight: ones; no bias: zeros).
Tensor or_fill(const Tensor& t, const Tensor& x, double fill) {
  return t.defined() ? t : full({x.shape()[1]}, fill, x.device(), x.dtype());
}

/// \brief The spatial extents' product of an (N, C, ...) input.
std::int64_t spatial_size(const Tensor& x) {
  std::int64_t s = 1;
  for (int d = 2; d < x.ndim(); ++d) s *= x.shape()[d];
  return s;
}

/// \brief (x - running_mean) / sqrt(running_var + eps) * weight + bias, channels on axis 1
/// (evaluation mode), from differentiable ops: three passes over x.
Tensor running_affine(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                      const Tensor& bias, double eps) {
  Shape channel(static_cast<std::size_t>(x.ndim()), 1);
  channel[1] = x.shape()[1];
  Tensor scale = 1.0 / sqrt(running_var + eps);
  if (weight.defined()) scale = scale * weight;
  const Tensor y = (x - running_mean.reshape(channel)) * scale.reshape(channel);
  return bias.defined() ? y + bias.reshape(channel) : y;
}

/// \brief running = (1 - momentum) running + momentum value, in place, off the tape (PyTorch's).
void update_running(const Tensor& running, const Tensor& value, double momentum) {
  if (running.defined()) running.copy_from(running * (1 - momentum) + value * momentum);
}

/// \brief Evaluation mode needs both running statistics.
void require_running(const char* op, const Tensor& running_mean, const Tensor& running_var, const char* mode) {
  if (!running_mean.defined() || !running_var.defined())
    fail(op, mode, " normalises by running_mean and running_var, and one is undefined: pass both, or use the input's statistics");
}

}  // namespace
}  // namespace detail

namespace {
Tensor batch_norm_of(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = "kten::batch_norm";
  detail::check_norm_input(op, x);
  const std::pair<const char*, const Tensor*> per_channel[] = {
      {"running_mean", &running_mean}, {"running_var", &running_var}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [what, t] : per_channel) detail::check_per_channel(op, what, *t, x);
  if (!training) {
    detail::require_running(op, running_mean, running_var, "evaluation mode (training false)");
    return detail::running_affine(x, running_mean, running_var, weight, bias, eps);
  }
  const std::int64_t count = x.shape()[0] * detail::spatial_size(x);
  if (count == 1)
    detail::fail<ShapeError>(op, "expected more than 1 value per channel when training, got input shape ", x.shape());
  auto [y, stats] = detail::normalise(op, "kten::batch_norm_grad", x, detail::or_fill(weight, x, 1), detail::or_fill(bias, x, 0),
                                      eps, true, 1);
  if (x.numel() > 0) {
    NoGradGuard no_grad;  // running statistics change in place, off the tape
    detail::update_running(running_mean, stats.mean + stats.c, momentum);
    detail::update_running(running_var, stats.var * (static_cast<double>(count) / static_cast<double>(count - 1)), momentum);
  }
  return y;
}
}  // namespace

// One op for a trace, whichever ops compute it (evaluation mode's are elementwise), with the
// running statistics among its inputs: ONNX's BatchNormalization reads them.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return detail::traced_as("kten::batch_norm", {&x, &running_mean, &running_var, &weight, &bias}, [&] {
    ops::OpAttrs a = ops::OpAttrs::of_reals({momentum, eps});
    a.ints = {training ? 1 : 0};
    return a;
  }, [&] { return batch_norm_of(x, running_mean, running_var, weight, bias, training, momentum, eps); });
}

Tensor group_norm(const Tensor& x, std::int64_t groups, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = "kten::group_norm";
  detail::check_norm_input(op, x);
  if (groups < 1 || x.shape()[1] % groups != 0)
    detail::fail<ShapeError>(op, groups, " groups do not divide the ", x.shape()[1], " channels of the input of shape ", x.shape());
  detail::check_per_channel(op, "weight", weight, x);
  detail::check_per_channel(op, "bias", bias, x);
  return detail::normalise(op, "kten::group_norm_grad", x, detail::or_fill(weight, x, 1), detail::or_fill(bias, x, 0), eps,
                           false, groups).first;
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  constexpr const char* op = "kten::instance_norm";
  detail::check_norm_input(op, x);
  const std::pair<const char*, const Tensor*> per_channel[] = {
      {"running_mean", &running_mean}, {"running_var", &running_var}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [what, t] : per_channel) detail::check_per_channel(op, what, *t, x);
  if (!use_input_stats) {
    detail::require_running(op, running_mean, running_var, "use_input_stats false");
    return detail::running_affine(x, running_mean, running_var, weight, bias, eps);
  }
  const std::int64_t spatial = detail::spatial_size(x);
  if (spatial == 1)
    detail::fail<ShapeError>(op, "expected more than 1 spatial element when training, got input shape ", x.shape());
  auto [y, stats] = detail::normalise(op, "kten::instance_norm_grad", x, detail::or_fill(weight, x, 1), detail::or_fill(bias, x, 0),
                                      eps, false, x.shape()[1]);
  if (x.numel() > 0) {
    NoGradGuard no_grad;  // the batch's mean of each channel's statistics, as PyTorch's
    const Shape nc{x.shape()[0], x.shape()[1]};
    detail::update_running(running_mean, mean((stats.mean + stats.c).reshape(nc), 0), momentum);
    detail::update_running(running_var, mean((stats.var * (static_cast<double>(spatial) / static_cast<double>(spatial - 1))).reshape(nc), 0),
                           momentum);
  }
  return y;
}

namespace ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> batch_normalization(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const Tensor& running_mean = c.at(3);
  const Tensor& running_var = c.at(4);
  // ONNX's momentum weighs the running value, PyTorch's (and kten's) the batch's.
  const double momentum = 1.0 - c.attr_real("momentum", 0.9), eps = c.attr_real("epsilon", 1e-5);
  // The model's mode decides, as for nn::BatchNorm (training_mode only sets the mode load() starts in).
  if (!c.training)  // opset 13's saved statistics: never read (import.cpp)
    return {batch_norm(x, running_mean, running_var, c.at(1), c.at(2), false, momentum, eps), running_mean,
            running_var, Tensor(), Tensor()};
  // Training: normalised by the batch's statistics; the running variance then takes the batch's
  // population variance, as ONNX specifies and ONNX Runtime computes (PyTorch's module takes the
  // unbiased one, n / (n - 1) times it). Two more passes over x, in training mode only.
  const Tensor y = batch_norm(x, Tensor(), Tensor(), c.at(1), c.at(2), true, momentum, eps);
  if (x.numel() > 0) {
    NoGradGuard no_grad;  // running statistics change in place, off the tape
    std::vector<int> axes{0};
    for (int a = 2; a < x.ndim(); ++a) axes.push_back(a);
    const Tensor batch_mean = mean(x.detach(), axes, true);
    const Tensor centred = x.detach() - batch_mean;
    running_mean.copy_from(running_mean * (1 - momentum) +
                           batch_mean.reshape(running_mean.shape()) * momentum);
    running_var.copy_from(running_var * (1 - momentum) + mean(centred * centred, axes) * momentum);
  }
  return {y, running_mean, running_var, Tensor(), Tensor()};
}

std::vector<Tensor> instance_normalization(OnnxCall& c) {
  return {instance_norm(c.at(0), {}, {}, c.at(1), c.at(2), true, 0.1, c.attr_real("epsilon", 1e-5))};
}

// GroupNormalization: opset 18 scales and shifts per group, opset 21 per channel (PyTorch's).
void check_group_norm(const OnnxNode& n) {
  check_stash_type(n);
  const auto groups = n.attributes.find("num_groups");
  if (groups == n.attributes.end() || groups->second.kind != OnnxAttribute::integer || groups->second.i < 1)
    onnx_invalid(n, "attribute 'num_groups' must be given, an integer of at least 1");
}

std::vector<Tensor> group_normalization(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const std::int64_t groups = c.attr_int("num_groups", 1);
  if (x.ndim() < 2 || x.size(1) % groups != 0)
    fail<ShapeError>("onnx", c.where(), ": ", groups, " groups do not divide the channels of ", x.shape());
  Tensor scale = c.at(1), bias = c.at(2);
  if (c.opset() < 21) {  // one value per group, repeated over its channels
    if (scale.numel() != groups || bias.numel() != groups)
      fail<ShapeError>("onnx", c.where(), ": at opset ", c.opset(),
                       " scale and bias hold one value per group (", groups, "), not ", scale.shape(),
                       " and ", bias.shape());
    const Shape per_channel{groups, x.size(1) / groups};
    scale = scale.reshape({groups, 1}).expand(per_channel).reshape({x.size(1)});
    bias = bias.reshape({groups, 1}).expand(per_channel).reshape({x.size(1)});
  }
  return {group_norm(x, groups, scale, bias, c.attr_real("epsilon", 1e-5))};
}

// batch_norm as BatchNormalization: the running statistics are inputs (buffers at load), the mode
// the call's (training mode has the updated statistics as outputs too, as ONNX requires, which
// nothing reads: load() updates the buffers in place). ONNX's momentum weighs the running value,
// kten's (PyTorch's) the batch's.
std::string batch_norm_row(OnnxEmit& e) {
  const Tensor& x = e.t(0);
  if (!e.t(1).defined() || !e.t(2).defined())
    e.refuse("batch statistics without running ones (track_running_stats = false) have no ONNX form");
  const std::int64_t channels = x.shape().at(1);
  const std::string scale = e.t(3).defined() ? e.in[3] : e.w.constant(ones({channels}, cpu(), x.dtype()));
  const std::string shift = e.t(4).defined() ? e.in[4] : e.w.constant(zeros({channels}, cpu(), x.dtype()));
  return e.node(
      "BatchNormalization", {e.in[0], scale, shift, e.in[1], e.in[2]},
      {attr_f("epsilon", e.r(1)), attr_f("momentum", 1.0 - e.r(0)), attr_i("training_mode", e.i(0))},
      e.i(0) != 0 ? 3 : 1);
}

// group_norm as PyTorch exports it: InstanceNormalization over (N, G, rest), then the per-channel
// weight and bias.
std::string group_norm_row(OnnxEmit& e) {
  const Tensor& x = e.t(0);
  const std::int64_t groups = e.i(0), channels = x.shape().at(1);
  const std::string grouped = e.node("Reshape", {e.in[0], e.w.ints({0, groups, -1})});
  const std::string normal = e.node("InstanceNormalization",
                                    {grouped, e.w.constant(ones({groups}, cpu(), x.dtype())),
                                     e.w.constant(zeros({groups}, cpu(), x.dtype()))},
                                    {attr_f("epsilon", e.r(0))});
  const std::string y = e.node("Reshape", {normal, e.node("Shape", {e.in[0]})});
  std::vector<std::int64_t> per_channel(static_cast<std::size_t>(x.ndim()) - 1, 1);
  per_channel[0] = channels;
  const std::string per = e.w.ints(per_channel);
  return e.node("Add",
                {e.node("Mul", {y, e.node("Reshape", {e.in[1], per})}), e.node("Reshape", {e.in[2], per})});
}

}  // namespace

std::vector<OpDef> norm_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, positive = Domain::positive;
  // Inputs: x, then the optional per-channel tensors (undefined: none); ints: training (or
  // use_input_stats) as 0 / 1, or group_norm's groups; reals: momentum and eps, or eps.
  std::vector<OpDef> rows = {
      {"batch_norm", "batch_norm(Tensor,Tensor,Tensor,Tensor,Tensor,bool,double,double)", 5, {real, real, positive, real, real},
       DTypes::floating, true,
       [](X x, A a) { return batch_norm(x[0], x[1], x[2], x[3], x[4], a.ints.at(0) != 0, a.reals.at(0), a.reals.at(1)); }},
      {"group_norm", "group_norm(Tensor,int64_t,Tensor,Tensor,double)", 3, {real}, DTypes::floating, true,
       [](X x, A a) { return group_norm(x[0], a.ints.at(0), x[1], x[2], a.reals.at(0)); }},
      {"instance_norm", "instance_norm(Tensor,Tensor,Tensor,Tensor,Tensor,bool,double,double)", 5, {real, real, positive, real, real},
       DTypes::floating, true,
       [](X x, A a) { return instance_norm(x[0], x[1], x[2], x[3], x[4], a.ints.at(0) != 0, a.reals.at(0), a.reals.at(1)); }},
  };
  set_onnx(rows, "batch_norm",
           {{"BatchNormalization", 13, kOnnxLastOpset, 5, 5, 5, false, batch_normalization, nullptr, 0}},
           {{"kten::batch_norm", batch_norm_row}});
  set_onnx(
      rows, "group_norm",
      {{"GroupNormalization", 18, kOnnxLastOpset, 3, 3, 1, true, group_normalization, check_group_norm, 0}},
      {{"kten::group_norm", group_norm_row}});
  set_onnx(
      rows, "instance_norm",
      {{"InstanceNormalization", 13, kOnnxLastOpset, 3, 3, 1, true, instance_normalization, nullptr, 0}},
      {{"kten::instance_norm", [](OnnxEmit& e) {
          return e.node("InstanceNormalization", {e.in[0], e.in[1], e.in[2]}, {attr_f("epsilon", e.r(0))});
        }}});
  return rows;
}

}  // namespace ops
}  // namespace kten
