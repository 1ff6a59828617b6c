// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Walks along one axis, one thread per line (every position of the other axes): cumsum (a running
// sum, float32 accumulated in float64 as PyTorch's CPU does) and topk (the k largest or smallest,
// kept sorted by insertion: O(extent x k) per line). Bound by one thread's walk of its line: meant
// for the short axes these ops meet in models (positions, masks, a class axis), not for sorting
// millions. The input is read through its strides; the outputs are new and contiguous. Gradients
// are written in differentiable ops: cumsum's is a cumsum the other way, topk's a scatter_add.
#include <tuple>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "ops/views.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

/// \brief The running sum of line o: out[j] = x[0] + ... + x[j] (`exclusive`: up to x[j - 1]; 0
/// first), from the end with `reverse`. bases: line o's offsets in x and in out.
template <class T>
struct CumsumKernel {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  const T* x;
  T* out;
  BroadcastIndex bases;
  std::int64_t len, x_step, out_step;
  bool exclusive, reverse;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    std::int64_t bx, bo;
    bases.offsets(o, bx, bo);
    Acc acc = 0;
    for (std::int64_t k = 0; k < len; ++k) {
      const std::int64_t j = reverse ? len - 1 - k : k;
      const Acc v = x[bx + j * x_step];
      if (!exclusive) acc += v;
      out[bo + j * out_step] = T(acc);
      if (exclusive) acc += v;
    }
  }
};

/// \brief Whether v goes before kept in a topk: larger (`largest`) or smaller, NaN counting as the
/// largest (torch.topk's order); equal values keep their order, so the lower index comes first.
struct TopkBefore {
  bool largest;
  template <class T>
  KOKKOS_INLINE_FUNCTION bool operator()(T v, T kept) const {
    if (largest) return v > kept || (v != v && kept == kept);
    return v < kept || (v == v && kept != kept);
  }
};

/// \brief Line o's k first elements in TopkBefore's order, by insertion into the output line.
template <class T>
struct TopkKernel {
  const T* x;
  T* values;
  std::int64_t* indices;
  BroadcastIndex bases;
  std::int64_t len, k, x_step, out_step;
  TopkBefore before;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    std::int64_t bx, bo;
    bases.offsets(o, bx, bo);
    T* v = values + bo;
    std::int64_t* i = indices + bo;
    std::int64_t kept = 0;
    for (std::int64_t j = 0; j < len; ++j) {
      const T e = x[bx + j * x_step];
      if (kept == k && !before(e, v[(k - 1) * out_step])) continue;
      std::int64_t p = kept < k ? kept++ : k - 1;
      for (; p > 0 && before(e, v[(p - 1) * out_step]); --p) {
        v[p * out_step] = v[(p - 1) * out_step];
        i[p * out_step] = i[(p - 1) * out_step];
      }
      v[p * out_step] = e;
      i[p * out_step] = j;
    }
  }
};

namespace {

Shape without(Shape s, int a) {
  s.erase(s.begin() + a);
  return s;
}

// The lines of x along axis a and of a contiguous output of shape `out`: their offsets.
BroadcastIndex line_bases(const char* label, const Tensor& x, const Shape& out, int a) {
  return strided_index(label, without(x.shape(), a), without(x.strides(), a), without(contiguous_strides(out), a));
}

}  // namespace

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  constexpr const char* label = "kten::cumsum";
  check_defined(x, label);
  const int a = normalize_axis(label, x, axis);
  Tensor out = empty(x.shape(), x.device(), x.dtype());
  const BroadcastIndex bases = line_bases(label, x, x.shape(), a);
  const std::int64_t len = x.shape()[a], lines = len == 0 ? 0 : x.numel() / len;
  const std::int64_t out_step = contiguous_strides(x.shape())[a];
  launch_views(label, [&](const auto& backend, auto* px, auto* po) {
    using T = std::remove_pointer_t<decltype(px)>;
    for_each_index(label, backend, lines, CumsumKernel<T>{px, po, bases, len, x.strides()[a], out_step, exclusive, reverse},
                   x.numel());
  }, x, out);
  if (recording(x))  // each input adds to the outputs after it (before it, reversed): the sum of those gradients
    record(label, out, {&x}, [a, exclusive, reverse](const Tensor& g, const Needs&) {
      return Grads{cumsum(g, a, exclusive, !reverse)};
    }, [a, exclusive, reverse] { return ops::OpAttrs::of_ints({a, exclusive, reverse}); });
  return out;
}

}  // namespace detail

Tensor cumsum(const Tensor& x, int axis) { return detail::cumsum(x, axis, false, false); }

