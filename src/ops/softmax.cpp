// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// softmax, log_softmax and logsumexp along one axis, each with its gradient. Every one starts by
// subtracting the axis' max, so exp never overflows. All six are row kernels (rows.hpp):
// bandwidth-bound, one read of the input(s) from memory and one write, the row's further passes
// from cache. ONNX's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss load as log_softmax,
// gather and sums.
#include <cmath>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"
#include "rows.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
namespace {

// The axis as a one-axis reduction, its extent kept as 1 (checks x and the axis).
ReducedAxes one_axis(const char* op, const Tensor& x, int axis) {
  check_defined(x, op);
  return reduced_axes(op, x, {axis}, true);
}

/// \brief The max of a row's numbers, NaN skipped: a plain comparison vectorises where the
/// NaN-propagating max (MaxReduction) costs the row kernel more than its exponentials. NaN still
/// propagates: exp(NaN - m) makes the row's sum NaN, and so every output of the row.
struct MaxOfNumbers : MaxReduction {
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return v > acc ? v : acc; }
};

/// \brief The max of a row's numbers xr[k * s], k in [0, n) (MaxOfNumbers): where softmax and
/// logsumexp start.
template <class T, class Row>
KOKKOS_INLINE_FUNCTION T row_max(const Row& row, std::int64_t n, const T* xr, std::int64_t s) {
  return row.template fold<MaxOfNumbers, T>(n, [&](std::int64_t k) { return xr[k * s]; });
}

/// \brief softmax (Log false) or log_softmax (Log true) of a row: its max m, the sum s of
/// exp(x - m), then y = exp(x - m) / s, or (x - m) - log(s) (not x - logsumexp: x - m is exact near
/// the max, where m + log(s) would round to m's precision). softmax writes the exponentials while
/// summing them and divides them in place: a team's threads walk a row's elements in the same
/// order in every loop, so each divides what it wrote. Unit: the rows are contiguous (stride 1 known
/// at compile time, so the host's loops load vectors rather than gather).
template <class T, bool Log, bool Unit>
struct SoftmaxRow {
  const T* x;
  T* y;
  RowLayout layout;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const T* xr = x + layout.start(r);
    T* yr = y + layout.start(r);
    const std::int64_t n = layout.len, s = Unit ? 1 : layout.inner;
    const T m = row_max(row, n, xr, s);
    if constexpr (Log) {
      const T log_sum = math::log(row_sum<T>(row, n, [&](std::int64_t k) { return exp_approx(xr[k * s] - m); }));
      row.for_each(n, [&](std::int64_t k) { yr[k * s] = (xr[k * s] - m) - log_sum; });
    } else {
      const T sum = row_sum<T>(row, n, [&](std::int64_t k) {
        const T e = exp_approx(xr[k * s] - m);
        yr[k * s] = e;
        return e;
      });
      const T scale = T(1) / sum;  // a multiply per element, not a division
      row.for_each(n, [&](std::int64_t k) { yr[k * s] = yr[k * s] * scale; });
    }
  }
};

/// \brief The gradient of softmax, y * (g - sum(g * y)), or of log_softmax, g - exp(y) * sum(g),
/// along a row (Unit as for SoftmaxRow).
template <class T, bool Log, bool Unit>
struct SoftmaxGradRow {
  const T* y;
  const T* g;
  T* dx;
  RowLayout layout;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const std::int64_t start = layout.start(r), n = layout.len, s = Unit ? 1 : layout.inner;
    const T* yr = y + start;
    const T* gr = g + start;
    T* dr = dx + start;
    if constexpr (Log) {
      const T sum = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k * s]; });
      row.for_each(n, [&](std::int64_t k) { dr[k * s] = gr[k * s] - exp_approx(yr[k * s]) * sum; });
    } else {
      const T dot = row_sum<T>(row, n, [&](std::int64_t k) { return gr[k * s] * yr[k * s]; });
      row.for_each(n, [&](std::int64_t k) { dr[k * s] = yr[k * s] * (gr[k * s] - dot); });
    }
  }
};

/// \brief logsumexp of a row: log(s) + m, s the sum of exp(x - m), m the row's max, or 0 when
/// that max is infinite (as PyTorch), so that a row of -inf gives log(0) + 0 = -inf and one holding
/// +inf gives +inf, not inf - inf; an empty row gives -inf. NaN propagates through the sum. (Unit as
/// for SoftmaxRow.)
template <class T, bool Unit>
struct LogSumExpRow {
  const T* x;
  T* y;
  RowLayout layout;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const T* xr = x + layout.start(r);
    const std::int64_t n = layout.len, s = Unit ? 1 : layout.inner;
    const T max = row_max(row, n, xr, s);
    const T m = max == static_cast<T>(INFINITY) || max == static_cast<T>(-INFINITY) ? T(0) : max;
    const T sum = row_sum<T>(row, n, [&](std::int64_t k) { return exp_approx(xr[k * s] - m); });
    row.once([&]() { y[r] = math::log(sum) + m; });
  }
};

