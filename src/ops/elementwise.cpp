// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Elementwise operations: fill, dtype conversion, the arithmetic operators (with tensors and with
// scalars) and fma, and the broadcasting machinery that unary_math.cpp, activations.cpp and
// binary_math.cpp share (one file per family keeps each translation unit small enough to build
// in parallel). All are bandwidth-bound: each element is read and written once, index i goes
// to adjacent threads (coalesced on GPUs, contiguous and vectorisable on CPUs).
#include <algorithm>
#include <string>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

template <class T>
struct FillKernel {
  T* out;
  T value;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = value; }
};

template <class From, class To>
struct ConvertKernel {
  const From* x;
  To* out;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = convert<To>(x[i]); }
};

template <class T>
struct FmaKernel {
  const T* a;
  const T* b;
  const T* c;
  T* out;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = compat::fma(a[i], b[i], c[i]); }
};

Broadcast broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  Broadcast bc;
  bc.same_shape = (a == b);
  if (bc.same_shape) {
    bc.shape = a;
    return bc;
  }
  const int rank = static_cast<int>(std::max(a.size(), b.size()));
  bc.shape.assign(rank, 1);
  if (rank > kMaxRank)
    fail<ShapeError>(op, "broadcasting supports up to ", kMaxRank, " dimensions, got ", a, " and ", b);
  for (int d = rank - 1; d >= 0; --d) {
    const int da = d - (rank - static_cast<int>(a.size()));
    const int db = d - (rank - static_cast<int>(b.size()));
    const std::int64_t ea = da >= 0 ? a[da] : 1;
    const std::int64_t eb = db >= 0 ? b[db] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      fail<ShapeError>(op, "shapes ", a, " and ", b, " cannot be broadcast (axis ", d, ": ", ea, " vs ", eb,
                       "); extents must match or be 1");
    const std::int64_t e = ea == 1 ? eb : ea;
    bc.shape[d] = e;
  }
  return bc;
}

Shape broadcast_strides(const Tensor& x, const Shape& out) {
  const int rank = static_cast<int>(out.size()), lead = rank - x.ndim();
  Shape strides(out.size(), 0);
  for (int d = lead; d < rank; ++d)
    strides[d] = x.shape()[d - lead] == 1 ? 0 : x.strides()[d - lead];
  return strides;
}

BroadcastIndex strided_index(const char* op, const Shape& shape, const Shape& strides_a, const Shape& strides_b) {
  std::int64_t extent[kMaxRank], sa[kMaxRank], sb[kMaxRank];  // innermost first
  int rank = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (rank > 0 && strides_a[d] == sa[rank - 1] * extent[rank - 1] &&
        strides_b[d] == sb[rank - 1] * extent[rank - 1]) {
      extent[rank - 1] *= shape[d];  // fits: the product of extents is the element count
      continue;
    }
    if (rank == kMaxRank)
      fail<ShapeError>(op, "strided operands of shape ", shape, " need more than ", kMaxRank,
                       " axes to index; pass .contiguous() copies");
    extent[rank] = shape[d];
    sa[rank] = strides_a[d];
    sb[rank] = strides_b[d];
    ++rank;
  }
  BroadcastIndex index;
  index.rank = rank;
  std::int64_t numel = 1;  // the largest flat index divided, plus one
  for (int r = 0; r < rank; ++r) {
    index.extent[rank - 1 - r] = extent[r] == 0 ? 1 : extent[r];  // no kernel runs over 0 elements
    index.stride_a[rank - 1 - r] = sa[r];
    index.stride_b[rank - 1 - r] = sb[r];
    const std::int64_t e = index.extent[rank - 1 - r];
    numel = numel > INT64_MAX / e ? INT64_MAX : numel * e;  // (0, 2^40, 2^40): no elements, huge extents
  }
  for (int d = 0; d < rank; ++d) index.by[d] = FastDiv(index.extent[d], numel);
  return index;
}

void strided_copy(const char* op, const Tensor& src, const Tensor& dst) {
  check_compatible(op, src, dst);
  const BroadcastIndex index = strided_index(op, src.shape(), src.strides(), dst.strides());
  launch_views<Accepts::any>(op, [&](const auto& backend, auto* x, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    const StridedWalk walk = strided_walk<std::decay_t<decltype(backend)>>(index, src.numel());
    for_each_index(op, backend, walk.indices, StridedCopyKernel<T>{x, o, index, walk.row}, src.numel());
  }, src, dst);
}

