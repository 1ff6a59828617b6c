// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The ONNX operator table: each operator kten imports, the opsets it supports, and how it maps
// onto kten's ops. Wherever a registered op fits (src/ops/registry.hpp), the row calls it through
// the registry; ONNX's own attribute conventions (Gemm's transposes, Slice's clamping, Reshape's
// 0 and -1, Unsqueeze's output-rank axes) are resolved here. Integer arithmetic (shape
// computations) goes through float64, exact below 2^53, since kten's arithmetic is floating.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>

#include <kten/ops.hpp>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"
#include "core/storage.hpp"
#include "graph.hpp"
#include "ops/linalg.hpp"
#include "ops/registry.hpp"
#include "nn/functional.hpp"

namespace kten::onnx::detail {

using kten::detail::fail;

// --- Call's helpers ----------------------------------------------------------------------------

int Call::opset() const { return node.opset; }

std::string Call::where() const { return "node '" + node.name + "' (" + node.op_type + ")"; }

const Tensor& Call::at(std::size_t i) const {
  if (!has(i)) fail<FormatError>("onnx", where(), ": input ", i, " is required but absent");
  return in[i];
}

// Values known on the host are read there without waiting for any device; a device value (data-
// dependent shapes, which PyTorch's exporter rarely writes) is read back, a counted synchronisation.
std::vector<std::int64_t> Call::ints(std::size_t i) const {
  const Tensor& t = i < host.size() && host[i].defined() ? host[i] : at(i);
  if (is_floating(t.dtype())) fail<FormatError>("onnx", where(), ": input ", i, " must hold integers, not ", t.dtype());
  if (!t.device().is_cpu()) return t.astype(int64).to_vector<std::int64_t>();
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  kten::detail::read_cpu_values(t.astype(int64), v.data(), int64, v.size());
  return v;
}

double Call::real(std::size_t i) const {
  const Tensor& t = i < host.size() && host[i].defined() ? host[i] : at(i);
  if (t.numel() != 1) fail<ShapeError>("onnx", where(), ": input ", i, " must hold one value, not ", t.shape());
  if (!t.device().is_cpu()) return t.item<double>();
  double v = 0;
  kten::detail::read_cpu_values(t.astype(float64), &v, float64, 1);
  return v;
}

const Attribute* Call::attr(const std::string& name) const {
  const auto it = node.attributes.find(name);
  return it == node.attributes.end() ? nullptr : &it->second;
}

namespace {
const Attribute* of_kind(const Call& c, const std::string& name, Attribute::Kind kind, const char* what) {
  const Attribute* a = c.attr(name);
  if (a && a->kind != kind) fail<FormatError>("onnx", c.where(), ": attribute '", name, "' must be ", what);
  return a;
}
}  // namespace

std::int64_t Call::attr_int(const std::string& name, std::int64_t fallback) const {
  const Attribute* a = of_kind(*this, name, Attribute::integer, "an integer");
  return a ? a->i : fallback;
}

double Call::attr_real(const std::string& name, double fallback) const {
  const Attribute* a = of_kind(*this, name, Attribute::real, "a float");
  return a ? a->f : fallback;
}

std::vector<std::int64_t> Call::attr_ints(const std::string& name, std::vector<std::int64_t> fallback) const {
  const Attribute* a = of_kind(*this, name, Attribute::integers, "a list of integers");
  return a ? a->ints : fallback;
}

namespace {

using Outs = std::vector<Tensor>;

// An axis of a rank-`rank` tensor, negative counting from the end; ShapeError outside.
int axis_in(const Call& c, std::int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) fail<ShapeError>("onnx", c.where(), ": axis ", axis, " is outside a rank-", rank, " tensor");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// A registered op by name, called with `inputs` and `attrs`; found in a table built once (find_op
// searches the registry, a cost a batch-1 forward pass would see at every node).
Tensor op(std::string_view name, const std::vector<Tensor>& inputs, const ops::OpAttrs& attrs = {}) {
  static const std::unordered_map<std::string_view, const ops::OpDef*> by_name = [] {
    std::unordered_map<std::string_view, const ops::OpDef*> table;
    for (const ops::OpDef& def : ops::registry()) table.emplace(def.name, &def);
    return table;
  }();
  const auto it = by_name.find(name);
  return (it == by_name.end() ? ops::find_op(name) : *it->second).forward(inputs, attrs);
}

// Runs `f` in float64 when the inputs are int64 (ONNX's integer arithmetic on shapes), converting
// the result back (float -> int64 truncates toward zero, as ONNX's integer Div).
template <class F>
Tensor numeric(const std::vector<Tensor>& inputs, F f) {
  if (inputs[0].dtype() != int64) return f(inputs);
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.astype(float64));
  return f(wide).astype(int64);
}

// --- elementwise ---

template <const char* Name>
Outs unary(Call& c) {
  return {numeric({c.at(0)}, [](const std::vector<Tensor>& x) { return op(Name, x); })};
}

template <const char* Name>
Outs binary(Call& c) {
  return {numeric({c.at(0), c.at(1)}, [](const std::vector<Tensor>& x) { return op(Name, x); })};
}

constexpr char k_exp[] = "exp", k_log[] = "log", k_sqrt[] = "sqrt", k_abs[] = "abs", k_neg[] = "neg",
               k_relu[] = "relu", k_sigmoid[] = "sigmoid", k_tanh[] = "tanh", k_erf[] = "erf", k_sin[] = "sin",
               k_cos[] = "cos", k_add[] = "add", k_sub[] = "sub", k_mul[] = "mul", k_div[] = "div";

Outs softplus_op(Call& c) {
  // PyTorch's softplus (beta 1, threshold 20): ONNX's log(1 + e^x) to within e^-20 relative.
  return {op("softplus", {c.at(0)}, ops::OpAttrs::of_reals({1.0, 20.0}))};
}

Outs leaky_relu(Call& c) {
  const Tensor& x = c.at(0);
  const double alpha = c.attr_real("alpha", 0.01);
  return {where(gt(x, 0.0), x, x * alpha)};  // the gradient at 0 is alpha, as PyTorch's
}

Outs pow_op(Call& c) {
  // A constant one-value exponent (x ** 2 in PyTorch) is the scalar power: PyTorch's values for a
  // negative base and its gradient.
  if (c.host.size() > 1 && c.host[1].defined() && c.host[1].numel() == 1)
    return {op("pow_scalar", {c.at(0)}, ops::OpAttrs::of_reals({c.real(1)}))};
  return {op("pow", {c.at(0), c.at(1).astype(c.at(0).dtype())})};
}

Outs softmax_op(Call& c) {
  const Tensor& x = c.at(0);
  const auto axis = ops::OpAttrs::of_ints({axis_in(c, c.attr_int("axis", -1), x.ndim())});
  return {op(c.node.op_type == "Softmax" ? "softmax" : "log_softmax", {x}, axis)};
}

// --- linear algebra ---

Outs gemm(Call& c) {
  const Tensor& a = c.at(0);
  const Tensor& b = c.at(1);
  if (a.ndim() != 2 || b.ndim() != 2) fail<ShapeError>("onnx", c.where(), ": A and B must be 2-D, not ", a.shape(), " and ", b.shape());
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_real("alpha", 1.0), beta = c.attr_real("beta", 1.0);
  const std::int64_t n = tb ? b.size(0) : b.size(1);
  // PyTorch's Linear: x W^T + b in one GEMM with the bias in its epilogue, as nn::Linear runs.
  if (!ta && tb && alpha == 1 && beta == 1 && (!c.has(2) || (c.in[2].ndim() == 1 && c.in[2].size(0) == n)) &&
      a.size(1) == b.size(1) && is_floating(a.dtype()) && a.dtype() == b.dtype() &&
      a.device() == b.device() && (!c.has(2) || (c.in[2].dtype() == a.dtype() && c.in[2].device() == a.device())))
    return {kten::detail::linear(a, b, c.has(2) ? &c.in[2] : nullptr)};
  Tensor y = op("matmul", {ta ? a.transpose() : a, tb ? b.transpose() : b});
  if (alpha != 1) y = y * alpha;
  if (c.has(2)) y = y + (beta != 1 ? c.in[2] * beta : c.in[2]);
  return {y};
}

Outs matmul_op(Call& c) { return {op("matmul", {c.at(0), c.at(1)})}; }

Outs layer_normalization(Call& c) {
  const Tensor& x = c.at(0);
  const int axis = axis_in(c, c.attr_int("axis", -1), x.ndim());
  const double eps = c.attr_real("epsilon", 1e-5);
  // kten's layer_norm normalises the last axis: the normalised axes become one.
  Shape outer(x.shape().begin(), x.shape().begin() + axis);
  const std::int64_t features = kten::detail::checked_numel(Shape(x.shape().begin() + axis, x.shape().end()), "onnx");
  if (c.at(1).numel() != features)
    fail<ShapeError>("onnx", c.where(), ": Scale has shape ", c.at(1).shape(), " for normalised extents of ", features, " elements");
  outer.push_back(features);
  const Tensor weight = c.at(1).reshape({features});
  const Tensor bias = c.has(2) ? c.in[2].reshape({features}) : zeros({features}, x.device(), x.dtype());
  if (!is_floating(x.dtype()) || weight.dtype() != x.dtype() || bias.dtype() != x.dtype())
    fail<DTypeError>("onnx", c.where(), ": X, Scale and B must share one float dtype, not ", x.dtype(), ", ",
                     weight.dtype(), " and ", bias.dtype());
  if (bias.numel() != features || weight.device() != x.device() || bias.device() != x.device())
    fail<ShapeError>("onnx", c.where(), ": B has shape ", bias.shape(), " for ", features, " normalised elements (or another device)");
  const Tensor flat = x.reshape(outer);
  const Tensor y = kten::detail::layer_norm(flat, weight, bias, eps).reshape(x.shape());
  if (c.node.outputs.size() < 2) return {y};
  // Mean and InvStdDev (training graphs read them): X's shape with the normalised axes of extent 1.
  Shape stats(x.shape().begin(), x.shape().begin() + axis);
  stats.resize(static_cast<std::size_t>(x.ndim()), 1);
  const int last = static_cast<int>(outer.size()) - 1;
  const Tensor mu = mean(flat, {last}, true);
  const Tensor centred = flat - mu;
  const Tensor inv_std = 1.0 / sqrt(mean(centred * centred, {last}, true) + eps);
  return {y, mu.reshape(stats), inv_std.reshape(stats)};
}


// --- reductions ---

// ONNX: an axis named twice (-1 and rank - 1 included) is an error, never one axis squeezed twice.
void refuse_repeated_axes(const Call& c, const std::vector<int>& sorted) {
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) fail<ShapeError>("onnx", c.where(), ": axis ", *twice, " is named more than once");
}

