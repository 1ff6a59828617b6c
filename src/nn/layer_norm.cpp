// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// LayerNorm over the last axis as one op with its gradient: row kernels (rows.hpp), bandwidth-bound.
// The forward reads each row once from memory and writes it once (its other passes read the row
// from cache) and keeps each row's mean, the correction c below and 1 / sqrt(var + eps) for the
// backward pass, which reads x and the gradient once more to write dx and, on the host in the same
// pass, the weight's and bias' gradients (sums down the rows: partial sums per chunk of rows, then
// theirs; a GPU reads x and g once more for them).
#include "functional.hpp"

#include <algorithm>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "ops/elementwise.hpp"
#include "ops/rows.hpp"

namespace kten::detail {

namespace {

/// \brief y = ((x - mean) - c) / sqrt(var + eps) * w + b along a row, by the corrected two-pass
/// algorithm: c, the mean of the deviations x - mean (0 but for the first mean's rounding), is
/// taken off again, or a nearly constant row's rounding error, divided by sqrt(var + eps), would
/// reach y multiplied by up to 1 / sqrt(eps). var is biased (over n), as PyTorch's. Keeps mean, c
/// and 1 / sqrt(var + eps) per row, so that the gradient centres x exactly as the forward did
/// (mean + c would round back to mean on a nearly constant row).
template <class T>
struct LayerNormRow {
  const T* x;
  const T* w;
  const T* b;
  T* y;
  T* row_mean;
  T* row_c;
  T* row_rstd;
  std::int64_t n;
  T eps;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T count = static_cast<T>(n);
    const Moments<T> m = corrected_moments(xr, count, [&](const auto& f) { return row_sum<T>(row, n, f); });
    const Centring<T> centring{m.mean, m.c, T(1) / math::sqrt(m.m2 / count + eps)};
    row.for_each(n, [&](std::int64_t k) { yr[k] = centring.xhat(xr[k]) * w[k] + b[k]; });
    row.once([&]() {
      row_mean[r] = centring.mean;
      row_c[r] = centring.c;
      row_rstd[r] = centring.rstd;
    });
  }
};

/// \brief dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) along a row, with gw = g * w.
template <class T>
struct LayerNormGradRow {
  const T* x;
  const T* g;
  const T* w;
  RowStatistics<T> stats;
  T* dx;
  std::int64_t n;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    T* dr = dx + r * n;
    const Centring<T> centring = stats.of(r);
    const T count = static_cast<T>(n);
    const T mean_gw = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k] * w[k]; }) / count;
    const T mean_gw_xhat = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k] * w[k] * centring.xhat(xr[k]); }) / count;
    row.for_each(n, [&](std::int64_t k) { dr[k] = centring.grad(xr[k], gr[k] * w[k], mean_gw, mean_gw_xhat); });
  }
};

/// \brief The weight's and bias' gradients, sums down the rows: dw[j] = sum_r g[r, j] xhat[r, j],
/// db[j] = sum_r g[r, j], in two steps. First each chunk of `chunk` rows sums into its own
/// partial row (on the host one thread per chunk, walking its rows in order with contiguous,
/// vectorised loads; on a GPU one thread per chunk and column, adjacent threads on adjacent
/// columns), then ParamGradFold adds the chunks' partials in order. One order of additions on
/// every device and thread count; a chunk per thread, not a column block per thread, because a
/// column block's loads stride by a whole row, which the host's prefetchers do not follow.
template <class T>
struct LayerNormParamPartials {
  const T* x;
  const T* g;
  RowStatistics<T> stats;
  T* partial_w;  // (chunks, n)
  T* partial_b;  // (chunks, n)
  std::int64_t rows, n, chunk;
  bool per_column;  // GPU: index = chunk * n + column; host: index = chunk
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t part = per_column ? index / n : index;
    const std::int64_t j0 = per_column ? index % n : 0, j1 = per_column ? j0 + 1 : n;
    const std::int64_t r1 = (part + 1) * chunk < rows ? (part + 1) * chunk : rows;
    T* pw = partial_w + part * n;
    T* pb = partial_b + part * n;
    for (std::int64_t j = j0; j < j1; ++j) pw[j] = pb[j] = T(0);
    for (std::int64_t r = part * chunk; r < r1; ++r) add_row(r, pw, pb, j0, j1);
  }
  /// \brief Adds row r's g * xhat and g, columns [j0, j1), to a chunk's partial rows.
  KOKKOS_INLINE_FUNCTION void add_row(std::int64_t r, T* pw, T* pb, std::int64_t j0, std::int64_t j1) const {
    const T* xr = x + r * n;
    const T* gr = g + r * n;
    const Centring<T> centring = stats.of(r);
    for (std::int64_t j = j0; j < j1; ++j) {
      pw[j] += gr[j] * centring.xhat(xr[j]);
      pb[j] += gr[j];
    }
  }
};