/// \brief The gradient of logsumexp y along a row: g * exp(x - y), g and y one number per row.
template <class T, bool Unit>
struct LogSumExpGradRow {
  const T* x;
  const T* y;
  const T* g;
  T* dx;
  RowLayout layout;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const std::int64_t start = layout.start(r), n = layout.len, s = Unit ? 1 : layout.inner;
    const T yr = y[r], gr = g[r];
    row.for_each(n, [&](std::int64_t k) { dx[start + k * s] = gr * exp_approx(x[start + k * s] - yr); });
  }
};

/// \brief softmax's (Log false) or log_softmax's (Log true) row kernels.
template <bool Log>
struct SoftmaxRows {
  template <class T, bool Unit> using Forward = SoftmaxRow<T, Log, Unit>;
  template <class T, bool Unit> using Backward = SoftmaxGradRow<T, Log, Unit>;
};

/// \brief for_each_row of Kernel<T, Unit>{pointers..., layout}, Unit when the rows are contiguous
/// on the host (where it lets the loops vectorise; a GPU gains nothing from it, so its kernels are
/// compiled once).
template <template <class, bool> class Kernel, class Backend, class T, class... Pointers>
void for_each_row_of(const char* label, const Backend& backend, const RowLayout& layout, T* first, Pointers... rest) {
  if constexpr (Backend::is_host) {
    if (layout.inner == 1) return for_each_row(label, backend, layout, Kernel<T, true>{first, rest..., layout});
  }
  for_each_row(label, backend, layout, Kernel<T, false>{first, rest..., layout});
}

// softmax or log_softmax along `axis`, with its gradient.
template <bool Log>
Tensor softmax_along(const char* op, const char* grad_op, const Tensor& x_in, int axis) {
  one_axis(op, x_in, axis);
  const Tensor x = x_in.detach().contiguous();  // a copy only for a strided view
  const RowLayout layout = row_layout(x.shape(), axis);
  Tensor y = empty(x.shape(), x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* px, auto* py) {
    for_each_row_of<SoftmaxRows<Log>::template Forward>(op, backend, layout, px, py);
  }, x, y);
  if (recording(x_in))
    record(op, y, {&x_in}, [y = saved(y), layout, grad_op](const Tensor& g_in, const Needs&) {
      const Tensor g = g_in.contiguous();
      Tensor dx = empty(g.shape(), g.device(), g.dtype());
      launch(grad_op, [&](const auto& backend, auto* py, auto* pg, auto* pdx) {
        for_each_row_of<SoftmaxRows<Log>::template Backward>(grad_op, backend, layout, py, pg, pdx);
      }, y, g, dx);
      return Grads{dx};
    }, [axis] { return ops::OpAttrs::of_ints({axis}); });
  return y;
}

}  // namespace
}  // namespace detail

using namespace detail;

Tensor softmax(const Tensor& x, int axis) { return softmax_along<false>("kten::softmax", "kten::softmax_grad", x, axis); }

Tensor log_softmax(const Tensor& x, int axis) {
  return softmax_along<true>("kten::log_softmax", "kten::log_softmax_grad", x, axis);
}

Tensor logsumexp(const Tensor& x_in, int axis, bool keepdim) {
  constexpr const char* op = "kten::logsumexp";
  constexpr const char* grad_op = "kten::logsumexp_grad";
  const ReducedAxes r = one_axis(op, x_in, axis);
  const Tensor x = x_in.detach().contiguous();  // a copy only for a strided view
  const RowLayout layout = row_layout(x.shape(), axis);
  Tensor y = empty(r.keepdim, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* px, auto* py) {
    for_each_row_of<LogSumExpRow>(op, backend, layout, px, py);
  }, x, y);
  Tensor out = keepdim ? y : y.reshape(r.kept);
  if (recording(x_in))
    record(op, out, {&x_in}, [x = saved(x), y = saved(y), layout, keepdim_shape = r.keepdim, grad_op](const Tensor& g_in, const Needs&) {
      const Tensor g = g_in.reshape(keepdim_shape).contiguous();
      Tensor dx = empty(x.shape(), x.device(), x.dtype());
      launch(grad_op, [&](const auto& backend, auto* px, auto* py, auto* pg, auto* pdx) {
        for_each_row_of<LogSumExpGradRow>(grad_op, backend, layout, px, py, pg, pdx);
      }, x, y, g, dx);
      return Grads{dx};
    });
  return out;
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> softmax_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const auto axis = ops::OpAttrs::of_ints({onnx_axis(c, c.attr_int("axis", -1), x.ndim())});
  return {registered(c.node.op_type == "Softmax" ? "softmax" : "log_softmax", {x}, axis)};
}