// ReduceSum takes its axes as an input from opset 13, the others from opset 18 (an attribute before).
Outs reduce(Call& c) {
  const Tensor& x = c.at(0);
  const std::string& type = c.node.op_type;
  const bool axes_input = type == "ReduceSum" || c.opset() >= 18;
  if (axes_input && c.attr("axes"))
    fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(), " the axes are an input, not an attribute");
  if (!axes_input && c.has(1))
    fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(), " the axes are an attribute, not an input (an input from opset 18)");
  const std::vector<std::int64_t> axes = axes_input ? (c.has(1) ? c.ints(1) : std::vector<std::int64_t>{}) : c.attr_ints("axes");
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  std::vector<int> normal;
  for (std::int64_t a : axes) normal.push_back(axis_in(c, a, x.ndim()));
  if (normal.empty())  // no axes: every axis
    for (int a = 0; a < x.ndim(); ++a) normal.push_back(a);
  std::sort(normal.begin(), normal.end());
  refuse_repeated_axes(c, normal);
  const bool keep = c.attr_int("keepdims", 1) != 0;
  const ops::OpAttrs attrs = ops::OpAttrs::of_ints(std::vector<std::int64_t>(normal.begin(), normal.end()), keep);
  const auto registered = [&](const char* name, const Tensor& v) {
    return numeric({v}, [&](const std::vector<Tensor>& w) { return op(name, w, attrs); });
  };
  if (type == "ReduceSum") return {registered("sum_axes", x)};
  if (type == "ReduceMean") return {registered("mean_axes", x)};
  if (type == "ReduceMax") return {registered("max_axes", x)};
  if (type == "ReduceMin") return {registered("min_axes", x)};
  if (type == "ReduceL2") return {registered("norm_axes", x)};
  if (type == "ReduceL1") return {registered("sum_axes", abs(x))};
  if (type == "ReduceSumSquare") return {registered("sum_axes", x * x)};
  if (type == "ReduceLogSum") return {log(registered("sum_axes", x))};
  // ReduceLogSumExp: the reduced axes moved last and merged into one, for kten's one-axis logsumexp.
  std::vector<int> order;
  Shape kept;
  for (int a = 0; a < x.ndim(); ++a)
    if (!std::binary_search(normal.begin(), normal.end(), a)) {
      order.push_back(a);
      kept.push_back(x.size(a));
    }
  order.insert(order.end(), normal.begin(), normal.end());
  Shape merged = kept;
  merged.push_back(-1);
  if (x.numel() == 0) fail<ShapeError>("onnx", c.where(), ": a log-sum-exp over no elements");
  Tensor y = logsumexp(x.permute(order).reshape(merged), static_cast<int>(kept.size()), false);
  if (!keep) return {y};
  Shape shape = x.shape();
  for (int a : normal) shape[static_cast<std::size_t>(a)] = 1;
  return {y.reshape(shape)};
}

// --- shapes and views ---

Outs concat(Call& c) {
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < c.in.size(); ++i) parts.push_back(c.at(i));
  return {op("cat", parts, ops::OpAttrs::of_ints({axis_in(c, c.attr_int("axis", 0), parts[0].ndim())}))};
}