void fill(const Tensor& t, double value) {
  launch_each_index<Accepts::any>("kten::fill", t.numel(), [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    return FillKernel<T>{out, convert<T>(value)};
  }, t);
}

template <class T>
struct ScaleKernel {
  T* t;
  const T* factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { t[i] = t[i] * factor[0]; }
};

void scale_in_place(const Tensor& t, const Tensor& factor) {
  if (factor.numel() != 1) fail<ShapeError>("kten::scale", "the factor must hold one element, got shape ", factor.shape());
  launch_each_index("kten::scale", t.numel(), [](auto* data, auto* f) {
    return ScaleKernel<std::remove_pointer_t<decltype(data)>>{data, f};
  }, t, factor);
}

template <template <class> class Op>
Tensor scalar_map(const char* label, const Tensor& a, double s) {
  return elementwise_unary(label, a, [s](auto zero) { return Op<decltype(zero)>{static_cast<decltype(zero)>(s)}; });
}

}  // namespace detail

using namespace detail;

// Each operation's gradient sits beside it: recorded only when an input requires grad (autograd.hpp).

Tensor operator+(const Tensor& a, const Tensor& b) {
  Tensor out = elementwise_binary("kten::add", a, b, Add{});
  if (recording(a, b))
    record("kten::add", out, {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Needs& needs) {
      return Grads{needs[0] ? sum_to(g, sa) : Tensor(), needs[1] ? sum_to(g, sb) : Tensor()};
    });
  return out;
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  Tensor out = elementwise_binary("kten::sub", a, b, Sub{});
  if (recording(a, b))
    record("kten::sub", out, {&a, &b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Needs& needs) {
      return Grads{needs[0] ? sum_to(g, sa) : Tensor(), needs[1] ? sum_to(-g, sb) : Tensor()};
    });
  return out;
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  Tensor out = elementwise_binary("kten::mul", a, b, Mul{});
  if (recording(a, b))
    record("kten::mul", out, {&a, &b}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      return Grads{needs[0] ? sum_to(g * b, a.shape()) : Tensor(), needs[1] ? sum_to(g * a, b.shape()) : Tensor()};
    });
  return out;
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  Tensor out = elementwise_binary("kten::div", a, b, Div{});
  if (recording(a, b))
    record("kten::div", out, {&a, &b}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      const Tensor ga = g / b;  // d(a/b)/db = -(a/b)/b: both from g / b
      return Grads{needs[0] ? sum_to(ga, a.shape()) : Tensor(), needs[1] ? sum_to(-(ga * a) / b, b.shape()) : Tensor()};
    });
  return out;
}

namespace {
// The gradient of x -> x + s, x - s: g itself; of x -> s * x: g * s. A trace sees the scalar s.
Tensor scaled_gradient(const char* name, Tensor out, const Tensor& x, double scale, double s) {
  if (recording(x))
    record(name, out, {&x}, [scale](const Tensor& g, const Needs&) { return Grads{scale == 1.0 ? g : g * scale}; },
           [s] { return ops::OpAttrs::of_reals({s}); });
  return out;
}
}  // namespace

Tensor operator+(const Tensor& a, double s) { return scaled_gradient("kten::add_scalar", scalar_map<AddScalar>("kten::add_scalar", a, s), a, 1.0, s); }
Tensor operator+(double s, const Tensor& a) { return a + s; }
Tensor operator-(const Tensor& a, double s) { return scaled_gradient("kten::sub_scalar", scalar_map<AddScalar>("kten::sub_scalar", a, -s), a, 1.0, s); }
Tensor operator-(double s, const Tensor& a) { return scaled_gradient("kten::rsub_scalar", scalar_map<ScalarSub>("kten::rsub_scalar", a, s), a, -1.0, s); }
Tensor operator*(const Tensor& a, double s) { return scaled_gradient("kten::mul_scalar", scalar_map<MulScalar>("kten::mul_scalar", a, s), a, s, s); }
Tensor operator*(double s, const Tensor& a) { return a * s; }
Tensor operator/(const Tensor& a, double s) { return scaled_gradient("kten::div_scalar", scalar_map<DivScalar>("kten::div_scalar", a, s), a, 1.0 / s, s); }
Tensor operator/(double s, const Tensor& a) {
  Tensor out = scalar_map<ScalarDiv>("kten::rdiv_scalar", a, s);
  if (recording(a))
    record("kten::rdiv_scalar", out, {&a}, [a = saved(a), s](const Tensor& g, const Needs&) { return Grads{g * -s / (a * a)}; },
           [s] { return ops::OpAttrs::of_reals({s}); });
  return out;
}
Tensor operator-(const Tensor& a) { return neg(a); }