// The training losses ONNX writes over log-probabilities (N, C) or (N, C, d1, ...), as
// differentiable ops: loss[n, d...] = -logp[n, target[n, d...], d...] * weight[target[n, d...]],
// 0 where the target is ignore_index; reduced by "none", "sum" or "mean" (the sum over the
// weights of the targets not ignored, as PyTorch's nll_loss).
void check_loss(const OnnxNode& n) {
  const std::string reduction = node_text(n, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    onnx_invalid(n, "reduction '" + reduction + "' (none, sum, mean)");
}

Tensor nll_loss(const OnnxCall& c, const Tensor& logp, const Tensor& target, const Tensor& weight) {
  if (logp.ndim() < 2 || target.dtype() != int64 || target.ndim() != logp.ndim() - 1)
    fail<ShapeError>("onnx", c.where(), ": the input must be (N, C, ...) and the target int64 (N, ...), not ", logp.shape(),
                     " (", logp.dtype(), ") and ", target.shape(), " (", target.dtype(), ")");
  const std::int64_t classes = logp.size(1);
  if (weight.defined() && (weight.ndim() != 1 || weight.size(0) != classes || weight.dtype() != logp.dtype()))
    fail<ShapeError>("onnx", c.where(), ": the weight must be ", classes, " values of the input's dtype, not ", weight.shape(),
                     " (", weight.dtype(), ")");
  Tensor index = target, kept, w;
  if (const OnnxAttribute* ignore = c.attr("ignore_index")) {
    kept = ne(target, static_cast<double>(ignore->i));
    index = where(kept, target, 0.0);  // an ignored target reads class 0, weighted 0
  }
  if (weight.defined()) w = index_select(weight, 0, index.reshape({index.numel()})).reshape(target.shape());
  if (kept.defined()) w = w.defined() ? where(kept, w, 0.0) : kept.astype(logp.dtype());
  const Tensor picked = registered("gather", {logp, index.unsqueeze(1)}, OpAttrs::of_ints({1})).squeeze(1);
  const Tensor loss = w.defined() ? -(picked * w) : -picked;
  const std::string reduction = c.attr_text("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  return w.defined() ? sum(loss) / sum(w) : mean(loss);
}

std::vector<Tensor> nll_loss_op(OnnxCall& c) { return {nll_loss(c, c.at(0), c.at(1), c.has(2) ? c.at(2) : Tensor())}; }

// SoftmaxCrossEntropyLoss: the loss of log_softmax(scores) over the classes (axis 1), and the
// log-probabilities as its optional second output.
std::vector<Tensor> softmax_cross_entropy_op(OnnxCall& c) {
  const Tensor& scores = c.at(0);
  if (scores.ndim() < 2) fail<ShapeError>("onnx", c.where(), ": the scores must be (N, C, ...), not ", scores.shape());
  const Tensor logp = registered("log_softmax", {scores}, OpAttrs::of_ints({1}));
  return {nll_loss(c, logp, c.at(1), c.has(2) ? c.at(2) : Tensor()), logp};
}

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> softmax_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"softmax", "softmax(Tensor,int)", 1, {Domain::real}, DTypes::floating, true, [](X x, A a) { return softmax(x[0], axis_of(a)); }},
      {"log_softmax", "log_softmax(Tensor,int)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return log_softmax(x[0], axis_of(a)); }},
      {"logsumexp", "logsumexp(Tensor,int,bool)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return logsumexp(x[0], axis_of(a), a.keepdim); }},
  };
  set_onnx(rows, "softmax",
           {{"Softmax", 13, kOnnxLastOpset, 1, 1, 1, true, softmax_op, nullptr, 0}},
           {{"kten::softmax",
             [](OnnxEmit& e) { return e.node("Softmax", {e.in[0]}, {attr_i("axis", e.i(0))}); }}});
  set_onnx(rows, "log_softmax",
           {{"LogSoftmax", 13, kOnnxLastOpset, 1, 1, 1, true, softmax_op, nullptr, 0},
            {"NegativeLogLikelihoodLoss", 13, kOnnxLastOpset, 2, 3, 1, true, nll_loss_op, check_loss, 0},
            {"SoftmaxCrossEntropyLoss", 13, kOnnxLastOpset, 2, 3, 2, true, softmax_cross_entropy_op, check_loss, 0}},
           {{"kten::log_softmax",
             [](OnnxEmit& e) { return e.node("LogSoftmax", {e.in[0]}, {attr_i("axis", e.i(0))}); }}});
  set_onnx(rows, "logsumexp",
           {{"ReduceLogSumExp", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}});
  return rows;
}

}  // namespace kten::ops