Outs split(Call& c) {
  const Tensor& x = c.at(0);
  const int axis = axis_in(c, c.attr_int("axis", 0), x.ndim());
  const std::size_t n = c.node.outputs.size();
  std::vector<std::int64_t> sizes = c.has(1) ? c.ints(1) : c.attr_ints("split");
  if (const Attribute* parts = c.attr("num_outputs")) {  // opset 18: chunks of ceil(extent / n), the last smaller
    if (c.opset() < 18) fail<FormatError>("onnx", c.where(), ": num_outputs is an attribute from opset 18, not ", c.opset());
    if (c.has(1)) fail<FormatError>("onnx", c.where(), ": both split and num_outputs are given");
    if (parts->kind != Attribute::integer || parts->i != static_cast<std::int64_t>(n))
      fail<FormatError>("onnx", c.where(), ": num_outputs must be the node's ", n, " outputs");
    const std::int64_t chunk = (x.size(axis) + parts->i - 1) / parts->i;
    for (std::int64_t left = x.size(axis); left > 0; left -= chunk) sizes.push_back(std::min(chunk, left));
    if (sizes.size() != n)
      fail<ShapeError>("onnx", c.where(), ": extent ", x.size(axis), " does not split into ", n, " chunks of ", chunk);
  }
  if (sizes.empty()) {
    if (x.size(axis) % static_cast<std::int64_t>(n) != 0)
      fail<ShapeError>("onnx", c.where(), ": extent ", x.size(axis), " does not split into ", n, " equal parts");
    sizes.assign(n, x.size(axis) / static_cast<std::int64_t>(n));
  }
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 0 || s > x.size(axis)) fail<ShapeError>("onnx", c.where(), ": split size ", s, " is outside extent ", x.size(axis));
    const auto sum = kten::detail::checked_add(total, s);
    if (!sum || *sum > x.size(axis))
      fail<ShapeError>("onnx", c.where(), ": split sizes add up past extent ", x.size(axis), " of axis ", axis);
    total = *sum;
  }
  if (sizes.size() != n || total != x.size(axis))
    fail<ShapeError>("onnx", c.where(), ": split sizes do not tile extent ", x.size(axis), " into ", n, " outputs");
  Outs out;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    out.push_back(x.narrow(axis, start, s));
    start += s;
  }
  return out;
}

Outs slice(Call& c) {
  Tensor x = c.at(0);
  const auto starts = c.ints(1), ends = c.ints(2);
  std::vector<std::int64_t> axes = c.has(3) ? c.ints(3) : std::vector<std::int64_t>{};
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  const std::vector<std::int64_t> steps = c.has(4) ? c.ints(4) : std::vector<std::int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail<ShapeError>("onnx", c.where(), ": starts, ends, axes and steps differ in length");
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] == 0) fail<FormatError>("onnx", c.where(), ": a step of 0");
    const int axis = axis_in(c, axes[i], x.ndim());
    const std::int64_t extent = x.size(axis);
    if (steps[i] == 1) {
      const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + extent : v, std::int64_t{0}, extent); };
      const std::int64_t b = clampi(starts[i]), e = clampi(ends[i]);
      x = x.narrow(axis, b, std::max<std::int64_t>(e - b, 0));
      continue;
    }
    // Other steps (PyTorch's exporter flips its pads with step -1) pick their positions, clamped as
    // ONNX says: to [0, extent] going forward, to [-1, extent - 1] going backward.
    const std::int64_t low = steps[i] > 0 ? 0 : -1, high = steps[i] > 0 ? extent : extent - 1;
    const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + extent : v, low, high); };
    // The count first, so that a step near 2^63 never overflows a position.
    const std::int64_t first = clampi(starts[i]), last = clampi(ends[i]), step = steps[i];
    const std::int64_t stride = step > 0 ? step : step == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max() : -step;
    const std::int64_t span = step > 0 ? last - first : first - last;
    std::vector<std::int64_t> picked;
    for (std::int64_t k = 0, count = span > 0 ? 1 + (span - 1) / stride : 0; k < count; ++k) picked.push_back(first + k * step);
    x = picked.empty() ? x.narrow(axis, 0, 0) : index_select(x, axis, tensor(picked, x.device()));
  }
  return {x};
}

Outs reshape(Call& c) {
  const Tensor& x = c.at(0);
  Shape shape = c.ints(1);
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.ndim()) fail<ShapeError>("onnx", c.where(), ": a 0 at axis ", i, " of the shape copies no axis of ", x.shape());
      shape[i] = x.size(static_cast<int>(i));
    }
  return {x.reshape(shape)};
}

Outs flatten(Call& c) {
  const Tensor& x = c.at(0);
  const int rank = x.ndim();
  std::int64_t axis = c.attr_int("axis", 1);
  if (axis < -rank || axis > rank) fail<ShapeError>("onnx", c.where(), ": axis ", axis, " is outside a rank-", rank, " tensor");
  if (axis < 0) axis += rank;
  const std::int64_t outer = kten::detail::checked_numel(Shape(x.shape().begin(), x.shape().begin() + axis), "onnx");
  return {x.reshape({outer, outer == 0 ? 0 : x.numel() / outer})};
}

Outs transpose_op(Call& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int i = x.ndim() - 1; i >= 0; --i) perm.push_back(i);
  return {op("Tensor::permute", {x}, ops::OpAttrs::of_ints(perm))};
}

Outs squeeze(Call& c) {
  Tensor x = c.at(0);
  if (!c.has(1)) return {x.squeeze()};
  std::vector<int> axes;
  for (std::int64_t a : c.ints(1)) axes.push_back(axis_in(c, a, x.ndim()));
  std::sort(axes.rbegin(), axes.rend());
  refuse_repeated_axes(c, axes);
  for (int a : axes) {
    if (x.size(a) != 1) fail<ShapeError>("onnx", c.where(), ": axis ", a, " of ", x.shape(), " is not of extent 1");
    x = x.squeeze(a);
  }
  return {x};
}

Outs unsqueeze(Call& c) {
  Tensor x = c.at(0);
  const std::vector<std::int64_t> given = c.ints(1);
  const int rank = x.ndim() + static_cast<int>(given.size());
  std::vector<int> axes;
  for (std::int64_t a : given) axes.push_back(axis_in(c, a, rank));
  std::sort(axes.begin(), axes.end());
  refuse_repeated_axes(c, axes);
  for (int a : axes) x = x.unsqueeze(a);
  return {x};
}

Outs gather_op(Call& c) {
  const Tensor& x = c.at(0);
  const int axis = axis_in(c, c.attr_int("axis", 0), x.ndim());
  Tensor index = c.at(1);
  // Indices known on the host (a dimension of a Shape, a constant) are checked and wrapped there
  // (negative ones count from the end) and picked as views: no device synchronisation, unlike
  // index_select's check of device indices.
  if (c.host.size() > 1 && c.host[1].defined()) {
    std::vector<std::int64_t> v = c.ints(1);
    for (std::int64_t& i : v) {
      if (i < -x.size(axis) || i >= x.size(axis))
        fail<IndexError>("onnx", c.where(), ": index ", i, " is outside extent ", x.size(axis), " of axis ", axis);
      if (i < 0) i += x.size(axis);
    }
    if (c.host[1].ndim() == 0) return {x.select(axis, v[0])};
    if (v.size() <= 64) {
      std::vector<Tensor> picked;
      for (std::int64_t i : v) picked.push_back(x.narrow(axis, i, 1));
      Shape shape(x.shape().begin(), x.shape().begin() + axis);
      shape.insert(shape.end(), c.host[1].shape().begin(), c.host[1].shape().end());
      shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
      return {(v.empty() ? x.narrow(axis, 0, 0) : op("cat", picked, ops::OpAttrs::of_ints({axis}))).reshape(shape)};
    }
    index = tensor(v, c.host[1].shape(), x.device());
  }
  Shape shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), index.shape().begin(), index.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  const Tensor picked = op("index_select", {x, index.reshape({index.numel()})}, ops::OpAttrs::of_ints({axis}));
  return {picked.reshape(shape)};
}

