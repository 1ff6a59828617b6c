// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The op registry (registry.hpp): the families' declarations in one list, looked up by name. The
// tensor core's views and copies (src/core) are declared here, the layer above them.
#include "registry.hpp"

#include <climits>
#include <unordered_set>

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

std::vector<OpDef> view_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real;
  const DTypes any = DTypes::any;
  return {
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
}

namespace {

std::vector<OpDef> all_ops() {
  std::vector<OpDef> all;
  // One family per line: each op family's file ends with its rows.
  for (std::vector<OpDef> (*family)() : {
           elementwise_ops, unary_math_ops, activation_ops, binary_math_ops, compare_ops, reduce_ops, extremum_ops,
           softmax_ops, indexing_ops, linalg_ops, view_ops,
           conv_ops,  // convolutions and padding
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