// fma reads strided operands through contiguous() copies (counted in stats()), not through strides.
Tensor fma(const Tensor& a_in, const Tensor& b_in, const Tensor& c_in) {
  constexpr const char* label = "kten::fma";
  check_compatible(label, a_in, b_in);
  check_compatible(label, a_in, c_in);
  const Tensor a = a_in.contiguous(), b = b_in.contiguous(), c = c_in.contiguous();
  if (a.shape() != b.shape() || a.shape() != c.shape())
    fail<ShapeError>(label, "shapes ", a.shape(), ", ", b.shape(), " and ", c.shape(),
                     " differ; fma needs equal shapes (use a * b + c to broadcast)");
  Tensor out = empty(a.shape(), a.device(), a.dtype());
  launch_each_index(label, a.numel(), [](auto* x, auto* y, auto* z, auto* o) {
    return FmaKernel<std::remove_pointer_t<decltype(o)>>{x, y, z, o};
  }, a, b, c, out);
  if (recording(a_in, b_in, c_in))
    record(label, out, {&a_in, &b_in, &c_in}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      return Grads{needs[0] ? g * b : Tensor(), needs[1] ? g * a : Tensor(), g};
    });
  return out;
}

Tensor Tensor::astype(DType dtype) const {
  check_defined(*this, "astype()");
  if (dtype == this->dtype()) return *this;
  Tensor out = empty(shape(), device(), dtype);
  constexpr const char* label = "kten::astype";
  const Tensor x = contiguous();  // a view converts through one contiguous copy
  launch_conversion(label, [&](const auto& backend, auto* from, auto* to) {
    using From = std::remove_pointer_t<decltype(from)>;
    using To = std::remove_pointer_t<decltype(to)>;
    for_each_index(label, backend, numel(), ConvertKernel<From, To>{from, to});
  }, x, out);
  if (is_floating(dtype) && recording(*this))
    record(label, out, {this}, [from = this->dtype()](const Tensor& g, const Needs&) { return Grads{g.astype(from)}; });
  return out;
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

constexpr char k_add[] = "add", k_sub[] = "sub", k_mul[] = "mul", k_div[] = "div";

std::vector<Tensor> onnx_cast(OnnxCall& c) {
  DType dtype;
  onnx_element_dtype(static_cast<int>(c.attr_int("to", 1)), dtype);  // checked at load
  return {registered("Tensor::astype", {c.at(0)}, [&] {
    ops::OpAttrs a;
    a.dtype = dtype;
    return a;
  }())};
}

void check_cast(const OnnxNode& n) {
  const auto it = n.attributes.find("to");
  DType dtype;
  if (it == n.attributes.end() || !onnx_element_dtype(static_cast<int>(it->second.i), dtype))
    fail<FormatError>("onnx", "node '", n.name, "' (Cast): casting to ONNX element type ",
                      it == n.attributes.end() ? -1 : it->second.i,
                      " is not supported (float, double, int64, bool)");
}

std::vector<Tensor> onnx_reciprocal(OnnxCall& c) { return {registered("rdiv_scalar", {c.at(0)}, OpAttrs::of_reals({1}))}; }

}  // namespace