// ONNX's bidirectional broadcast of two shapes.
Shape broadcast(const Call& c, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) fail<ShapeError>("onnx", c.where(), ": shapes ", a, " and ", b, " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Outs expand(Call& c) {
  const Tensor& x = c.at(0);
  return {x.expand(broadcast(c, x.shape(), c.ints(1)))};
}

Outs where_op(Call& c) { return {op("where", {c.at(0), c.at(1), c.at(2)})}; }

Outs equal(Call& c) { return {op("eq", {c.at(0), c.at(1)})}; }

Outs shape_op(Call& c) {
  const Shape& s = c.at(0).shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t b = clampi(c.attr_int("start", 0)), e = clampi(c.attr_int("end", rank));
  const std::vector<std::int64_t> dims(s.begin() + b, s.begin() + std::max(b, e));
  return {tensor(dims, {static_cast<std::int64_t>(dims.size())}, cpu())};  // on the host: no device access
}

Outs constant(Call& c) {
  if (const Attribute* a = c.attr("value")) return {a->t};
  if (const Attribute* a = c.attr("value_float")) return {full({}, a->f, cpu(), float32)};
  if (const Attribute* a = c.attr("value_int")) return {full({}, static_cast<double>(a->i), cpu(), int64)};
  if (const Attribute* a = c.attr("value_floats"))
    return {tensor(std::vector<float>(a->floats.begin(), a->floats.end()), cpu())};
  if (const Attribute* a = c.attr("value_ints")) return {tensor(a->ints, cpu())};
  fail<FormatError>("onnx", c.where(), ": no value, value_float(s) or value_int(s) attribute");
}

// ONNX's value is a one-element tensor (float 0 when absent); checked at load.
void check_constant_of_shape(const Node& n) {
  const auto it = n.attributes.find("value");
  if (it == n.attributes.end()) return;
  if (it->second.kind != Attribute::tensor || it->second.t.numel() != 1)
    fail<FormatError>("onnx", "node '", n.name, "' (ConstantOfShape): attribute 'value' must be a tensor of one element",
                      it->second.kind == Attribute::tensor ? ", not of shape " : "", it->second.kind == Attribute::tensor ? it->second.t.shape() : Shape{});
}

Outs constant_of_shape(Call& c) {
  const Shape shape = c.ints(0);
  const Attribute* a = c.attr("value");
  const Tensor value = a ? a->t : zeros({1});
  double fill = 0;
  kten::detail::read_cpu_values(value.astype(float64), &fill, float64, 1);  // an attribute: on the host
  return {full(shape, fill, c.device, value.dtype())};
}

Outs range(Call& c) {
  const DType dtype = c.at(0).dtype();
  return {arange(c.real(0), c.real(1), c.real(2), c.device, dtype)};
}

Outs cast(Call& c) {
  DType dtype;
  kten_dtype(static_cast<int>(c.attr_int("to", 1)), dtype);  // checked at load
  return {op("Tensor::astype", {c.at(0)}, [&] { ops::OpAttrs a; a.dtype = dtype; return a; }())};
}

Outs dropout_op(Call& c) {
  const Tensor& x = c.at(0);
  // The ratio: an input from opset 12, an attribute before (Dropout-10).
  if (c.opset() >= 12 && c.attr("ratio")) fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(), " the ratio is an input, not an attribute");
  if (c.opset() < 12 && c.in.size() > 1) fail<FormatError>("onnx", c.where(), ": at opset ", c.opset(), " Dropout takes one input (ratio and training_mode are inputs from opset 12)");
  const double ratio = c.has(1) ? c.real(1) : c.attr_real("ratio", 0.5);
  // The model's mode decides, as for nn::Dropout (training_mode only sets the mode load() starts in).
  if (!c.training || ratio == 0) return {x, ones(x.shape(), x.device(), boolean)};
  if (!is_floating(x.dtype()) || !(ratio > 0 && ratio < 1))
    fail<FormatError>("onnx", c.where(), ": dropout of a ", x.dtype(), " tensor with ratio ", ratio, " (a float tensor and a ratio in [0, 1))");
  const Tensor y = kten::detail::dropout(x, ratio, c.seed, (*c.dropout_calls)++);
  return {y, ne(y.detach(), 0.0)};
}

Outs identity(Call& c) { return {c.at(0)}; }

// --- grids: convolution, pooling, padding, resampling, normalisation (PyTorch's CNN exports) ---

// An attribute's string, or `fallback` when absent (read at load, before any Call exists).
std::string node_text(const Node& n, const std::string& name, const std::string& fallback) {
  const auto it = n.attributes.find(name);
  return it == n.attributes.end() ? fallback : it->second.s;
}

std::int64_t node_int(const Node& n, const std::string& name, std::int64_t fallback) {
  const auto it = n.attributes.find(name);
  return it == n.attributes.end() ? fallback : it->second.i;
}

[[noreturn]] void refuse(const Node& n, const std::string& what) {
  fail<FormatError>("onnx", "node '", n.name, "' (", n.op_type, "): ", what, " is not supported");
}

[[noreturn]] void invalid(const Node& n, const std::string& what) {
  fail<FormatError>("onnx", "node '", n.name, "' (", n.op_type, "): ", what);
}

// The largest value of a window attribute: far past any real kernel, stride or pad, and small
// enough that the window arithmetic on an int64 extent (ceil_mode's span and output count, the
// padded extent) cannot overflow.
constexpr std::int64_t kMaxWindow = (std::int64_t{1} << 31) - 1;

// The window attributes of a convolution or pooling node, checked at load before any kernel
// divides by a stride or sizes an output with them: explicit padding only (PyTorch's exporter
// writes pads, never auto_pad); kernel_shape, strides and dilations positive and of one length,
// pads non-negative and twice that length, all at most kMaxWindow. Their length against the
// input's rank is window_of's.
void check_window(const Node& n) {
  const std::string auto_pad = node_text(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") refuse(n, "auto_pad " + auto_pad + " (only NOTSET, with explicit pads)");
  std::size_t spatial = 0;
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
    const auto it = n.attributes.find(name);
    if (it == n.attributes.end()) continue;
    const Attribute& a = it->second;
    const bool pads = std::string_view(name) == "pads";
    if (a.kind != Attribute::integers) invalid(n, std::string("attribute '") + name + "' must be a list of integers");
    for (std::int64_t v : a.ints)
      if ((pads ? v < 0 : v < 1) || v > kMaxWindow)
        invalid(n, std::string("attribute '") + name + "' holds " + std::to_string(v) +
                       (v > kMaxWindow ? "; a window's values must be at most 2^31 - 1"
                        : pads         ? "; pads must not be negative"
                                       : "; its values must be at least 1"));
    if (pads && a.ints.size() % 2 != 0) invalid(n, "attribute 'pads' holds an odd number of values (" + std::to_string(a.ints.size()) + ")");
    const std::size_t axes = pads ? a.ints.size() / 2 : a.ints.size();
    if (spatial != 0 && axes != spatial)
      invalid(n, std::string("attribute '") + name + "' is for " + std::to_string(axes) + " spatial axes, an earlier one for " +
                     std::to_string(spatial));
    spatial = axes;
  }
}

