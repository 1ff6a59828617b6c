// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reductions over all elements, one axis or several. Whole-tensor reductions are bandwidth-bound;
// their result is written into device memory, so they return without fencing (a 0-d tensor on the
// device). NaN propagates: a sum, norm or variance over a NaN is NaN by arithmetic, and max and min
// take NaN over any number, so every device and every order of combining gives NaN (NumPy's and
// PyTorch's rule; which zero max or min returns among +0 and -0 may depend on the order).
//
// This file: sum, mean, norm, var and mean_square; max and min are in extrema.cpp, the kernels
// they share in reduce_impl.hpp.
#include "reduce_impl.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
ReducedAxes reduced_axes(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const Shape& s = x.shape();
  const int n = x.ndim(), wrap = n == 0 ? 1 : n;
  ReducedAxes r;
  r.keep = keepdim;
  r.reduced.assign(n, axes.empty());
  std::vector<int> named(wrap, -1);
  for (int axis : axes) {
    const int a = axis < 0 ? axis + wrap : axis;
    if (a < 0 || a >= wrap)
      fail<ShapeError>(op, "axis ", axis, " is out of range for a tensor of shape ", s, " (ndim ", n, ")");
    if (named[a] != -1)
      fail<ShapeError>(op, "axes ", named[a], " and ", axis, " name the same axis of shape ", s, "; name each axis once");
    named[a] = axis;
    if (n > 0) r.reduced[a] = true;
  }
  r.all = true;
  for (int d = 0; d < n; ++d) {
    r.keepdim.push_back(r.reduced[d] ? 1 : s[d]);
    if (r.reduced[d]) {
      r.len *= s[d];
    } else {
      r.kept.push_back(s[d]);
      r.all = r.all && s[d] == 1;
    }
  }
  return r;
}

KTEN_REDUCTION_KERNELS(, SumReduction)
KTEN_REDUCTION_KERNELS(, MeanReduction)
KTEN_REDUCTION_KERNELS(, NormReduction)
KTEN_REDUCTION_KERNELS(, MeanSquareReduction)
KTEN_REDUCTION_KERNELS(, SquaredDeviationReduction)

Tensor mean_square(const Tensor& x) {
  Tensor out = reduce_all<MeanSquareReduction>(x);
  if (recording(x))
    record("kten::mean_square", out, {&x}, [x = saved(x)](const Tensor& g, const Needs&) {
      return Grads{x * (g * (2.0 / static_cast<double>(x.numel())))};
    });
  return out;
}

namespace {

// The unbiased variance, two-pass for stability (the mean, then the squared deviations from it),
// and its gradient 2 (x - mean) / (n - 1); the reduced axes' mean is kept for backward.
Tensor variance(const Tensor& x, const ReducedAxes& r) {
  const Tensor m = reduce<MeanReduction>(x, r).reshape(r.keepdim);
  Tensor y = reduce<SquaredDeviationReduction>(x.detach() - m, r);
  if (recording(x))
    record(SquaredDeviationReduction::label, y, {&x}, [x = saved(x), m, r](const Tensor& g, const Needs&) {
      return Grads{(x - m) * spread(g * (2.0 / static_cast<double>(r.len - 1)), x.shape(), r)};
    });
  return y;
}

Tensor variance_over(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  constexpr const char* op = SquaredDeviationReduction::label;
  check_defined(x, op);
  return variance(x, reduced_axes(op, x, axes, keepdim));
}

}  // namespace
}  // namespace detail

KTEN_REDUCTION_FORMS(sum, detail::reduction<detail::SumReduction>)
KTEN_REDUCTION_FORMS(mean, detail::reduction<detail::MeanReduction>)
KTEN_REDUCTION_FORMS(norm, detail::reduction<detail::NormReduction>)
KTEN_REDUCTION_FORMS(var, detail::variance_over)

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

using kten::detail::fail;

// ReduceSum takes its axes as an input from opset 13, the others from opset 18 (an attribute before).
namespace {
// The product along the last axis as halves multiplied until one is left (x[:h] * x[h:2h], the odd
// last element carried): log2(n) elementwise products, so that zeros, NaN and the gradient are
// mul's (kten has no product reduction); 1 for an empty line, as ONNX's ReduceProd.
Tensor product_of_lines(Tensor x, const Shape& kept) {
  if (x.size(-1) == 0) return ones(kept, x.device(), x.dtype());
  while (x.size(-1) > 1) {
    const std::int64_t n = x.size(-1), half = n / 2;
    Tensor y = x.narrow(-1, 0, half) * x.narrow(-1, half, half);
    x = n % 2 == 0 ? y : cat({y, x.narrow(-1, n - 1, 1)}, -1);
  }
  return x.reshape(kept);
}
}  // namespace

