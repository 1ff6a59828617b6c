// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The op registry (registry.hpp): the families' declarations in one list, looked up by name. The
// tensor core's views and copies (src/core) are declared here, the layer above them.
#include "registry.hpp"

#include <climits>
#include <unordered_set>

#include <kten/ops.hpp>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"

namespace kten::ops {

using detail::fail;

int axis_of(const OpAttrs& attrs, std::size_t i) {
  if (i >= attrs.ints.size()) fail("kten::ops", "the op needs an axis as its integer argument ", i, "; none was given");
  const std::int64_t axis = attrs.ints[i];
  if (axis < INT_MIN || axis > INT_MAX) fail<ShapeError>("kten::ops", "axis ", axis, " is out of range");
  return static_cast<int>(axis);
}

std::vector<int> axes_of(const OpAttrs& attrs) {
  std::vector<int> axes;
  for (std::size_t i = 0; i < attrs.ints.size(); ++i) axes.push_back(axis_of(attrs, i));
  return axes;
}

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> onnx_concat(OnnxCall& c) {
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < c.in.size(); ++i) parts.push_back(c.at(i));
  return {registered("cat", parts,
                     ops::OpAttrs::of_ints({onnx_axis(c, c.attr_int("axis", 0), parts[0].ndim())}))};
}

std::vector<Tensor> onnx_split(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  const std::size_t n = c.node.outputs.size();
  std::vector<std::int64_t> sizes = c.has(1) ? c.ints(1) : c.attr_ints("split");
  if (const OnnxAttribute* parts =
          c.attr("num_outputs")) {  // opset 18: chunks of ceil(extent / n), the last smaller
    if (c.opset() < 18)
      fail<FormatError>("onnx", c.where(), ": num_outputs is an attribute from opset 18, not ", c.opset());
    if (c.has(1)) fail<FormatError>("onnx", c.where(), ": both split and num_outputs are given");
    if (parts->kind != OnnxAttribute::integer || parts->i != static_cast<std::int64_t>(n))
      fail<FormatError>("onnx", c.where(), ": num_outputs must be the node's ", n, " outputs");
    const std::int64_t chunk = (x.size(axis) + parts->i - 1) / parts->i;
    for (std::int64_t left = x.size(axis); left > 0; left -= chunk) sizes.push_back(std::min(chunk, left));
    if (sizes.size() != n)
      fail<ShapeError>("onnx", c.where(), ": extent ", x.size(axis), " does not split into ", n,
                       " chunks of ", chunk);
  }
  if (sizes.empty()) {
    if (x.size(axis) % static_cast<std::int64_t>(n) != 0)
      fail<ShapeError>("onnx", c.where(), ": extent ", x.size(axis), " does not split into ", n,
                       " equal parts");
    sizes.assign(n, x.size(axis) / static_cast<std::int64_t>(n));
  }
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 0 || s > x.size(axis))
      fail<ShapeError>("onnx", c.where(), ": split size ", s, " is outside extent ", x.size(axis));
    const auto sum = kten::detail::checked_add(total, s);
    if (!sum || *sum > x.size(axis))
      fail<ShapeError>("onnx", c.where(), ": split sizes add up past extent ", x.size(axis), " of axis ",
                       axis);
    total = *sum;
  }
  if (sizes.size() != n || total != x.size(axis))
    fail<ShapeError>("onnx", c.where(), ": split sizes do not tile extent ", x.size(axis), " into ", n,
                     " outputs");
  std::vector<Tensor> out;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    out.push_back(x.narrow(axis, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> onnx_slice(OnnxCall& c) {
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
    const int axis = onnx_axis(c, axes[i], x.ndim());
    const std::int64_t extent = x.size(axis);
    if (steps[i] == 1) {
      const auto clampi = [&](std::int64_t v) {
        return std::clamp(v < 0 ? v + extent : v, std::int64_t{0}, extent);
      };
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
    const std::int64_t stride = step > 0 ? step
                                : step == std::numeric_limits<std::int64_t>::min()
                                    ? std::numeric_limits<std::int64_t>::max()
                                    : -step;
    const std::int64_t span = step > 0 ? last - first : first - last;
    std::vector<std::int64_t> picked;
    for (std::int64_t k = 0, count = span > 0 ? 1 + (span - 1) / stride : 0; k < count; ++k)
      picked.push_back(first + k * step);
    x = picked.empty() ? x.narrow(axis, 0, 0) : index_select(x, axis, tensor(picked, x.device()));
  }
  return {x};
}

std::vector<Tensor> onnx_reshape(OnnxCall& c) {
  const Tensor& x = c.at(0);
  Shape shape = c.ints(1);
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.ndim())
        fail<ShapeError>("onnx", c.where(), ": a 0 at axis ", i, " of the shape copies no axis of ",
                         x.shape());
      shape[i] = x.size(static_cast<int>(i));
    }
  return {x.reshape(shape)};
}