// A convolution's window and its group count (PyTorch's groups, at least 1).
void check_conv(const Node& n) {
  check_window(n);
  const std::int64_t group = node_int(n, "group", 1);
  if (group < 1) invalid(n, "attribute 'group' is " + std::to_string(group) + "; it must be at least 1");
}

// The window attributes of a convolution or pooling node over `spatial` axes: each list holds one
// value per spatial axis (pads: the begins, then the ends).
struct Window {
  Shape kernel, stride, dilation, begin, end;
  bool symmetric() const { return begin == end; }
};

Window window_of(const Call& c, int spatial, const Shape& kernel) {
  Window w;
  w.kernel = c.attr_ints("kernel_shape", kernel);
  w.stride = c.attr_ints("strides", Shape(static_cast<std::size_t>(spatial), 1));
  w.dilation = c.attr_ints("dilations", Shape(static_cast<std::size_t>(spatial), 1));
  const Shape pads = c.attr_ints("pads", Shape(2 * static_cast<std::size_t>(spatial), 0));
  const auto n = static_cast<std::size_t>(spatial);
  if (w.kernel.size() != n || w.stride.size() != n || w.dilation.size() != n || pads.size() != 2 * n)
    fail<ShapeError>("onnx", c.where(), ": kernel_shape, strides, dilations and pads must hold ", spatial,
                     " values (pads ", 2 * spatial, ") for a rank-", spatial + 2, " input");
  if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; }))
    fail<FormatError>("onnx", c.where(), ": negative pads are not supported");
  w.begin.assign(pads.begin(), pads.begin() + spatial);
  w.end.assign(pads.begin() + spatial, pads.end());
  return w;
}

// The number of spatial axes of a channels-first input: 1 to 3, as kten's grid ops take.
int spatial_axes(const Call& c, const Tensor& x) {
  if (x.ndim() < 3 || x.ndim() > 5)
    fail<ShapeError>("onnx", c.where(), ": the input must be (N, C, ...) with 1 to 3 spatial axes, not ", x.shape());
  return x.ndim() - 2;
}

// kten::pad's order, (before, after) pairs from the last axis backwards, for the last `axes` axes.
Shape torch_pads(const Shape& begin, const Shape& end) {
  Shape pads;
  for (std::size_t i = begin.size(); i-- > 0;) {
    pads.push_back(begin[i]);
    pads.push_back(end[i]);
  }
  return pads;
}

Outs conv(Call& c) {
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
  using Conv = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t);
  const Conv by_rank[3] = {conv1d, conv2d, conv3d};
  if (Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()) != win.kernel)
    fail<ShapeError>("onnx", c.where(), ": kernel_shape ", win.kernel, " differs from the weight's ", w.shape());
  return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, win.dilation, groups)};
}

void check_conv_transpose(const Node& n) {
  check_conv(n);
  const auto it = n.attributes.find("output_padding");
  if (it != n.attributes.end())
    for (std::int64_t p : it->second.ints)
      if (p < 0 || p > kMaxWindow)
        invalid(n, "attribute 'output_padding' holds " + std::to_string(p) + "; it must lie in [0, 2^31 - 1]");
  if (n.attributes.count("output_shape")) refuse(n, "output_shape (give pads and output_padding)");
}

Outs conv_transpose(Call& c) {
  const Tensor& x = c.at(0);
  const Tensor& w = c.at(1);
  const int spatial = spatial_axes(c, x);
  const Window win = window_of(c, spatial, Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()));
  const Shape output_padding = c.attr_ints("output_padding", Shape(static_cast<std::size_t>(spatial), 0));
  const Tensor b = c.has(2) ? c.in[2] : Tensor();
  const std::int64_t groups = c.attr_int("group", 1);
  using ConvT = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&,
                           std::int64_t, const Shape&);
  const ConvT by_rank[3] = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
  if (win.symmetric()) return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, output_padding, groups, win.dilation)};
  // Uneven pads crop the unpadded result: `begin` elements before, `end` after.
  Tensor y = by_rank[spatial - 1](x, w, b, win.stride, Shape(win.begin.size(), 0), output_padding, groups, win.dilation);
  for (int i = 0; i < spatial; ++i) {
    const std::int64_t keep = y.size(i + 2) - win.begin[i] - win.end[i];
    if (keep < 1) fail<ShapeError>("onnx", c.where(), ": pads leave no output along spatial axis ", i);
    y = y.narrow(i + 2, win.begin[i], keep);
  }
  return {y};
}

void check_max_pool(const Node& n) {
  check_window(n);
  if (node_int(n, "storage_order", 0) != 0) refuse(n, "storage_order 1");
  if (n.outputs.size() > 1 && n.outputs[1] >= 0) refuse(n, "the Indices output");
  const auto it = n.attributes.find("dilations");
  if (it != n.attributes.end())
    for (std::int64_t d : it->second.ints)
      if (d != 1) refuse(n, "a dilation of " + std::to_string(d));
}

Outs max_pool(Call& c) {
  Tensor x = c.at(0);
  const int spatial = spatial_axes(c, x);
  Window win = window_of(c, spatial, {});
  if (c.attr_int("ceil_mode", 0) != 0)
    for (int i = 0; i < spatial; ++i) {
      // The last window may run past the end, as long as it starts inside the input or its left pad.
      const std::int64_t span = x.size(i + 2) + win.begin[i] + win.end[i];
      std::int64_t out = (span - win.kernel[i] + win.stride[i] - 1) / win.stride[i] + 1;
      if ((out - 1) * win.stride[i] >= x.size(i + 2) + win.begin[i]) --out;
      win.end[i] += std::max<std::int64_t>(0, (out - 1) * win.stride[i] + win.kernel[i] - span);
    }
  if (!win.symmetric()) {  // -inf never wins a window
    x = pad(x, torch_pads(win.begin, win.end), nn::PaddingMode::zeros, -std::numeric_limits<double>::infinity());
    win.begin.assign(win.begin.size(), 0);
  }
  using Pool = Tensor (*)(const Tensor&, const Shape&, const Shape&, const Shape&);
  const Pool by_rank[3] = {max_pool1d, max_pool2d, max_pool3d};
  return {by_rank[spatial - 1](x, win.kernel, win.stride, win.begin)};
}

void check_average_pool(const Node& n) {
  check_window(n);
  const auto dilations = n.attributes.find("dilations");  // an attribute from opset 19
  if (dilations != n.attributes.end())
    for (std::int64_t d : dilations->second.ints)
      if (d != 1) refuse(n, "a dilation of " + std::to_string(d));
  const auto it = n.attributes.find("pads");
  if (it != n.attributes.end()) {
    const std::vector<std::int64_t>& p = it->second.ints;
    if (!std::equal(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(p.size() / 2), p.begin() + static_cast<std::ptrdiff_t>(p.size() / 2)))
      refuse(n, "uneven pads (a begin differing from its end)");
  }
}

