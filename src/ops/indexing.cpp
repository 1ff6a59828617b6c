// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Indexing: argmax and argmin (-> int64), index_select and gather (int64 indices), for every dtype. Each
// output element is found or read on its own (one thread per output, inputs read in place through
// their strides), like the elementwise kernels; the kernel checks each index as it reads it
// (index_errors.hpp: no extra pass, no host synchronisation). index_select and gather are
// differentiable: their gradient is index_add / scatter_add into zeros (scatter.cpp), which adds
// repeated indices' gradients in a fixed order; argmax and argmin are not.
#include <cmath>
#include <utility>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/index_errors.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "indexing.hpp"
#include "registry.hpp"
#include "core/runtime_internal.hpp"

namespace kten {
namespace detail {

/// \brief Whether v replaces best as the largest (`smallest`: the smallest): NaN beats every number
/// (so a NaN is found, as torch.argmax and argmin find it), otherwise only a strictly larger
/// (smaller) value, so that ties keep the first index; with `last` an equal value too, so that
/// they keep the last (ONNX's select_last_index). The flags are the same for every thread.
struct ArgPick {
  bool smallest, last;
  template <class T>
  KOKKOS_INLINE_FUNCTION bool operator()(T v, T best) const {
    if (v != v) return best == best || last;
    if (best != best) return false;
    return (smallest ? v < best : v > best) || (last && v == best);
  }
};

/// \brief out[o] = the first (or last) k in [0, len) with the picked x[base + k * step], base the
/// offset of o in x through s (x's strides along the other axes).
template <class T>
struct ArgPickKernel {
  const T* x;
  std::int64_t* out;
  BroadcastIndex s;
  std::int64_t len, step;
  ArgPick beats;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    std::int64_t base, unused;
    s.offsets(o, base, unused);
    const T* p = x + base;
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < len; ++k)
      if (beats(p[k * step], p[best * step])) best = k;
    out[o] = best;
  }
};

/// \brief The whole-tensor pick's second pass over a contiguous x of n elements: part p's best
/// is at p * per_part + part_best[p]; the tail after the parts is scanned element by element.
template <class T>
struct ArgPickPartsKernel {
  const T* x;
  const std::int64_t* part_best;
  std::int64_t* out;
  std::int64_t parts, per_part, n;
  ArgPick beats;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {
    std::int64_t best = part_best[0];
    for (std::int64_t p = 1; p < parts; ++p) {
      const std::int64_t candidate = p * per_part + part_best[p];
      if (beats(x[candidate], x[best])) best = candidate;
    }
    for (std::int64_t i = parts * per_part; i < n; ++i)
      if (beats(x[i], x[best])) best = i;
    out[0] = best;
  }
};

/// \brief out[o] = x[ix + index[ii] * step], (ix, ii) the offsets of o in x (the indexed axis
/// left out) and in the index tensor: index_select and gather. An index outside [0, extent) is
/// reported to `flag` and gives 0. `row` as StridedWalk's: 0, one element per index (a GPU); else a
/// row of the innermost axis per index (the host: one position decode per row).
template <class T>
struct TakeKernel {
  const T* x;
  const std::int64_t* index;
  T* out;
  std::int64_t* flag;
  BroadcastIndex s;
  std::int64_t step, extent, row;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    std::int64_t ix, ii;
    if (row == 0) {
      s.offsets(o, ix, ii);
      const std::int64_t i = index[ii];
      out[o] = index_in_range(flag, i, extent) ? x[ix + i * step] : T(0);
      return;
    }
    s.offsets(o * row, ix, ii);
    const std::int64_t sx = s.stride_a[s.rank - 1], si = s.stride_b[s.rank - 1];
    T* to = out + o * row;
    if (si == 0) {  // one index for the row (index_select, an expanded edge list): a row copy
      const std::int64_t i = index[ii];
      const bool valid = index_in_range(flag, i, extent);
      const T* from = x + ix + (valid ? i * step : 0);
      if (!valid) {
        for (std::int64_t j = 0; j < row; ++j) to[j] = T(0);
      } else if (sx == 1) {
        for (std::int64_t j = 0; j < row; ++j) to[j] = from[j];
      } else {
        for (std::int64_t j = 0; j < row; ++j) to[j] = from[j * sx];
      }
      return;
    }
    for (std::int64_t j = 0; j < row; ++j) {
      const std::int64_t i = index[ii + j * si];
      to[j] = index_in_range(flag, i, extent) ? x[ix + j * sx + i * step] : T(0);
    }
  }
};