std::vector<Tensor> onnx_flatten(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int rank = x.ndim();
  std::int64_t axis = c.attr_int("axis", 1);
  if (axis < -rank || axis > rank)
    fail<ShapeError>("onnx", c.where(), ": axis ", axis, " is outside a rank-", rank, " tensor");
  if (axis < 0) axis += rank;
  const std::int64_t outer =
      kten::detail::checked_numel(Shape(x.shape().begin(), x.shape().begin() + axis), "onnx");
  return {x.reshape({outer, outer == 0 ? 0 : x.numel() / outer})};
}

std::vector<Tensor> transpose_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int i = x.ndim() - 1; i >= 0; --i) perm.push_back(i);
  return {registered("Tensor::permute", {x}, ops::OpAttrs::of_ints(perm))};
}

std::vector<Tensor> onnx_squeeze(OnnxCall& c) {
  Tensor x = c.at(0);
  if (!c.has(1)) return {x.squeeze()};
  std::vector<int> axes;
  for (std::int64_t a : c.ints(1)) axes.push_back(onnx_axis(c, a, x.ndim()));
  std::sort(axes.rbegin(), axes.rend());
  refuse_repeated_axes(c, axes);
  for (int a : axes) {
    if (x.size(a) != 1)
      fail<ShapeError>("onnx", c.where(), ": axis ", a, " of ", x.shape(), " is not of extent 1");
    x = x.squeeze(a);
  }
  return {x};
}

std::vector<Tensor> onnx_unsqueeze(OnnxCall& c) {
  Tensor x = c.at(0);
  const std::vector<std::int64_t> given = c.ints(1);
  const int rank = x.ndim() + static_cast<int>(given.size());
  std::vector<int> axes;
  for (std::int64_t a : given) axes.push_back(onnx_axis(c, a, rank));
  std::sort(axes.begin(), axes.end());
  refuse_repeated_axes(c, axes);
  for (int a : axes) x = x.unsqueeze(a);
  return {x};
}

// ONNX's bidirectional broadcast of two shapes.
Shape onnx_broadcast(const OnnxCall& c, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1)
      fail<ShapeError>("onnx", c.where(), ": shapes ", a, " and ", b, " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<Tensor> onnx_expand(OnnxCall& c) {
  const Tensor& x = c.at(0);
  return {x.expand(onnx_broadcast(c, x.shape(), c.ints(1)))};
}

// Tile: x repeated r_d times along each axis d, as an expand of x with an axis of extent 1 before
// each of its own (one copy, when the result is made contiguous), its gradient expand's (a sum).
std::vector<Tensor> onnx_tile(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const std::vector<std::int64_t> repeats = c.ints(1);
  if (repeats.size() != static_cast<std::size_t>(x.ndim()))
    fail<ShapeError>("onnx", c.where(), ": ", repeats.size(), " repeats for a rank-", x.ndim(), " input");
  Shape split, expanded, tiled;
  for (std::size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) fail<ShapeError>("onnx", c.where(), ": a negative repeat, ", repeats[d]);
    const auto extent = kten::detail::checked_mul(repeats[d], x.shape()[d]);
    if (!extent) fail<ShapeError>("onnx", c.where(), ": repeat ", repeats[d], " of extent ", x.shape()[d], " overflows");
    split.insert(split.end(), {1, x.shape()[d]});
    expanded.insert(expanded.end(), {repeats[d], x.shape()[d]});
    tiled.push_back(*extent);
  }
  kten::detail::checked_numel(tiled, "onnx");
  return {x.reshape(split).expand(expanded).reshape(tiled)};
}

// A reshape's target, the batch axis (0) written so that another batch size works: 0 (copy the
// input's) where it kept its extent, -1 (what the other extents leave) where it did not.
std::string reshape_row(OnnxEmit& e) {
  const Shape& in = e.t(0).shape();
  std::vector<std::int64_t> shape = e.op.out.shape();
  if (!shape.empty() && !in.empty()) shape[0] = shape[0] == in[0] ? 0 : -1;
  return e.node("Reshape", {e.in[0], e.w.ints(shape)});
}