std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, int axis, bool largest, bool sorted) {
  using namespace detail;
  constexpr const char* label = "kten::topk";
  static_cast<void>(sorted);  // always sorted: the insertion keeps the order at no extra cost
  check_defined(x, label);
  const int a = normalize_axis(label, x, axis);
  const std::int64_t len = x.shape()[a];
  if (k < 0 || k > len)
    fail<ShapeError>(label, "k = ", k, " is outside [0, ", len, "], the extent of axis ", axis, " of ", x.shape());
  Shape shape = x.shape();
  shape[a] = k;
  Tensor values = empty(shape, x.device(), x.dtype()), indices = empty(shape, x.device(), DType::int64);
  const BroadcastIndex bases = line_bases(label, x, shape, a);
  const std::int64_t lines = k == 0 ? 0 : values.numel() / k, out_step = contiguous_strides(shape)[a];
  launch_views(label, [&](const auto& backend, auto* px, auto* pv, std::int64_t* pi) {
    using T = std::remove_pointer_t<decltype(px)>;
    for_each_index(label, backend, lines, TopkKernel<T>{px, pv, pi, bases, len, k, x.strides()[a], out_step, {largest}},
                   lines * len * (k > 0 ? k : 1));
  }, x, values, Fixed<std::int64_t>{indices});
  if (recording(x))  // each value's gradient goes back where it came from
    record(label, values, {&x}, [shape = x.shape(), a, indices = saved(indices)](const Tensor& g, const Needs&) {
      return Grads{scatter_add(zeros(shape, g.device(), g.dtype()), a, indices, g)};
    }, [k, a, largest] { return ops::OpAttrs::of_ints({k, a, largest}); });
  return {values, indices};
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

// CumSum: the axis a one-value input; exclusive and reverse attributes (0 or 1). int64 runs in
// float64 (exact below 2^53).
void check_cumsum(const OnnxNode& n) {
  check_flag(n, "exclusive", 0);
  check_flag(n, "reverse", 0);
}

std::vector<Tensor> cumsum_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const OpAttrs attrs = OpAttrs::of_ints({onnx_axis(c, c.one_int(1, "the axis"), x.ndim()), c.attr_int("exclusive", 0), c.attr_int("reverse", 0)});
  return {onnx_numeric({x}, [&](const std::vector<Tensor>& v) { return registered("cumsum", v, attrs); })};
}

// TopK: k a one-value input; values and int64 indices; largest (1) or smallest, always sorted.
void check_topk(const OnnxNode& n) {
  check_flag(n, "largest", 1);
  check_flag(n, "sorted", 1);
}

std::vector<Tensor> topk_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const std::int64_t k = c.one_int(1, "K");
  const int axis = onnx_axis(c, c.attr_int("axis", -1), x.ndim());
  const bool wide = x.dtype() == int64;  // int64 through float64, as onnx_numeric
  auto [values, indices] = topk(wide ? x.astype(float64) : x, k, axis, c.attr_int("largest", 1) != 0);
  return {wide ? values.astype(int64) : values, indices};
}

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> scan_select_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      // ints: axis, and (ONNX's) exclusive and reverse
      {"cumsum", "cumsum(Tensor,int)", 1, {Domain::real}, DTypes::floating, true, [](X x, A a) {
         return kten::detail::cumsum(x[0], axis_of(a), a.ints.size() > 1 && a.ints[1] != 0, a.ints.size() > 2 && a.ints[2] != 0);
       }},
      // ints: k, axis, largest; the values (the indices are topk's second result)
      {"topk", "topk(Tensor,int64_t,int,bool,bool)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { return std::get<0>(topk(x[0], a.ints.at(0), axis_of(a, 1), a.ints.at(2) != 0)); }},
  };
  set_onnx(rows, "cumsum", {{"CumSum", 14, kOnnxLastOpset, 2, 2, 1, true, cumsum_op, check_cumsum, 0b10}},
           {{"kten::cumsum", [](OnnxEmit& e) {
               return e.node("CumSum", {e.in[0], e.w.ints({e.i(0)})}, {attr_i("exclusive", e.i(1)), attr_i("reverse", e.i(2))});
             }}});
  set_onnx(rows, "topk", {{"TopK", 11, kOnnxLastOpset, 2, 2, 2, true, topk_op, check_topk, 0b10}},
           {{"kten::topk", [](OnnxEmit& e) {
               return e.node("TopK", {e.in[0], e.w.ints({e.i(0)})}, {attr_i("axis", e.i(1)), attr_i("largest", e.i(2))}, 2);
             }}});
  return rows;
}

}  // namespace kten::ops