Outs average_pool(Call& c) {
  const Tensor& x = c.at(0);
  const int spatial = spatial_axes(c, x);
  const Window win = window_of(c, spatial, {});
  const bool ceil_mode = c.attr_int("ceil_mode", 0) != 0, count_pad = c.attr_int("count_include_pad", 0) != 0;
  using Pool = Tensor (*)(const Tensor&, const Shape&, const Shape&, const Shape&, bool, bool);
  const Pool by_rank[3] = {avg_pool1d, avg_pool2d, avg_pool3d};
  return {by_rank[spatial - 1](x, win.kernel, win.stride, win.begin, ceil_mode, count_pad)};
}

Outs global_average_pool(Call& c) {
  const Tensor& x = c.at(0);
  std::vector<int> axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  if (axes.empty()) fail<ShapeError>("onnx", c.where(), ": the input must be (N, C, ...), not ", x.shape());
  return {mean(x, axes, true)};
}

void check_pad(const Node& n) {
  const std::string mode = node_text(n, "mode", "constant");
  if (mode == "wrap" && n.opset < 19) invalid(n, "mode wrap is an opset-19 mode, not of opset " + std::to_string(n.opset));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    refuse(n, "mode " + mode + " (constant, reflect, edge, wrap)");
}

Outs pad_op(Call& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> pads = c.ints(1);
  if (c.has(3)) {  // opset 18: the pads are for these axes only, the others unpadded
    if (c.opset() < 18) fail<FormatError>("onnx", c.where(), ": axes is an input from opset 18, not ", c.opset());
    std::vector<int> axes;
    for (std::int64_t a : c.ints(3)) axes.push_back(axis_in(c, a, x.ndim()));
    if (pads.size() != 2 * axes.size())
      fail<ShapeError>("onnx", c.where(), ": pads holds ", pads.size(), " values for ", axes.size(), " axes");
    std::vector<int> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    refuse_repeated_axes(c, sorted);
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(x.ndim()), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      all[static_cast<std::size_t>(axes[i])] = pads[i];
      all[static_cast<std::size_t>(axes[i] + x.ndim())] = pads[i + axes.size()];
    }
    pads = all;
  }
  if (pads.size() != 2 * static_cast<std::size_t>(x.ndim()))
    fail<ShapeError>("onnx", c.where(), ": pads holds ", pads.size(), " values for a rank-", x.ndim(), " input");
  if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; }))
    fail<FormatError>("onnx", c.where(), ": negative pads (cropping) are not supported");
  const std::string mode = node_text(c.node, "mode", "constant");
  const double value = c.has(2) ? c.real(2) : 0.0;
  // kten's order from the last axis; leading axes without padding are left out.
  Shape begin(pads.begin(), pads.begin() + x.ndim()), end(pads.begin() + x.ndim(), pads.end());
  while (!begin.empty() && begin.front() == 0 && end.front() == 0) {
    begin.erase(begin.begin());
    end.erase(end.begin());
  }
  if (begin.empty()) return {x};
  const nn::PaddingMode m = mode == "reflect" ? nn::PaddingMode::reflect
                            : mode == "edge"  ? nn::PaddingMode::replicate
                            : mode == "wrap"  ? nn::PaddingMode::circular
                                              : nn::PaddingMode::zeros;
  return {pad(x, torch_pads(begin, end), m, value)};
}

void check_resize(const Node& n) {
  const std::string mode = node_text(n, "mode", "nearest");
  const std::string coordinates = node_text(n, "coordinate_transformation_mode", "half_pixel");
  if (mode == "nearest") {
    if (coordinates != "asymmetric") refuse(n, "nearest with coordinate_transformation_mode " + coordinates + " (asymmetric)");
    const std::string rounding = node_text(n, "nearest_mode", "round_prefer_floor");
    if (rounding != "floor") refuse(n, "nearest_mode " + rounding + " (floor)");
  } else if (mode == "linear") {
    if (coordinates != "half_pixel" && coordinates != "align_corners")
      refuse(n, "linear with coordinate_transformation_mode " + coordinates + " (half_pixel, align_corners)");
  } else {
    refuse(n, "mode " + mode + " (nearest, linear)");
  }
  if (node_int(n, "exclude_outside", 0) != 0) refuse(n, "exclude_outside 1");
  // Opset 18's: antialias (only 0, PyTorch's interpolate), keep_aspect_ratio_policy (only stretch,
  // sizes as given), axes (scales or sizes for those axes only).
  if (node_int(n, "antialias", 0) != 0) refuse(n, "antialias 1");
  const std::string policy = node_text(n, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") refuse(n, "keep_aspect_ratio_policy " + policy + " (stretch)");
  if (n.opset < 18)
    for (const char* newer : {"antialias", "keep_aspect_ratio_policy", "axes"})
      if (n.attributes.count(newer)) invalid(n, std::string(newer) + " is an attribute from opset 18, not " + std::to_string(n.opset));
}

// Resize's scales or sizes over every axis: opset 18's `axes` give them for those axes only, the
// others keep theirs (`unit`: 1 for scales, the extent for sizes).
template <class T>
std::vector<T> every_axis(const Call& c, const Tensor& x, std::vector<T> given, const std::function<T(int)>& unit) {
  const Attribute* a = c.attr("axes");
  if (!a) return given;
  std::vector<int> axes;
  for (std::int64_t v : a->ints) axes.push_back(axis_in(c, v, x.ndim()));
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  refuse_repeated_axes(c, sorted);
  if (given.size() != axes.size())
    fail<FormatError>("onnx", c.where(), ": ", given.size(), " scales or sizes for ", axes.size(), " axes");
  std::vector<T> all;
  for (int i = 0; i < x.ndim(); ++i) all.push_back(unit(i));
  for (std::size_t i = 0; i < axes.size(); ++i) all[static_cast<std::size_t>(axes[i])] = given[i];
  return all;
}

Outs resize(Call& c) {
  const Tensor& x = c.at(0);
  const int spatial = spatial_axes(c, x);
  const bool linear = node_text(c.node, "mode", "nearest") == "linear";
  const bool corners = node_text(c.node, "coordinate_transformation_mode", "half_pixel") == "align_corners";
  constexpr nn::InterpolateMode linear_by_rank[3] = {nn::InterpolateMode::linear, nn::InterpolateMode::bilinear,
                                                     nn::InterpolateMode::trilinear};
  const nn::InterpolateMode mode = linear ? linear_by_rank[spatial - 1] : nn::InterpolateMode::nearest;
  // Scales when given (not empty), else sizes; the batch and channel axes keep their extents.
  if (c.has(2) && c.at(2).numel() > 0) {
    const Tensor& given = c.host.size() > 2 && c.host[2].defined() ? c.host[2] : c.at(2);
    std::vector<double> scales(static_cast<std::size_t>(given.numel()));
    if (!given.device().is_cpu()) scales = given.astype(float64).to_vector<double>();
    else kten::detail::read_cpu_values(given.astype(float64), scales.data(), float64, scales.size());
    scales = every_axis<double>(c, x, scales, [](int) { return 1.0; });
    // ONNX's align_corners maps through the unrounded length (extent x scale), PyTorch's (kten's)
    // through the output's extent: they agree only where the product is a whole number.
    for (std::size_t a = 2; corners && a < scales.size(); ++a)
      if (const double length = static_cast<double>(x.size(static_cast<int>(a))) * scales[a]; length != std::floor(length))
        fail<FormatError>("onnx", c.where(), ": align_corners with scale ", scales[a], " of extent ", x.size(static_cast<int>(a)),
                          " (a length of ", length, ", not a whole number) is not supported; give sizes");
    if (scales.size() != static_cast<std::size_t>(x.ndim()) || scales[0] != 1 || scales[1] != 1)
      fail<FormatError>("onnx", c.where(), ": scales must hold one per axis, 1 for the batch and channel axes");
    return {interpolate(x, std::vector<double>(scales.begin() + 2, scales.end()), mode, corners)};
  }
  if (!c.has(3)) fail<FormatError>("onnx", c.where(), ": neither scales nor sizes is given");
  const std::vector<std::int64_t> sizes = every_axis<std::int64_t>(c, x, c.ints(3), [&](int i) { return x.size(i); });
  if (sizes.size() != static_cast<std::size_t>(x.ndim()) || sizes[0] != x.size(0) || sizes[1] != x.size(1))
    fail<FormatError>("onnx", c.where(), ": sizes must hold one per axis, the batch and channel axes' own extents");
  return {interpolate(x, Shape(sizes.begin() + 2, sizes.end()), mode, corners)};
}

Outs batch_normalization(Call& c) {
  const Tensor& x = c.at(0);
  const Tensor& running_mean = c.at(3);
  const Tensor& running_var = c.at(4);
  // ONNX's momentum weighs the running value, PyTorch's (and kten's) the batch's.
  const double momentum = 1.0 - c.attr_real("momentum", 0.9), eps = c.attr_real("epsilon", 1e-5);
  // The model's mode decides, as for nn::BatchNorm (training_mode only sets the mode load() starts in).
  if (!c.training)  // opset 13's saved statistics: never read (import.cpp)
    return {batch_norm(x, running_mean, running_var, c.at(1), c.at(2), false, momentum, eps), running_mean, running_var, Tensor(), Tensor()};
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
    running_mean.copy_from(running_mean * (1 - momentum) + batch_mean.reshape(running_mean.shape()) * momentum);
    running_var.copy_from(running_var * (1 - momentum) + mean(centred * centred, axes) * momentum);
  }
  return {y, running_mean, running_var, Tensor(), Tensor()};
}