// The registry's rows of this family (registry.hpp): each public operation above, once.
std::vector<OpDef> elementwise_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, nonzero = Domain::nonzero;
  std::vector<OpDef> rows = {
      {"add", "operator+(Tensor,Tensor)", 2, {real}, DTypes::floating, true, [](X x, A) { return x[0] + x[1]; }},
      {"sub", "operator-(Tensor,Tensor)", 2, {real}, DTypes::floating, true, [](X x, A) { return x[0] - x[1]; }},
      {"mul", "operator*(Tensor,Tensor)", 2, {real}, DTypes::floating, true, [](X x, A) { return x[0] * x[1]; }},
      {"div", "operator/(Tensor,Tensor)", 2, {real, nonzero}, DTypes::floating, true, [](X x, A) { return x[0] / x[1]; }},
      {"add_scalar", "operator+(Tensor,double)", 1, {real}, DTypes::floating, true, [](X x, A a) { return x[0] + a.reals.at(0); }},
      {"radd_scalar", "operator+(double,Tensor)", 1, {real}, DTypes::floating, true, [](X x, A a) { return a.reals.at(0) + x[0]; }},
      {"sub_scalar", "operator-(Tensor,double)", 1, {real}, DTypes::floating, true, [](X x, A a) { return x[0] - a.reals.at(0); }},
      {"rsub_scalar", "operator-(double,Tensor)", 1, {real}, DTypes::floating, true, [](X x, A a) { return a.reals.at(0) - x[0]; }},
      {"mul_scalar", "operator*(Tensor,double)", 1, {real}, DTypes::floating, true, [](X x, A a) { return x[0] * a.reals.at(0); }},
      {"rmul_scalar", "operator*(double,Tensor)", 1, {real}, DTypes::floating, true, [](X x, A a) { return a.reals.at(0) * x[0]; }},
      {"div_scalar", "operator/(Tensor,double)", 1, {real}, DTypes::floating, true, [](X x, A a) { return x[0] / a.reals.at(0); }},
      {"rdiv_scalar", "operator/(double,Tensor)", 1, {nonzero}, DTypes::floating, true, [](X x, A a) { return a.reals.at(0) / x[0]; }},
      {"negate", "operator-(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return -x[0]; }},
      {"fma", "fma(Tensor,Tensor,Tensor)", 3, {real}, DTypes::floating, true, [](X x, A) { return fma(x[0], x[1], x[2]); }},
      {"Tensor::astype", "Tensor::astype(DType)", 1, {real}, DTypes::any, true, [](X x, A a) { return x[0].astype(a.dtype); }},
  };
  set_onnx(rows, "add", {{"Add", 7, kOnnxLastOpset, 2, 2, 1, true, onnx_binary<k_add>, nullptr, 0}},
           {onnx_node_of("kten::add", "Add")});
  set_onnx(rows, "sub", {{"Sub", 7, kOnnxLastOpset, 2, 2, 1, true, onnx_binary<k_sub>, nullptr, 0}},
           {onnx_node_of("kten::sub", "Sub")});
  set_onnx(rows, "mul",
           {{"Mul", 7, kOnnxLastOpset, 2, 2, 1, true, onnx_binary<k_mul>, nullptr, 0},
            // a product reduction as halves multiplied (reduce.cpp's onnx_reduce)
            {"ReduceProd", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}},
           {onnx_node_of("kten::mul", "Mul")});
  set_onnx(rows, "div", {{"Div", 7, kOnnxLastOpset, 2, 2, 1, true, onnx_binary<k_div>, nullptr, 0}},
           {onnx_node_of("kten::div", "Div")});
  set_onnx(rows, "add_scalar", {}, {onnx_with_scalar("kten::add_scalar", "Add")});
  set_onnx(rows, "sub_scalar", {}, {onnx_with_scalar("kten::sub_scalar", "Sub")});
  set_onnx(rows, "rsub_scalar", {}, {onnx_with_scalar("kten::rsub_scalar", "Sub", true)});
  set_onnx(rows, "mul_scalar", {}, {onnx_with_scalar("kten::mul_scalar", "Mul")});
  set_onnx(rows, "div_scalar", {}, {onnx_with_scalar("kten::div_scalar", "Div")});
  set_onnx(rows, "rdiv_scalar", {{"Reciprocal", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_reciprocal, nullptr, 0}},
           {onnx_with_scalar("kten::rdiv_scalar", "Div", true)});
  set_onnx(rows, "fma", {}, {{"kten::fma", [](OnnxEmit& e) {
                                return e.node("Add", {e.node("Mul", {e.in[0], e.in[1]}), e.in[2]});
                              }}});
  set_onnx(rows, "Tensor::astype", {{"Cast", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_cast, check_cast, 0}},
           {{"kten::astype", [](OnnxEmit& e) {
               return e.node("Cast", {e.in[0]}, {attr_i("to", onnx_element_code(e.op.out.dtype()))});
             }}});
  return rows;
}

}  // namespace kten::ops