namespace {

// x's shape (or strides) without axis a.
Shape without_axis(Shape s, int a) {
  s.erase(s.begin() + a);
  return s;
}

// x's strides with 0 along axis a, where the index tensor supplies the position.
Shape strides_but(const Tensor& x, int a) {
  Shape strides = x.strides();
  strides[a] = 0;
  return strides;
}

// What index_select and gather share: out[o] = x[... index[...] along a ...], for an index of the
// result's shape (index_select's 1-D indices broadcast along the other axes); its gradient adds
// each output's gradient where the forward read it, deterministically (scatter_add into zeros).
Tensor take(const char* label, const Tensor& x, int a, const Tensor& index) {
  const Shape& shape = index.shape();
  IndexCheck check(label, x.device(), index_context("for axis ", a, " of extent ", x.shape()[a], " (x ", x.shape(), ", index ", index.shape(), ")"));
  Tensor out = empty(shape, x.device(), x.dtype());
  const BroadcastIndex s = strided_index(label, shape, strides_but(x, a), index.strides());
  const std::int64_t step = x.strides()[a], extent = x.shape()[a];
  launch_views<Accepts::any>(label, [&](const auto& backend, auto* px, auto* po, const std::int64_t* pi, std::int64_t* flag) {
    using T = std::remove_pointer_t<decltype(po)>;
    const StridedWalk walk = strided_walk<std::decay_t<decltype(backend)>>(s, out.numel());
    for_each_index(label, backend, walk.indices, TakeKernel<T>{px, pi, po, flag, s, step, extent, walk.row}, out.numel());
  }, x, out, Fixed<std::int64_t>{index}, Fixed<std::int64_t>{check.flag()});
  check.launched();
  if (recording(x))  // the index (no gradient) follows x for a trace
    record(label, out, {&x, &index}, [x_shape = x.shape(), a, index = saved(index)](const Tensor& g, const Needs&) {
      return Grads{scatter_add(zeros(x_shape, g.device(), g.dtype()), a, index, g)};
    }, [a] { return ops::OpAttrs::of_ints({a}); });
  return out;
}

}  // namespace
}  // namespace detail

using namespace detail;

Tensor detail::arg_pick(const Tensor& x, int axis, bool keepdim, bool smallest, bool last) {
  const char* label = smallest ? "kten::argmin" : "kten::argmax";
  check_defined(x, label);
  const int a = normalize_axis(label, x, axis);
  const std::int64_t len = x.shape()[a];
  if (len == 0)
    fail<ShapeError>(label, "axis ", axis, " of shape ", x.shape(), " is empty, so it has no ", smallest ? "smallest" : "largest", " element");
  const Shape rest = without_axis(x.shape(), a);
  Shape kept = x.shape();
  kept[a] = 1;
  Tensor out = empty(keepdim ? kept : rest, x.device(), DType::int64);
  const BroadcastIndex s = strided_index(label, rest, without_axis(x.strides(), a), Shape(rest.size(), 0));
  launch_views<Accepts::any>(label, [&](const auto& backend, auto* px, std::int64_t* po) {
    using T = std::remove_pointer_t<decltype(px)>;
    for_each_index(label, backend, out.numel(), ArgPickKernel<T>{px, po, s, len, x.strides()[a], {smallest, last}}, out.numel() * len);
  }, x, Fixed<std::int64_t>{out});
  return out;
}

Tensor argmax(const Tensor& x, int axis, bool keepdim) { return arg_pick(x, axis, keepdim, false, false); }
Tensor argmin(const Tensor& x, int axis, bool keepdim) { return arg_pick(x, axis, keepdim, true, false); }

