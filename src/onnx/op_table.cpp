// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The ONNX operator table: the import forms of the registry's entries (src/ops/registry.hpp; each
// op family declares its own beside its forward and gradient, src/ops/onnx_forms.hpp), and here
// the operators of the graph language that no registered op computes: constants, shapes,
// ranges, Dropout, the normalisations kten has as nn's fused functions and the recurrent layers. Integer arithmetic
// (shape computations) goes through float64, exact below 2^53, since kten's arithmetic is floating.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_map>

#include <kten/ops.hpp>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"
#include "core/storage.hpp"
#include "graph.hpp"
#include "nn/functional.hpp"
#include "ops/dropout.hpp"
#include "ops/registry.hpp"
#include "ops/transfer.hpp"

namespace kten::onnx::detail {

using kten::detail::fail;

namespace {

using Outs = std::vector<Tensor>;

std::vector<Tensor> shape_op(OnnxCall& c) {
  const Shape& s = c.at(0).shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t b = clampi(c.attr_int("start", 0)), e = clampi(c.attr_int("end", rank));
  const std::vector<std::int64_t> dims(s.begin() + b, s.begin() + std::max(b, e));
  return {tensor(dims, {static_cast<std::int64_t>(dims.size())}, cpu())};  // on the host: no device access
}

// Size: the input's element count, a 0-d int64 on the host like Shape's.
std::vector<Tensor> size_op(OnnxCall& c) {
  return {tensor(std::vector<std::int64_t>{c.at(0).numel()}, Shape{}, cpu())};
}

std::vector<Tensor> constant(OnnxCall& c) {
  if (const OnnxAttribute* a = c.attr("value")) return {a->t};
  if (const OnnxAttribute* a = c.attr("value_float")) return {full({}, a->f, cpu(), float32)};
  if (const OnnxAttribute* a = c.attr("value_int"))
    return {full({}, static_cast<double>(a->i), cpu(), int64)};
  if (const OnnxAttribute* a = c.attr("value_floats"))
    return {tensor(std::vector<float>(a->floats.begin(), a->floats.end()), cpu())};
  if (const OnnxAttribute* a = c.attr("value_ints")) return {tensor(a->ints, cpu())};
  fail<FormatError>("onnx", c.where(), ": no value, value_float(s) or value_int(s) attribute");
}

// ONNX's value is a one-element tensor (float 0 when absent); checked at load.
void check_constant_of_shape(const OnnxNode& n) {
  const auto it = n.attributes.find("value");
  if (it == n.attributes.end()) return;
  if (it->second.kind != OnnxAttribute::tensor || it->second.t.numel() != 1)
    fail<FormatError>("onnx", "node '", n.name,
                      "' (ConstantOfShape): attribute 'value' must be a tensor of one element",
                      it->second.kind == OnnxAttribute::tensor ? ", not of shape " : "",
                      it->second.kind == OnnxAttribute::tensor ? it->second.t.shape() : Shape{});
}

std::vector<Tensor> constant_of_shape(OnnxCall& c) {
  const Shape shape = c.ints(0);
  const OnnxAttribute* a = c.attr("value");
  const Tensor value = a ? a->t : zeros({1});
  double fill = 0;
  kten::detail::read_cpu_values(value.astype(float64), &fill, float64, 1);  // an attribute: on the host
  return {full(shape, fill, c.device, value.dtype())};
}

std::vector<Tensor> range(OnnxCall& c) {
  const DType dtype = c.at(0).dtype();
  return {arange(c.real(0), c.real(1), c.real(2), c.device, dtype)};
}

std::vector<Tensor> dropout_op(OnnxCall& c) {
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

std::vector<Tensor> layer_normalization(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int axis = ops::onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  const double eps = c.attr_real("epsilon", 1e-5);
  // kten's layer_norm normalises the last axis: the normalised axes become one.
  Shape outer(x.shape().begin(), x.shape().begin() + axis);
  const std::int64_t features =
      kten::detail::checked_numel(Shape(x.shape().begin() + axis, x.shape().end()), "onnx");
  if (c.at(1).numel() != features)
    fail<ShapeError>("onnx", c.where(), ": Scale has shape ", c.at(1).shape(), " for normalised extents of ",
                     features, " elements");
  outer.push_back(features);
  const Tensor weight = c.at(1).reshape({features});
  const Tensor bias = c.has(2) ? c.in[2].reshape({features}) : zeros({features}, x.device(), x.dtype());
  if (!is_floating(x.dtype()) || weight.dtype() != x.dtype() || bias.dtype() != x.dtype())
    fail<DTypeError>("onnx", c.where(), ": X, Scale and B must share one float dtype, not ", x.dtype(), ", ",
                     weight.dtype(), " and ", bias.dtype());
  if (bias.numel() != features || weight.device() != x.device() || bias.device() != x.device())
    fail<ShapeError>("onnx", c.where(), ": B has shape ", bias.shape(), " for ", features,
                     " normalised elements (or another device)");
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

// RMSNormalization (opset 23): X / sqrt(mean of X^2 over the axes from `axis` + epsilon) * scale.
std::vector<Tensor> rms_normalization(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int axis = ops::onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  std::vector<int> axes;
  for (int a = axis; a < x.ndim(); ++a) axes.push_back(a);
  if (!is_floating(x.dtype())) fail<DTypeError>("onnx", c.where(), ": X must be float, not ", x.dtype());
  return {x / sqrt(mean(x * x, axes, true) + c.attr_real("epsilon", 1e-5)) * c.at(1)};
}

// ONNX's LSTM and GRU (one layer: forward, reverse or bidirectional) over nn's recurrence, with the
// gates reordered to PyTorch's (LSTM i, o, f, c to i, f, c, o; GRU z, r, h to r, z, h). GRU only
// with linear_before_reset 1, PyTorch's form (r scales the state's product, its bias included).
// Refused by name: activations other than the defaults, clip, input_forget, and at run the
// peepholes and sequence_lens inputs.
void check_recurrent(const OnnxNode& n) {
  for (const char* a : {"activations", "activation_alpha", "activation_beta", "clip"})
    if (n.attributes.count(a)) ops::onnx_refuse(n, std::string(a) + " (kten's gates are sigmoid and tanh, unclipped)");
  const std::string direction = ops::node_text(n, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ops::onnx_invalid(n, "attribute 'direction' is '" + direction + "'; it must be forward, reverse or bidirectional");
  if (n.op_type == "LSTM" && ops::node_int(n, "input_forget", 0) != 0) ops::onnx_refuse(n, "input_forget 1");
  if (n.op_type == "GRU" && ops::node_int(n, "linear_before_reset", 0) != 1)
    ops::onnx_refuse(n, "linear_before_reset 0 (kten's GRU is PyTorch's: 1)");
  const std::int64_t layout = ops::node_int(n, "layout", 0), hidden = ops::node_int(n, "hidden_size", 1);
  if (layout != 0 && layout != 1) ops::onnx_invalid(n, "attribute 'layout' is " + std::to_string(layout) + "; it must be 0 or 1");
  if (hidden < 1) ops::onnx_invalid(n, "attribute 'hidden_size' is " + std::to_string(hidden) + "; it must be at least 1");
}

std::vector<Tensor> recurrent(OnnxCall& c) {
  const bool lstm = c.node.op_type == "LSTM", batch_first = c.attr_int("layout", 0) == 1;
  const std::int64_t gates = lstm ? 4 : 3;
  if (c.has(4)) fail<FormatError>("onnx", c.where(), ": sequence_lens is not supported (every sequence runs to its end)");
  if (lstm && c.has(7)) fail<FormatError>("onnx", c.where(), ": peepholes (input P) are not supported");
  const std::string direction = c.attr_text("direction", "forward");
  const std::int64_t directions = direction == "bidirectional" ? 2 : 1;
  const Tensor& w = c.at(1);
  const Tensor& r = c.at(2);
  const Tensor x = c.at(0).ndim() == 3 && batch_first ? c.at(0).transpose(0, 1) : c.at(0);  // (L, N, in)
  const std::int64_t hidden = r.ndim() == 3 ? r.size(2) : 0;
  if (x.ndim() != 3 || w.ndim() != 3 || r.ndim() != 3 || w.size(0) != directions || r.size(0) != directions ||
      w.size(1) != gates * hidden || r.size(1) != gates * hidden || w.size(2) != x.size(2) || x.size(0) < 1 ||
      c.attr_int("hidden_size", hidden) != hidden)
    fail<ShapeError>("onnx", c.where(), ": X ", x.shape(), ", W ", w.shape(), " and R ", r.shape(), " do not fit ",
                     directions, " direction(s) of ", gates, " gates (X (L >= 1, N, in), W (directions, ", gates,
                     " hidden_size, in), R (directions, ", gates, " hidden_size, hidden_size))");
  if (!is_floating(x.dtype()) || w.dtype() != x.dtype() || r.dtype() != x.dtype())
    fail<DTypeError>("onnx", c.where(), ": X, W and R must share one float dtype, not ", x.dtype(), ", ", w.dtype(),
                     " and ", r.dtype());
  const auto pytorch_order = [&](const Tensor& t) {  // the gate blocks of t's first axis
    std::vector<Tensor> g;
    for (std::int64_t i = 0; i < gates; ++i) g.push_back(t.narrow(0, i * hidden, hidden));
    return lstm ? cat({g[0], g[2], g[3], g[1]}, 0) : cat({g[1], g[0], g[2]}, 0);
  };
  const auto initial = [&](std::size_t input, std::int64_t d) {  // (directions, N, H), (N, directions, H) in layout 1
    const std::int64_t batch = x.size(1);
    if (!c.has(input)) return zeros({batch, hidden}, x.device(), x.dtype());
    const Tensor& s = c.in[input];
    const Shape want = batch_first ? Shape{batch, directions, hidden} : Shape{directions, batch, hidden};
    if (s.shape() != want)
      fail<ShapeError>("onnx", c.where(), ": an initial state has shape ", s.shape(), ", expected ", want);
    return s.select(batch_first ? 1 : 0, d);
  };
  std::vector<Tensor> ys, hs, cs;
  for (std::int64_t d = 0; d < directions; ++d) {
    Tensor b_ih, b_hh;
    if (c.has(3)) {
      const Tensor& b = c.in[3];
      if (b.shape() != Shape{directions, 2 * gates * hidden} || b.dtype() != x.dtype())
        fail<ShapeError>("onnx", c.where(), ": B has shape ", b.shape(), ", expected ", Shape{directions, 2 * gates * hidden});
      b_ih = pytorch_order(b.select(0, d).narrow(0, 0, gates * hidden));
      b_hh = pytorch_order(b.select(0, d).narrow(0, gates * hidden, gates * hidden));
    }
    std::vector<Tensor> state{initial(5, d)};
    if (lstm) state.push_back(initial(6, d));
    auto [y, last] = kten::detail::recurrent_direction(lstm, x, std::move(state), pytorch_order(w.select(0, d)),
                                                       pytorch_order(r.select(0, d)), b_ih, b_hh,
                                                       direction == "reverse" || d == 1);
    ys.push_back(y);
    hs.push_back(last[0]);
    if (lstm) cs.push_back(last[1]);
  }
  // Y (L, directions, N, H), Y_h and Y_c (directions, N, H); layout 1: (N, L, directions, H), (N, directions, H).
  const Tensor y = stack(ys, 1);
  Outs out{batch_first ? y.permute({2, 0, 1, 3}) : y, batch_first ? stack(hs, 1) : stack(hs, 0)};
  if (lstm) out.push_back(batch_first ? stack(cs, 1) : stack(cs, 0));
  return out;
}

std::vector<Tensor> identity(OnnxCall& c) { return {c.at(0)}; }

// The graph language's rows.
std::vector<OpImpl> graph_ops() {
  constexpr int last = ops::kOnnxLastOpset;
  return {
      {"Constant", 12, last, 0, 0, 1, true, constant},
      {"ConstantOfShape", 13, last, 1, 1, 1, true, constant_of_shape, check_constant_of_shape, 0b1},
      {"Dropout", 11, last, 1, 3, 2, false, dropout_op, nullptr, 0b110},
      {"GRU", 13, last, 3, 6, 2, true, recurrent, check_recurrent},
      {"Identity", 13, last, 1, 1, 1, true, identity},
      {"LayerNormalization", 17, last, 2, 3, 3, true, layer_normalization, ops::check_stash_type},
      {"LSTM", 13, last, 3, 8, 3, true, recurrent, check_recurrent},
      {"Range", 11, last, 3, 3, 1, true, range, nullptr, 0b111},
      {"RMSNormalization", 23, last, 2, 2, 1, true, rms_normalization, ops::check_stash_type},
      {"Shape", 13, last, 1, 1, 1, true, shape_op},
      {"Size", 13, last, 1, 1, 1, true, size_op},
  };
}

}  // namespace

const std::vector<OpImpl>& op_table() {
  static const std::vector<OpImpl> table = [] {
    std::vector<OpImpl> all = graph_ops();
    for (const ops::OpDef& def : ops::registry())
      all.insert(all.end(), def.onnx_import.begin(), def.onnx_import.end());
    const auto lower = [](std::string s) {
      for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return s;
    };
    std::sort(all.begin(), all.end(),
              [&](const OpImpl& a, const OpImpl& b) { return lower(a.op_type) < lower(b.op_type); });
    for (std::size_t i = 1; i < all.size(); ++i)
      if (std::string_view(all[i].op_type) == all[i - 1].op_type)
        fail("onnx", "the ONNX operator '", all[i].op_type,
             "' has two import forms (a bug in kten's op registry)");
    return all;
  }();
  return table;
}

const OpImpl* find_impl(const std::string& op_type) {
  static const std::unordered_map<std::string, const OpImpl*> by_name = [] {
    std::unordered_map<std::string, const OpImpl*> map;
    for (const OpImpl& impl : op_table()) map.emplace(impl.op_type, &impl);
    return map;
  }();
  const auto it = by_name.find(op_type);
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace kten::onnx::detail