Outs instance_normalization(Call& c) {
  return {instance_norm(c.at(0), {}, {}, c.at(1), c.at(2), true, 0.1, c.attr_real("epsilon", 1e-5))};
}

// The precision LayerNormalization, GroupNormalization (21) and RMSNormalization compute in:
// float (1, the default) or double (11); kten computes in the input's own.
void check_stash_type(const Node& n) {
  const std::int64_t stash = node_int(n, "stash_type", 1);
  if (stash != 1 && stash != 11) refuse(n, "stash_type " + std::to_string(stash) + " (1, 11)");
}

// ONNX Gelu (opset 20): exact, or the tanh approximation PyTorch's gelu(approximate='tanh') is.
void check_gelu(const Node& n) {
  const std::string approximate = node_text(n, "approximate", "none");
  if (approximate != "none" && approximate != "tanh") invalid(n, "approximate '" + approximate + "' (none, tanh)");
}

Outs gelu_op(Call& c) {
  const Tensor& x = c.at(0);
  if (node_text(c.node, "approximate", "none") == "none") return {op("gelu", {x})};
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return {x * 0.5 * (1.0 + tanh((x + x * x * x * 0.044715) * k))};
}

// GroupNormalization: opset 18 scales and shifts per group, opset 21 per channel (PyTorch's).
void check_group_norm(const Node& n) {
  check_stash_type(n);
  const auto groups = n.attributes.find("num_groups");
  if (groups == n.attributes.end() || groups->second.kind != Attribute::integer || groups->second.i < 1)
    invalid(n, "attribute 'num_groups' must be given, an integer of at least 1");
}

Outs group_normalization(Call& c) {
  const Tensor& x = c.at(0);
  const std::int64_t groups = c.attr_int("num_groups", 1);
  if (x.ndim() < 2 || x.size(1) % groups != 0)
    fail<ShapeError>("onnx", c.where(), ": ", groups, " groups do not divide the channels of ", x.shape());
  Tensor scale = c.at(1), bias = c.at(2);
  if (c.opset() < 21) {  // one value per group, repeated over its channels
    if (scale.numel() != groups || bias.numel() != groups)
      fail<ShapeError>("onnx", c.where(), ": at opset ", c.opset(), " scale and bias hold one value per group (", groups,
                       "), not ", scale.shape(), " and ", bias.shape());
    const Shape per_channel{groups, x.size(1) / groups};
    scale = scale.reshape({groups, 1}).expand(per_channel).reshape({x.size(1)});
    bias = bias.reshape({groups, 1}).expand(per_channel).reshape({x.size(1)});
  }
  return {group_norm(x, groups, scale, bias, c.attr_real("epsilon", 1e-5))};
}

// RMSNormalization (opset 23): X / sqrt(mean of X^2 over the axes from `axis` + epsilon) * scale.
Outs rms_normalization(Call& c) {
  const Tensor& x = c.at(0);
  const int axis = axis_in(c, c.attr_int("axis", -1), x.ndim());
  std::vector<int> axes;
  for (int a = axis; a < x.ndim(); ++a) axes.push_back(a);
  if (!is_floating(x.dtype())) fail<DTypeError>("onnx", c.where(), ": X must be float, not ", x.dtype());
  return {x / sqrt(mean(x * x, axes, true) + c.attr_real("epsilon", 1e-5)) * c.at(1)};
}

// --- graphs: gathers and scatters along an axis (message passing) ---

Outs gather_elements(Call& c) {
  const Tensor& x = c.at(0);
  return {gather(x, axis_in(c, c.attr_int("axis", 0), x.ndim()), c.at(1))};
}

void check_scatter_elements(const Node& n) {
  const std::string reduction = node_text(n, "reduction", "none");
  if (reduction != "none" && reduction != "add") refuse(n, "reduction " + reduction + " (none, add)");
}

Outs scatter_elements(Call& c) {
  const Tensor& x = c.at(0);
  const Tensor& index = c.at(1);
  const Tensor& src = c.at(2);
  const int axis = axis_in(c, c.attr_int("axis", 0), x.ndim());
  if (node_text(c.node, "reduction", "none") == "add") return {scatter_add(x, axis, index, src)};
  // Replacement (ONNX leaves repeated indices undefined): the scattered sources where any lands,
  // x elsewhere; gradients reach x's kept elements and the sources.
  const Tensor zero = zeros(x.shape(), x.device(), x.dtype());
  const Tensor landed = scatter_add(zero, axis, index, ones(src.shape(), src.device(), src.dtype()));
  return {where(gt(landed, 0.0), scatter_add(zero, axis, index, src), x)};
}