namespace {
// Two passes over about sqrt(n) parts of about sqrt(n) elements: every part's pick in parallel,
// then one thread over the parts' winners (in order, so the first index still wins).
Tensor arg_pick_all(const Tensor& x_in, bool smallest) {
  const char* label = smallest ? "kten::argmin_all" : "kten::argmax_all";
  check_defined(x_in, label);
  if (x_in.numel() == 0)
    fail<ShapeError>(label, "the tensor is empty (shape ", x_in.shape(), "), so it has no ", smallest ? "smallest" : "largest", " element");
  const Tensor x = x_in.contiguous();  // a view is read through one contiguous copy, as reductions do
  const std::int64_t n = x.numel();
  const auto per_part = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const std::int64_t parts = n / per_part;  // >= 1: per_part <= n
  Tensor part_best = empty({parts}, x.device(), DType::int64), out = empty({}, x.device(), DType::int64);
  const BroadcastIndex s = strided_index(label, {parts}, {per_part}, {0});
  const ArgPick pick{smallest, false};
  launch<Accepts::any>(label, [&](const auto& backend, auto* px, std::int64_t* pb, std::int64_t* po) {
    using T = std::remove_pointer_t<decltype(px)>;
    for_each_index(label, backend, parts, ArgPickKernel<T>{px, pb, s, per_part, 1, pick}, parts * per_part);
    for_each_index(label, backend, 1, ArgPickPartsKernel<T>{px, pb, po, parts, per_part, n, pick}, parts + per_part);
  }, x, Fixed<std::int64_t>{part_best}, Fixed<std::int64_t>{out});
  return out;
}
}  // namespace

Tensor argmax(const Tensor& x) { return arg_pick_all(x, false); }
Tensor argmin(const Tensor& x) { return arg_pick_all(x, true); }

namespace detail {
namespace {
void check_index(const char* label, const Tensor& x, const Tensor& index) {
  check_defined(x, label);
  check_dtype(label, "the index tensor", index, DType::int64, "convert it with .astype(kten::int64)");
  check_same_device(label, x.device(), index.device());
}

Tensor select_along(const char* label, const Tensor& x, int axis, const Tensor& indices) {
  check_index(label, x, indices);
  const int a = normalize_axis(label, x, axis);
  if (indices.ndim() != 1)
    fail<ShapeError>(label, "indices must be 1-D, got shape ", indices.shape(), "; flatten them with .reshape({-1})");
  Shape shape = x.shape(), along(x.ndim(), 1);
  shape[a] = along[a] = indices.numel();
  // One op for a trace, over the 1-D indices themselves (ONNX's Gather), not their broadcast view.
  return traced_as(label, {&x, &indices}, [a] { return ops::OpAttrs::of_ints({a}); },
                   [&] { return take(label, x, a, indices.reshape(along).expand(shape)); });
}
}  // namespace

Tensor select_rows_in_range(const Tensor& x, const Tensor& rows) { return select_along("kten::select_rows", x, 0, rows); }
}  // namespace detail

Tensor index_select(const Tensor& x, int axis, const Tensor& indices) {
  return select_along("kten::index_select", x, axis, indices);
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  constexpr const char* label = "kten::gather";
  check_index(label, x, index);
  const int a = normalize_axis(label, x, axis);
  bool fits = index.ndim() == x.ndim();
  for (int d = 0; fits && d < x.ndim(); ++d) fits = d == a || index.shape()[d] <= x.shape()[d];
  if (!fits)
    fail<ShapeError>(label, "index of shape ", index.shape(), " does not fit x of shape ", x.shape(),
                     " along axis ", axis, "; index needs x's rank and extents no larger than x's on the other axes");
  return take(label, x, a, index);
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> gather_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  Tensor index = c.at(1);
  // Indices known on the host (a dimension of a Shape, a constant) are checked and wrapped there
  // (negative ones count from the end) and picked as views: no device synchronisation, unlike
  // index_select's check of device indices.
  if (c.host.size() > 1 && c.host[1].defined()) {
    std::vector<std::int64_t> v = c.ints(1);
    for (std::int64_t& i : v) {
      if (i < -x.size(axis) || i >= x.size(axis))
        fail<IndexError>("onnx", c.where(), ": index ", i, " is outside extent ", x.size(axis), " of axis ",
                         axis);
      if (i < 0) i += x.size(axis);
    }
    if (c.host[1].ndim() == 0) return {x.select(axis, v[0])};
    if (v.size() <= 64) {
      std::vector<Tensor> picked;
      for (std::int64_t i : v) picked.push_back(x.narrow(axis, i, 1));
      Shape shape(x.shape().begin(), x.shape().begin() + axis);
      shape.insert(shape.end(), c.host[1].shape().begin(), c.host[1].shape().end());
      shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
      return {(v.empty() ? x.narrow(axis, 0, 0) : registered("cat", picked, ops::OpAttrs::of_ints({axis})))
                  .reshape(shape)};
    }
    index = tensor(v, c.host[1].shape(), x.device());
  }
  Shape shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), index.shape().begin(), index.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  const Tensor picked =
      registered("index_select", {x, index.reshape({index.numel()})}, ops::OpAttrs::of_ints({axis}));
  return {picked.reshape(shape)};
}

