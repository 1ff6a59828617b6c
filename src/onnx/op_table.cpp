// The ONNX operator table: each operator kten imports, the opsets it supports, and how it maps
// onto kten's ops. Wherever a registered op fits (src/ops/registry.hpp), the row calls it through
// the registry; ONNX's own attribute conventions (Gemm's transposes, Slice's clamping, Reshape's
// 0 and -1, Unsqueeze's output-rank axes) are resolved here. Integer arithmetic (shape
// computations) goes through float64, exact below 2^53, since kten's arithmetic is floating.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>

#include <kten/ops.hpp>

#include "core/checks.hpp"
#include "core/fail.hpp"
#include "core/storage.hpp"
#include "graph.hpp"
#include "ops/linalg.hpp"
#include "ops/registry.hpp"
#include "optim/kernels.hpp"

namespace kten::onnx::detail {

using kten::detail::fail;

// --- Call's helpers ----------------------------------------------------------------------------

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
  kten::detail::read_cpu_values(t.astype(int64), v.data(), int64);
  return v;
}

double Call::real(std::size_t i) const {
  const Tensor& t = i < host.size() && host[i].defined() ? host[i] : at(i);
  if (t.numel() != 1) fail<ShapeError>("onnx", where(), ": input ", i, " must hold one value, not ", t.shape());
  if (!t.device().is_cpu()) return t.item<double>();
  double v = 0;
  kten::detail::read_cpu_values(t.astype(float64), &v, float64);
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
  return {kten::detail::layer_norm(x.reshape(outer), weight, bias, eps).reshape(x.shape())};
}

// --- reductions ---

Outs reduce(Call& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> axes = c.node.op_type == "ReduceSum" ? (c.has(1) ? c.ints(1) : std::vector<std::int64_t>{})
                                                                  : c.attr_ints("axes");
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  std::vector<std::int64_t> normal;
  for (std::int64_t a : axes) normal.push_back(axis_in(c, a, x.ndim()));
  ops::OpAttrs attrs = ops::OpAttrs::of_ints(normal, c.attr_int("keepdims", 1) != 0);
  const char* name = c.node.op_type == "ReduceSum" ? "sum_axes" : c.node.op_type == "ReduceMean" ? "mean_axes" : "max_axes";
  return {numeric({x}, [&](const std::vector<Tensor>& v) { return op(name, v, attrs); })};
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
  if (sizes.empty()) {
    if (x.size(axis) % static_cast<std::int64_t>(n) != 0)
      fail<ShapeError>("onnx", c.where(), ": extent ", x.size(axis), " does not split into ", n, " equal parts");
    sizes.assign(n, x.size(axis) / static_cast<std::int64_t>(n));
  }
  std::int64_t total = 0;
  for (std::int64_t s : sizes) total += s;
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
    if (steps[i] != 1) fail<FormatError>("onnx", c.where(), ": a step of ", steps[i], " is not supported yet (only 1)");
    const int axis = axis_in(c, axes[i], x.ndim());
    const std::int64_t extent = x.size(axis);
    const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + extent : v, std::int64_t{0}, extent); };
    const std::int64_t b = clampi(starts[i]), e = clampi(ends[i]);
    x = x.narrow(axis, b, std::max<std::int64_t>(e - b, 0));
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

Outs constant_of_shape(Call& c) {
  const Shape shape = c.ints(0);
  const Attribute* a = c.attr("value");
  const Tensor value = a ? a->t : zeros({1});
  double fill = 0;
  kten::detail::read_cpu_values(value.astype(float64), &fill, float64);  // an attribute: on the host
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
  const double ratio = c.has(1) ? c.real(1) : 0.5;
  // The model's mode decides, as for nn::Dropout (training_mode only sets the mode load() starts in).
  if (!c.training || ratio == 0) return {x, ones(x.shape(), x.device(), boolean)};
  if (!is_floating(x.dtype()) || !(ratio > 0 && ratio < 1))
    fail<FormatError>("onnx", c.where(), ": dropout of a ", x.dtype(), " tensor with ratio ", ratio, " (a float tensor and a ratio in [0, 1))");
  const Tensor y = kten::detail::dropout(x, ratio, c.seed, (*c.dropout_calls)++);
  return {y, ne(y.detach(), 0.0)};
}

Outs identity(Call& c) { return {c.at(0)}; }

// --- load-time attribute checks ---

void check_cast(const Node& n) {
  const auto it = n.attributes.find("to");
  DType dtype;
  if (it == n.attributes.end() || !kten_dtype(static_cast<int>(it->second.i), dtype))
    fail<FormatError>("onnx", "node '", n.name, "' (Cast): casting to ONNX element type ",
                      it == n.attributes.end() ? -1 : it->second.i, " is not supported (float, double, int64, bool)");
}