/// \brief Host, when dx and the weight's or bias' gradient are all wanted: one thread per chunk
/// of rows writes each row's dx (LayerNormGradRow) and then adds the row, still in L1, to the
/// chunk's partial rows (LayerNormParamPartials), so x and g are read from memory once, not twice.
/// The same chunks and order as the two kernels apart, so the same results.
template <class T>
struct LayerNormGradChunk {
  LayerNormGradRow<T> dx_row;
  LayerNormParamPartials<T> partials;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t part) const {
    const std::int64_t n = partials.n, chunk = partials.chunk;
    const std::int64_t r1 = (part + 1) * chunk < partials.rows ? (part + 1) * chunk : partials.rows;
    T* pw = partials.partial_w + part * n;
    T* pb = partials.partial_b + part * n;
    for (std::int64_t j = 0; j < n; ++j) pw[j] = pb[j] = T(0);
    for (std::int64_t r = part * chunk; r < r1; ++r) {
      dx_row(r, HostRow{});
      partials.add_row(r, pw, pb, 0, n);
    }
  }
};

/// \brief dw[j] and db[j] from the chunks' partials, added in chunk order.
template <class T>
struct ParamGradFold {
  const T* partial_w;
  const T* partial_b;
  T* dw;
  T* db;
  std::int64_t chunks, n;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t j) const {
    T w = T(0), b = T(0);
    for (std::int64_t part = 0; part < chunks; ++part) {
      w += partial_w[part * n + j];
      b += partial_b[part * n + j];
    }
    dw[j] = w;
    db[j] = b;
  }
};

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = "kten::layer_norm";
  constexpr const char* grad_op = "kten::layer_norm_grad";
  if (x_in.ndim() == 0) fail<ShapeError>(op, "normalises the last axis, and a scalar has none");
  const Tensor x = x_in.detach().contiguous();  // a copy only for a strided view
  // Rows of an empty last axis (from an ONNX file) have a NaN mean, as in PyTorch, and no elements.
  const std::int64_t n = x.shape().back(),
                     rows = n == 0 ? checked_numel(Shape(x.shape().begin(), x.shape().end() - 1), op) : x.numel() / n;
  Tensor y = empty(x.shape(), x.device(), x.dtype());
  Tensor mean = empty({rows}, x.device(), x.dtype()), c = empty({rows}, x.device(), x.dtype()),
         rstd = empty({rows}, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* px, auto* pw, auto* pb, auto* py, auto* pmean, auto* pc, auto* prstd) {
    using T = std::remove_pointer_t<decltype(px)>;
    for_each_row(op, backend, RowLayout{rows, n, 1},
                 LayerNormRow<T>{px, pw, pb, py, pmean, pc, prstd, n, static_cast<T>(eps)});
  }, x, weight.detach().contiguous(), bias.detach().contiguous(), y, mean, c, rstd);
  if (recording(x_in, weight, bias))
    record(op, y, {&x_in, &weight, &bias},
           [x = saved(x), w = saved(weight).contiguous(), mean, c, rstd, rows, n, grad_op](const Tensor& g_in, const Needs& needs) {
             const Tensor g = g_in.contiguous();
             Grads grads(3);
             if (needs[0]) grads[0] = empty(x.shape(), x.device(), x.dtype());
             const bool params = needs[1] || needs[2];
             // Chunks of at least 64 rows, at most 256 of them: the partials stay small.
             const std::int64_t chunk = std::max<std::int64_t>(64, (rows + 255) / 256);
             const std::int64_t chunks = params ? (rows + chunk - 1) / chunk : 0;
             const Tensor partial_w = empty({chunks, n}, x.device(), x.dtype()), partial_b = empty({chunks, n}, x.device(), x.dtype());
             const Tensor dw = empty({params ? n : 0}, x.device(), x.dtype()), db = empty({params ? n : 0}, x.device(), x.dtype());
             launch(grad_op, [&](const auto& backend, auto* px, auto* pg, auto* pw, auto* pmean, auto* pc, auto* prstd, auto* pdx,
                                 auto* ppw, auto* ppb, auto* pdw, auto* pdb) {
               using T = std::remove_pointer_t<decltype(px)>;
               constexpr bool host = std::decay_t<decltype(backend)>::is_host;
               const LayerNormGradRow<T> dx_row{px, pg, pw, {pmean, pc, prstd}, pdx, n};
               const LayerNormParamPartials<T> partials{px, pg, {pmean, pc, prstd}, ppw, ppb, rows, n, chunk, !host};
               bool fused = false;  // dx and the partials in one pass (host only; a chunk for every thread)
               if constexpr (host) {
                 if (needs[0] && params && chunks >= compat::host_concurrency()) {
                   for_each_index(grad_op, backend, chunks, LayerNormGradChunk<T>{dx_row, partials}, rows * n);
                   fused = true;
                 }
               }
               if (needs[0] && !fused) for_each_row(grad_op, backend, RowLayout{rows, n, 1}, dx_row);
               if (params && !fused) for_each_index(grad_op, backend, host ? chunks : chunks * n, partials, rows * n);
               if (params) for_each_index(grad_op, backend, n, ParamGradFold<T>{ppw, ppb, pdw, pdb, chunks, n}, chunks * n);
             }, x, g, w, mean, c, rstd, needs[0] ? grads[0] : empty({0}, x.device(), x.dtype()), partial_w, partial_b, dw, db);
             if (needs[1]) grads[1] = dw;
             if (needs[2]) grads[2] = db;
             return grads;
           }, [eps] { return ops::OpAttrs::of_reals({eps}); });
  return y;
}

}  // namespace kten::detail