std::vector<Tensor> gather_elements(OnnxCall& c) {
  const Tensor& x = c.at(0);
  return {gather(x, onnx_axis(c, c.attr_int("axis", 0), x.ndim()), c.at(1))};
}

// ArgMax and ArgMin: axis 0 and keepdims 1 by default; select_last_index picks the last of ties.
std::vector<Tensor> arg_extremum(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  const bool keep = c.attr_int("keepdims", 1) != 0, last = c.attr_int("select_last_index", 0) != 0;
  return {kten::detail::arg_pick(x, axis, keep, c.node.op_type == "ArgMin", last)};
}

}  // namespace

// The registry's rows of this family (registry.hpp). Index tensors (int64) are the second input.
std::vector<OpDef> indexing_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"argmax_axis", "argmax(Tensor,int,bool)", 1, {Domain::distinct}, DTypes::floating, false,
       [](X x, A a) { return argmax(x[0], axis_of(a), a.keepdim); }},
      {"argmax", "argmax(Tensor)", 1, {Domain::distinct}, DTypes::floating, false, [](X x, A) { return argmax(x[0]); }},
      {"argmin_axis", "argmin(Tensor,int,bool)", 1, {Domain::distinct}, DTypes::floating, false,
       [](X x, A a) { return argmin(x[0], axis_of(a), a.keepdim); }},
      {"argmin", "argmin(Tensor)", 1, {Domain::distinct}, DTypes::floating, false, [](X x, A) { return argmin(x[0]); }},
      {"index_select", "index_select(Tensor,int,Tensor)", 2, {Domain::real}, DTypes::any, true,
       [](X x, A a) { return index_select(x[0], axis_of(a), x[1]); }},
      {"gather", "gather(Tensor,int,Tensor)", 2, {Domain::real}, DTypes::any, true,
       [](X x, A a) { return gather(x[0], axis_of(a), x[1]); }},
  };
  // (argmax and argmin have no gradient and record nothing on the tape: nothing to export)
  set_onnx(rows, "argmax_axis", {{"ArgMax", 13, kOnnxLastOpset, 1, 1, 1, true, arg_extremum, nullptr, 0}}, {});
  set_onnx(rows, "argmin_axis", {{"ArgMin", 13, kOnnxLastOpset, 1, 1, 1, true, arg_extremum, nullptr, 0}}, {});
  set_onnx(rows, "index_select", {{"Gather", 13, kOnnxLastOpset, 2, 2, 1, true, gather_op, nullptr, 0b10}},
           {{"kten::index_select", [](OnnxEmit& e) {
               return e.node("Gather", {e.in[0], e.in.at(1)}, {attr_i("axis", e.i(0))});
             }}});
  set_onnx(rows, "gather",
           {{"GatherElements", 13, kOnnxLastOpset, 2, 2, 1, true, gather_elements, nullptr, 0}},
           {{"kten::gather", [](OnnxEmit& e) {
               return e.node("GatherElements", {e.in[0], e.in.at(1)}, {attr_i("axis", e.i(0))});
             }}});
  return rows;
}

}  // namespace kten::ops