void check_layer_norm(const Node& n) {
  for (std::size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0)
      fail<FormatError>("onnx", "node '", n.name, "' (LayerNormalization): its Mean and InvStdDev outputs are not supported");
}

}  // namespace

const std::vector<OpImpl>& op_table() {
  static const std::vector<OpImpl> table = {
      {"Abs", 13, 17, 1, 1, 1, true, unary<k_abs>, nullptr},
      {"Add", 13, 17, 2, 2, 1, true, binary<k_add>, nullptr},
      {"Cast", 13, 17, 1, 1, 1, true, cast, check_cast},
      {"Concat", 13, 17, 1, 1 << 20, 1, true, concat, nullptr},
      {"Constant", 13, 17, 0, 0, 1, true, constant, nullptr},
      {"ConstantOfShape", 13, 17, 1, 1, 1, true, constant_of_shape, nullptr, 0b1},
      {"Cos", 13, 17, 1, 1, 1, true, unary<k_cos>, nullptr},
      {"Div", 13, 17, 2, 2, 1, true, binary<k_div>, nullptr},
      {"Dropout", 13, 17, 1, 3, 2, false, dropout_op, nullptr, 0b110},
      {"Equal", 13, 17, 2, 2, 1, true, equal, nullptr},
      {"Erf", 13, 17, 1, 1, 1, true, unary<k_erf>, nullptr},
      {"Exp", 13, 17, 1, 1, 1, true, unary<k_exp>, nullptr},
      {"Expand", 13, 17, 2, 2, 1, true, expand, nullptr, 0b10},
      {"Flatten", 13, 17, 1, 1, 1, true, flatten, nullptr},
      {"Gather", 13, 17, 2, 2, 1, true, gather_op, nullptr, 0b10},
      {"Gemm", 13, 17, 2, 3, 1, true, gemm, nullptr},
      {"Identity", 13, 17, 1, 1, 1, true, identity, nullptr},
      {"LayerNormalization", 17, 17, 2, 3, 3, true, layer_normalization, check_layer_norm},
      {"LeakyRelu", 13, 17, 1, 1, 1, true, leaky_relu, nullptr},
      {"Log", 13, 17, 1, 1, 1, true, unary<k_log>, nullptr},
      {"LogSoftmax", 13, 17, 1, 1, 1, true, softmax_op, nullptr},
      {"MatMul", 13, 17, 2, 2, 1, true, matmul_op, nullptr},
      {"Mul", 13, 17, 2, 2, 1, true, binary<k_mul>, nullptr},
      {"Neg", 13, 17, 1, 1, 1, true, unary<k_neg>, nullptr},
      {"Pow", 13, 17, 2, 2, 1, true, pow_op, nullptr},
      {"Range", 13, 17, 3, 3, 1, true, range, nullptr, 0b111},
      {"ReduceMax", 13, 17, 1, 1, 1, true, reduce, nullptr},
      {"ReduceMean", 13, 17, 1, 1, 1, true, reduce, nullptr},
      {"ReduceSum", 13, 17, 1, 2, 1, true, reduce, nullptr, 0b10},
      {"Relu", 13, 17, 1, 1, 1, true, unary<k_relu>, nullptr},
      {"Reshape", 13, 17, 2, 2, 1, true, reshape, nullptr, 0b10},
      {"Shape", 13, 17, 1, 1, 1, true, shape_op, nullptr},
      {"Sigmoid", 13, 17, 1, 1, 1, true, unary<k_sigmoid>, nullptr},
      {"Sin", 13, 17, 1, 1, 1, true, unary<k_sin>, nullptr},
      {"Slice", 13, 17, 3, 5, 1, true, slice, nullptr, 0b11110},
      {"Softmax", 13, 17, 1, 1, 1, true, softmax_op, nullptr},
      {"Softplus", 13, 17, 1, 1, 1, true, softplus_op, nullptr},
      {"Split", 13, 17, 1, 2, 1 << 20, true, split, nullptr, 0b10},
      {"Sqrt", 13, 17, 1, 1, 1, true, unary<k_sqrt>, nullptr},
      {"Squeeze", 13, 17, 1, 2, 1, true, squeeze, nullptr, 0b10},
      {"Sub", 13, 17, 2, 2, 1, true, binary<k_sub>, nullptr},
      {"Tanh", 13, 17, 1, 1, 1, true, unary<k_tanh>, nullptr},
      {"Transpose", 13, 17, 1, 1, 1, true, transpose_op, nullptr},
      {"Unsqueeze", 13, 17, 2, 2, 1, true, unsqueeze, nullptr, 0b10},
      {"Where", 13, 17, 3, 3, 1, true, where_op, nullptr},
  };
  return table;
}

const OpImpl* find_impl(const std::string& op_type) {
  for (const OpImpl& impl : op_table())
    if (op_type == impl.name) return &impl;
  return nullptr;
}

}  // namespace kten::onnx::detail