// --- load-time attribute checks ---

void check_cast(const Node& n) {
  const auto it = n.attributes.find("to");
  DType dtype;
  if (it == n.attributes.end() || !kten_dtype(static_cast<int>(it->second.i), dtype))
    fail<FormatError>("onnx", "node '", n.name, "' (Cast): casting to ONNX element type ",
                      it == n.attributes.end() ? -1 : it->second.i, " is not supported (float, double, int64, bool)");
}

}  // namespace

const std::vector<OpImpl>& op_table() {
  static const std::vector<OpImpl> table = {
      {"Abs", 13, kLastOpset, 1, 1, 1, true, unary<k_abs>, nullptr},
      {"Add", 13, kLastOpset, 2, 2, 1, true, binary<k_add>, nullptr},
      {"AveragePool", 13, kLastOpset, 1, 1, 1, true, average_pool, check_average_pool},
      {"BatchNormalization", 13, kLastOpset, 5, 5, 5, false, batch_normalization, nullptr},
      {"Cast", 13, kLastOpset, 1, 1, 1, true, cast, check_cast},
      {"Concat", 13, kLastOpset, 1, 1 << 20, 1, true, concat, nullptr},
      {"Constant", 13, kLastOpset, 0, 0, 1, true, constant, nullptr},
      {"ConstantOfShape", 13, kLastOpset, 1, 1, 1, true, constant_of_shape, check_constant_of_shape, 0b1},
      {"Conv", 13, kLastOpset, 2, 3, 1, true, conv, check_conv},
      {"ConvTranspose", 13, kLastOpset, 2, 3, 1, true, conv_transpose, check_conv_transpose},
      {"Cos", 13, kLastOpset, 1, 1, 1, true, unary<k_cos>, nullptr},
      {"Div", 13, kLastOpset, 2, 2, 1, true, binary<k_div>, nullptr},
      {"Dropout", 11, kLastOpset, 1, 3, 2, false, dropout_op, nullptr, 0b110},
      {"Equal", 13, kLastOpset, 2, 2, 1, true, equal, nullptr},
      {"Erf", 13, kLastOpset, 1, 1, 1, true, unary<k_erf>, nullptr},
      {"Exp", 13, kLastOpset, 1, 1, 1, true, unary<k_exp>, nullptr},
      {"Expand", 13, kLastOpset, 2, 2, 1, true, expand, nullptr, 0b10},
      {"Flatten", 13, kLastOpset, 1, 1, 1, true, flatten, nullptr},
      {"Gather", 13, kLastOpset, 2, 2, 1, true, gather_op, nullptr, 0b10},
      {"GatherElements", 13, kLastOpset, 2, 2, 1, true, gather_elements, nullptr},
      {"Gemm", 13, kLastOpset, 2, 3, 1, true, gemm, nullptr},
      {"Gelu", 20, kLastOpset, 1, 1, 1, true, gelu_op, check_gelu},
      {"GlobalAveragePool", 13, kLastOpset, 1, 1, 1, true, global_average_pool, nullptr},
      {"GroupNormalization", 18, kLastOpset, 3, 3, 1, true, group_normalization, check_group_norm},
      {"Identity", 13, kLastOpset, 1, 1, 1, true, identity, nullptr},
      {"InstanceNormalization", 13, kLastOpset, 3, 3, 1, true, instance_normalization, nullptr},
      {"LayerNormalization", 17, kLastOpset, 2, 3, 3, true, layer_normalization, check_stash_type},
      {"LeakyRelu", 13, kLastOpset, 1, 1, 1, true, leaky_relu, nullptr},
      {"Log", 13, kLastOpset, 1, 1, 1, true, unary<k_log>, nullptr},
      {"LogSoftmax", 13, kLastOpset, 1, 1, 1, true, softmax_op, nullptr},
      {"MatMul", 13, kLastOpset, 2, 2, 1, true, matmul_op, nullptr},
      {"MaxPool", 13, kLastOpset, 1, 1, 2, true, max_pool, check_max_pool},
      {"Mul", 13, kLastOpset, 2, 2, 1, true, binary<k_mul>, nullptr},
      {"Neg", 13, kLastOpset, 1, 1, 1, true, unary<k_neg>, nullptr},
      {"Pad", 13, kLastOpset, 2, 4, 1, true, pad_op, check_pad, 0b1110},
      {"Pow", 13, kLastOpset, 2, 2, 1, true, pow_op, nullptr},
      {"Range", 11, kLastOpset, 3, 3, 1, true, range, nullptr, 0b111},
      {"ReduceL1", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceL2", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceLogSum", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceLogSumExp", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceMax", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceMean", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceMin", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceSum", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"ReduceSumSquare", 13, kLastOpset, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"Relu", 13, kLastOpset, 1, 1, 1, true, unary<k_relu>, nullptr},
      {"RMSNormalization", 23, kLastOpset, 2, 2, 1, true, rms_normalization, check_stash_type},
      {"Reshape", 13, kLastOpset, 2, 2, 1, true, reshape, nullptr, 0b10},
      {"Resize", 13, kLastOpset, 1, 4, 1, true, resize, check_resize, 0b1110},
      {"ScatterElements", 13, kLastOpset, 3, 3, 1, true, scatter_elements, check_scatter_elements},
      {"Shape", 13, kLastOpset, 1, 1, 1, true, shape_op, nullptr},
      {"Sigmoid", 13, kLastOpset, 1, 1, 1, true, unary<k_sigmoid>, nullptr},
      {"Sin", 13, kLastOpset, 1, 1, 1, true, unary<k_sin>, nullptr},
      {"Slice", 13, kLastOpset, 3, 5, 1, true, slice, nullptr, 0b11110},
      {"Softmax", 13, kLastOpset, 1, 1, 1, true, softmax_op, nullptr},
      {"Softplus", 13, kLastOpset, 1, 1, 1, true, softplus_op, nullptr},
      {"Split", 13, kLastOpset, 1, 2, 1 << 20, true, split, nullptr, 0b10},
      {"Sqrt", 13, kLastOpset, 1, 1, 1, true, unary<k_sqrt>, nullptr},
      {"Squeeze", 13, kLastOpset, 1, 2, 1, true, squeeze, nullptr, 0b10},
      {"Sub", 13, kLastOpset, 2, 2, 1, true, binary<k_sub>, nullptr},
      {"Tanh", 13, kLastOpset, 1, 1, 1, true, unary<k_tanh>, nullptr},
      {"Transpose", 13, kLastOpset, 1, 1, 1, true, transpose_op, nullptr},
      {"Unsqueeze", 13, kLastOpset, 2, 2, 1, true, unsqueeze, nullptr, 0b10},
      {"Where", 13, kLastOpset, 3, 3, 1, true, where_op, nullptr},
  };
  return table;
}

const OpImpl* find_impl(const std::string& op_type) {
  for (const OpImpl& impl : op_table())
    if (op_type == impl.name) return &impl;
  return nullptr;
}

}  // namespace kten::onnx::detail