// expand as Expand, whose broadcast is two-way: 1 keeps the input's extent (the batch's among them).
std::string expand_row(OnnxEmit& e) {
  const Shape& in = e.t(0).shape();
  std::vector<std::int64_t> shape = e.op.out.shape();
  const std::size_t lead = shape.size() - in.size();
  for (std::size_t d = lead; d < shape.size(); ++d)
    if (in[d - lead] == shape[d]) shape[d] = 1;
  return e.node("Expand", {e.in[0], e.w.ints(shape)});
}

}  // namespace

std::vector<OpDef> view_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real;
  const DTypes any = DTypes::any;
  std::vector<OpDef> rows = {
      {"Tensor::contiguous", "Tensor::contiguous()", 1, {real}, any, true, [](X x, A) { return x[0].contiguous(); }},
      {"Tensor::reshape", "Tensor::reshape(Shape)", 1, {real}, any, true, [](X x, A a) { return x[0].reshape(a.ints); }},
      {"Tensor::view", "Tensor::view(Shape)", 1, {real}, any, true, [](X x, A a) { return x[0].view(a.ints); }},
      {"Tensor::transpose", "Tensor::transpose(int,int)", 1, {real}, any, true,
       [](X x, A a) { return x[0].transpose(axis_of(a, 0), axis_of(a, 1)); }},
      {"Tensor::permute", "Tensor::permute(vector<int>)", 1, {real}, any, true, [](X x, A a) { return x[0].permute(axes_of(a)); }},
      {"Tensor::narrow", "Tensor::narrow(int,int64_t,int64_t)", 1, {real}, any, true,
       [](X x, A a) { return x[0].narrow(axis_of(a), a.ints.at(1), a.ints.at(2)); }},
      {"Tensor::select", "Tensor::select(int,int64_t)", 1, {real}, any, true,
       [](X x, A a) { return x[0].select(axis_of(a), a.ints.at(1)); }},
      {"Tensor::unsqueeze", "Tensor::unsqueeze(int)", 1, {real}, any, true, [](X x, A a) { return x[0].unsqueeze(axis_of(a)); }},
      {"Tensor::squeeze_axis", "Tensor::squeeze(int)", 1, {real}, any, true, [](X x, A a) { return x[0].squeeze(axis_of(a)); }},
      {"Tensor::squeeze", "Tensor::squeeze()", 1, {real}, any, true, [](X x, A) { return x[0].squeeze(); }},
      {"Tensor::expand", "Tensor::expand(Shape)", 1, {real}, any, true, [](X x, A a) { return x[0].expand(a.ints); }},
      {"Tensor::copyto", "Tensor::copyto(Device)", 1, {real}, any, true, [](X x, A a) { return x[0].copyto(a.device); }},
      {"Tensor::to", "Tensor::to(Device)", 1, {real}, any, true, [](X x, A a) { return x[0].to(a.device); }},
      {"Tensor::detach", "Tensor::detach()", 1, {real}, any, false, [](X x, A) { return x[0].detach(); }},
      {"cat", "cat(vector<Tensor>,int)", -1, {real}, any, true, [](X x, A a) { return cat(x, axis_of(a)); }},
      {"stack", "stack(vector<Tensor>,int)", -1, {real}, any, true, [](X x, A a) { return stack(x, axis_of(a)); }},
  };
  set_onnx(rows, "Tensor::contiguous", {}, {onnx_node_of("kten::contiguous", "Identity")});
  set_onnx(rows, "Tensor::copyto", {}, {onnx_node_of("kten::copyto", "Identity")});
  set_onnx(rows, "Tensor::reshape",
           {{"Reshape", 13, kOnnxLastOpset, 2, 2, 1, true, onnx_reshape, nullptr, 0b10},
            {"Flatten", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_flatten, nullptr, 0}},
           {{"kten::reshape", reshape_row}});
  set_onnx(rows, "Tensor::expand",
           {{"Expand", 13, kOnnxLastOpset, 2, 2, 1, true, onnx_expand, nullptr, 0b10},
            {"Tile", 13, kOnnxLastOpset, 2, 2, 1, true, onnx_tile, nullptr, 0b10}},
           {{"kten::expand", expand_row}});
  set_onnx(rows, "Tensor::transpose", {}, {{"kten::transpose", [](OnnxEmit& e) {
                                              std::vector<std::int64_t> perm;
                                              for (int d = 0; d < e.t(0).ndim(); ++d) perm.push_back(d);
                                              std::swap(perm.at(static_cast<std::size_t>(e.i(0))),
                                                        perm.at(static_cast<std::size_t>(e.i(1))));
                                              return e.node("Transpose", {e.in[0]}, {attr_is("perm", perm)});
                                            }}});
  set_onnx(
      rows, "Tensor::permute", {{"Transpose", 13, kOnnxLastOpset, 1, 1, 1, true, transpose_op, nullptr, 0}},
      {{"kten::permute",
        [](OnnxEmit& e) { return e.node("Transpose", {e.in[0]}, {attr_is("perm", e.op.attrs.ints)}); }}});
  set_onnx(rows, "Tensor::narrow",
           {{"Slice", 13, kOnnxLastOpset, 3, 5, 1, true, onnx_slice, nullptr, 0b11110},
            {"Split", 13, kOnnxLastOpset, 1, 2, 1 << 20, true, onnx_split, nullptr, 0b10}},
           {{"kten::narrow", [](OnnxEmit& e) {
               return e.node("Slice",
                             {e.in[0], e.w.ints({e.i(1)}), e.w.ints({e.i(1) + e.i(2)}), e.w.ints({e.i(0)})});
             }}});
  set_onnx(rows, "Tensor::select", {},
           {{"kten::select", [](OnnxEmit& e) {
               return e.node("Gather",
                             {e.in[0], e.w.constant(full({}, static_cast<double>(e.i(1)), cpu(), int64))},
                             {attr_i("axis", e.i(0))});
             }}});
  set_onnx(rows, "Tensor::unsqueeze",
           {{"Unsqueeze", 13, kOnnxLastOpset, 2, 2, 1, true, onnx_unsqueeze, nullptr, 0b10}},
           {{"kten::unsqueeze", [](OnnxEmit& e) {
               return e.node("Unsqueeze", {e.in[0], e.w.ints({e.i(0)})});
             }}});
  set_onnx(rows, "Tensor::squeeze",
           {{"Squeeze", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_squeeze, nullptr, 0b10}},
           {{"kten::squeeze", [](OnnxEmit& e) {
               return e.node("Squeeze", {e.in[0], e.w.ints(e.op.attrs.ints)});
             }}});
  set_onnx(rows, "cat", {{"Concat", 13, kOnnxLastOpset, 1, 1 << 20, 1, true, onnx_concat, nullptr, 0}},
           {{"kten::cat", [](OnnxEmit& e) { return e.node("Concat", e.in, {attr_i("axis", e.i(0))}); }}});
  return rows;
}