std::vector<Tensor> onnx_reduce(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const std::string& type = c.node.op_type;
  const bool axes_input = type == "ReduceSum" || c.opset() >= 18;
  if (axes_input && c.attr("axes"))
    fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(),
                      " the axes are an input, not an attribute");
  if (!axes_input && c.has(1))
    fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(),
                      " the axes are an attribute, not an input (an input from opset 18)");
  const std::vector<std::int64_t> axes =
      axes_input ? (c.has(1) ? c.ints(1) : std::vector<std::int64_t>{}) : c.attr_ints("axes");
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  std::vector<int> normal;
  for (std::int64_t a : axes) normal.push_back(onnx_axis(c, a, x.ndim()));
  if (normal.empty())  // no axes: every axis
    for (int a = 0; a < x.ndim(); ++a) normal.push_back(a);
  std::sort(normal.begin(), normal.end());
  refuse_repeated_axes(c, normal);
  const bool keep = c.attr_int("keepdims", 1) != 0;
  const ops::OpAttrs attrs =
      ops::OpAttrs::of_ints(std::vector<std::int64_t>(normal.begin(), normal.end()), keep);
  const auto reduce_by = [&](const char* name, const Tensor& v) {
    return onnx_numeric({v}, [&](const std::vector<Tensor>& w) { return registered(name, w, attrs); });
  };
  if (type == "ReduceSum") return {reduce_by("sum_axes", x)};
  if (type == "ReduceMean") return {reduce_by("mean_axes", x)};
  if (type == "ReduceMax") return {reduce_by("max_axes", x)};
  if (type == "ReduceMin") return {reduce_by("min_axes", x)};
  if (type == "ReduceL2") return {reduce_by("norm_axes", x)};
  if (type == "ReduceL1") return {reduce_by("sum_axes", abs(x))};
  if (type == "ReduceSumSquare") return {reduce_by("sum_axes", x * x)};
  if (type == "ReduceLogSum") return {log(reduce_by("sum_axes", x))};
  // ReduceLogSumExp and ReduceProd: the reduced axes moved last and merged into one line.
  std::vector<int> order;
  Shape kept;
  for (int a = 0; a < x.ndim(); ++a)
    if (!std::binary_search(normal.begin(), normal.end(), a)) {
      order.push_back(a);
      kept.push_back(x.size(a));
    }
  order.insert(order.end(), normal.begin(), normal.end());
  std::int64_t along = 1;  // at most x's element count
  for (int a : normal) along *= x.size(a);
  Shape merged = kept;
  merged.push_back(along);
  const Tensor lines = x.permute(order).reshape(merged);
  Tensor y;
  if (type == "ReduceProd") {
    y = onnx_numeric({lines}, [&](const std::vector<Tensor>& v) { return product_of_lines(v[0], kept); });
  } else {
    if (x.numel() == 0) fail<ShapeError>("onnx", c.where(), ": a log-sum-exp over no elements");
    y = logsumexp(lines, static_cast<int>(kept.size()), false);
  }
  if (!keep) return {y};
  Shape shape = x.shape();
  for (int a : normal) shape[static_cast<std::size_t>(a)] = 1;
  return {y.reshape(shape)};
}

OnnxExport onnx_reduction_of(const char* traced, const char* type) {
  return {traced, [type](OnnxEmit& e) {
            const OnnxAttr keep = attr_i("keepdims", e.op.attrs.keepdim ? 1 : 0);
            if (e.opset >= 18) return e.node(type, {e.in[0], e.w.ints(e.op.attrs.ints)}, {keep});
            return e.node(type, {e.in[0]}, {attr_is("axes", e.op.attrs.ints), keep});
          }};
}

// The registry's rows of this family (registry.hpp): each reduction's three forms.
std::vector<OpDef> reduce_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {KTEN_REDUCTION_OPS(sum, Domain::real), KTEN_REDUCTION_OPS(mean, Domain::real),
          KTEN_REDUCTION_OPS(norm, Domain::real), KTEN_REDUCTION_OPS(var, Domain::real)};
  set_onnx(rows, "sum_axes",
           {{"ReduceSum", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10},
            {"ReduceL1", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10},
            {"ReduceSumSquare", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10},
            {"ReduceLogSum", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}},
           {{"kten::sum", [](OnnxEmit& e) {
               return e.node("ReduceSum", {e.in[0], e.w.ints(e.op.attrs.ints)},
                             {attr_i("keepdims", e.op.attrs.keepdim ? 1 : 0)});
             }}});
  set_onnx(rows, "mean_axes", {{"ReduceMean", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}},
           {onnx_reduction_of("kten::mean", "ReduceMean")});
  set_onnx(rows, "norm_axes", {{"ReduceL2", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}},
           {onnx_reduction_of("kten::norm", "ReduceL2")});
  return rows;
}

}  // namespace kten::ops
