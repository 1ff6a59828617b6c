// LayerNorm over the last axis as one op with its gradient: row kernels (rows.hpp), bandwidth-bound.
// The forward reads each row once from memory and writes it once (its other passes read the row
// from cache) and keeps each row's mean, the correction c below and 1 / sqrt(var + eps) for the
// backward pass, which reads
// x and the gradient once more to write dx, and once more for the weight's and bias' gradients
// (sums down the rows, a second kernel).
#include "nn/kernels.hpp"

#include "autograd.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"
#include "rows.hpp"

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
    const T mean = row_sum<T>(row, n, [&](std::int64_t k) { return xr[k]; }) / count;
    const T c = row_sum<T>(row, n, [&](std::int64_t k) { return xr[k] - mean; }) / count;
    const T var = row_sum<T>(row, n, [&](std::int64_t k) {
      const T centred = (xr[k] - mean) - c;
      return centred * centred;
    }) / count;
    const T rstd = T(1) / math::sqrt(var + eps);
    row.for_each(n, [&](std::int64_t k) { yr[k] = ((xr[k] - mean) - c) * rstd * w[k] + b[k]; });
    row.once([&]() {
      row_mean[r] = mean;
      row_c[r] = c;
      row_rstd[r] = rstd;
    });
  }
};

/// \brief The forward's per-row statistics: xhat = ((x - mean) - c) * rstd.
template <class T>
struct RowStatistics {
  const T* mean;
  const T* c;
  const T* rstd;
  KOKKOS_INLINE_FUNCTION T xhat(T x, std::int64_t r) const { return ((x - mean[r]) - c[r]) * rstd[r]; }
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
    const T rstd = stats.rstd[r], count = static_cast<T>(n);
    const T mean_gw = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k] * w[k]; }) / count;
    const T mean_gw_xhat = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k] * w[k] * stats.xhat(xr[k], r); }) / count;
    row.for_each(n, [&](std::int64_t k) { dr[k] = rstd * (gr[k] * w[k] - mean_gw - stats.xhat(xr[k], r) * mean_gw_xhat); });
  }
};

/// \brief The weight's and bias' gradients, sums down the rows: dw[j] = sum_r g[r, j] xhat[r, j],
/// db[j] = sum_r g[r, j]. Each index sweeps `Width` adjacent columns down every row: on the host
/// 64 (contiguous loads that vectorise), on a GPU 1 (adjacent threads read adjacent columns).
template <class T, int Width>
struct LayerNormParamGrad {
  const T* x;
  const T* g;
  RowStatistics<T> stats;
  T* dw;  // null when not needed
  T* db;  // null when not needed
  std::int64_t rows, n;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t block) const {
    const std::int64_t j0 = block * Width, width = n - j0 < Width ? n - j0 : Width;
    T acc_w[Width], acc_b[Width];
    for (int j = 0; j < Width; ++j) acc_w[j] = acc_b[j] = T(0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n + j0;
      const T* gr = g + r * n + j0;
      for (std::int64_t j = 0; j < width; ++j) {
        acc_w[j] += gr[j] * stats.xhat(xr[j], r);
        acc_b[j] += gr[j];
      }
    }
    for (std::int64_t j = 0; j < width; ++j) {
      if (dw) dw[j0 + j] = acc_w[j];
      if (db) db[j0 + j] = acc_b[j];
    }
  }
};

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = "kten::layer_norm";
  constexpr const char* grad_op = "kten::layer_norm_grad";
  const Tensor x = x_in.detach().contiguous();  // a copy only for a strided view
  const std::int64_t n = x.shape().back(), rows = x.numel() / n;
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
           [x, w = saved(weight).contiguous(), mean, c, rstd, rows, n, grad_op](const Tensor& g_in, const Needs& needs) {
             const Tensor g = g_in.contiguous();
             Grads grads(3);
             if (needs[0]) {
               grads[0] = empty(x.shape(), x.device(), x.dtype());
               launch(grad_op, [&](const auto& backend, auto* px, auto* pg, auto* pw, auto* pmean, auto* pc, auto* prstd, auto* pdx) {
                 using T = std::remove_pointer_t<decltype(px)>;
                 for_each_row(grad_op, backend, RowLayout{rows, n, 1},
                              LayerNormGradRow<T>{px, pg, pw, {pmean, pc, prstd}, pdx, n});
               }, x, g, w, mean, c, rstd, grads[0]);
             }
             if (needs[1] || needs[2]) {
               const Tensor dw = empty({n}, x.device(), x.dtype()), db = empty({n}, x.device(), x.dtype());
               launch(grad_op, [&](const auto& backend, auto* px, auto* pg, auto* pmean, auto* pc, auto* prstd, auto* pdw, auto* pdb) {
                 using T = std::remove_pointer_t<decltype(px)>;
                 constexpr int width = std::decay_t<decltype(backend)>::is_host ? 64 : 1;
                 for_each_index(grad_op, backend, (n + width - 1) / width,
                                LayerNormParamGrad<T, width>{px, pg, {pmean, pc, prstd}, needs[1] ? pdw : nullptr,
                                                             needs[2] ? pdb : nullptr, rows, n},
                                rows * n);
               }, x, g, mean, c, rstd, dw, db);
               if (needs[1]) grads[1] = dw;
               if (needs[2]) grads[2] = db;
             }
             return grads;
           });
  return y;
}

}  // namespace kten::detail