void set_onnx(std::vector<OpDef>& rows, std::string_view name, std::vector<OnnxImport> imports,
              std::vector<OnnxExport> exports) {
  for (OpDef& row : rows)
    if (row.name == name) {
      row.onnx_import = std::move(imports);
      row.onnx_export = std::move(exports);
      return;
    }
  fail("kten::ops", "ONNX forms for '", name, "', which the family does not declare");
}

namespace {

std::vector<OpDef> all_ops() {
  std::vector<OpDef> all;
  // One family per line: each op family's file ends with its rows.
  for (std::vector<OpDef> (*family)() : {
           elementwise_ops, unary_math_ops, activation_ops, binary_math_ops, rounding_ops, compare_ops, reduce_ops,
           extremum_ops,
           softmax_ops, attention_ops, indexing_ops, scan_select_ops, linalg_ops, view_ops,
           conv_ops, pad_ops,  // convolutions and padding
           pool_ops, resample_ops,  // pooling and resampling
           norm_ops,  // batch, group and instance normalisation
           scatter_ops,  // graph ops: index_add, scatter_add, scatter_reduce, embedding
       })
    for (OpDef& op : family()) all.push_back(std::move(op));
  std::unordered_set<std::string> names;
  for (const OpDef& op : all)
    if (!names.insert(op.name).second) fail("kten::ops", "the op registry declares '", op.name, "' twice");
  return all;
}

}  // namespace

const std::vector<OpDef>& registry() {
  static const std::vector<OpDef> all = all_ops();
  return all;
}

const OpDef& find_op(std::string_view name) {
  for (const OpDef& op : registry())
    if (op.name == name) return op;
  fail("kten::ops", "no op is registered as '", name, "'");
}

}  // namespace kten::ops
