// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Comparisons (eq ne lt le gt ge, tensor with tensor or with a scalar) -> boolean, and where().
// ONNX's logic (Not, And, Or, Xor) and Trilu load as these.
// Elementwise and bandwidth-bound like the arithmetic: comparisons are the broadcasting binary
// kernels of elementwise.hpp with a bool result, for every dtype. NaN follows IEEE: it compares
// false, except ne (true). Not differentiable.
//
// The six comparisons share one functor that takes the comparison as a run-time value: one kernel
// per dtype, backend and operand layout instead of six. The branch is the same for every thread
// (uniform, so free on a GPU; hoisted out of the loop on a CPU) and the kernel is bound by memory,
// not by the compare; six functors made this the build's second-slowest file (823 s of nvcc).
#include <algorithm>
#include <cmath>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

enum class Comparison { eq, ne, lt, le, gt, ge };

/// \brief a `op` b for the comparison chosen at run time (IEEE: NaN compares false except by ne).
struct Compare {
  Comparison op;
  template <class T>
  KOKKOS_INLINE_FUNCTION bool operator()(T a, T b) const {
    switch (op) {
      case Comparison::eq: return a == b;
      case Comparison::ne: return a != b;
      case Comparison::lt: return a < b;
      case Comparison::le: return a <= b;
      case Comparison::gt: return a > b;
      default: return a >= b;
    }
  }
};

/// \brief op(x, s) for a scalar s already of x's element type.
template <class T>
struct CompareScalar {
  T s;
  Compare compare;
  KOKKOS_INLINE_FUNCTION bool operator()(T x) const { return compare(x, s); }
};

/// \brief out[i] = cond[ic] ? a[ia] : b[ib], each operand read through its own (broadcast) strides.
/// Three operands take two indexes of the flat output index: (cond, a) and (b, nothing).
template <class T>
struct WhereKernel {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  BroadcastIndex cond_a, b_only;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t ic, ia, ib, unused;
    cond_a.offsets(i, ic, ia);
    b_only.offsets(i, ib, unused);
    out[i] = cond[ic] ? a[ia] : b[ib];
  }
};

constexpr const char* where_label = "kten::where";

// A comparison has no gradient, so the tape records none; a trace still needs the ones that read
// what it follows (a condition computed from the input), or it would freeze them.
void trace_comparison(const char* label, const Tensor& out, const Tensor& a, const Tensor* b, double s) {
  if (active_tracer && grad_mode_enabled && (a.requires_grad() || (b && b->requires_grad()))) {
    std::vector<const Tensor*> inputs{&a};
    if (b) inputs.push_back(b);
    active_tracer->op(label, out, inputs, b ? ops::OpAttrs{} : ops::OpAttrs::of_reals({s}));
  }
}

Tensor compare(const char* label, Comparison op, const Tensor& a, const Tensor& b) {
  Tensor out = elementwise_binary<bool, Accepts::any>(label, a, b, Compare{op});
  trace_comparison(label, out, a, &b, 0);
  return out;
}

// The scalar becomes an element of x's dtype; for int64 and boolean only when it is one exactly,
// so lt(labels, 0.5) is refused rather than silently lt(labels, 0).
Tensor compare(const char* label, Comparison op, const Tensor& x, double s) {
  check_defined(x, label);
  const bool exact = x.dtype() == DType::int64 ? s >= -0x1p63 && s < 0x1p63 && std::trunc(s) == s
                     : x.dtype() == DType::boolean ? s == 0 || s == 1
                                                   : true;
  if (!exact)
    fail<DTypeError>(label, "compares a ", x.dtype(), " tensor with ", s, ", which is no ", x.dtype(), " value; compare with ",
                     x.dtype() == DType::int64 ? "an integer" : "0 or 1", ", or compare a float copy: x.astype(kten::float64)");
  Tensor out = elementwise_unary<bool, Accepts::any>(label, x, [s, op](auto zero) {
    using T = decltype(zero);
    return CompareScalar<T>{convert<T>(s), Compare{op}};
  });
  trace_comparison(label, out, x, nullptr, s);
  return out;
}

}  // namespace detail

using namespace detail;

Tensor eq(const Tensor& a, const Tensor& b) { return compare("kten::eq", Comparison::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("kten::ne", Comparison::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("kten::lt", Comparison::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("kten::le", Comparison::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("kten::gt", Comparison::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("kten::ge", Comparison::ge, a, b); }
Tensor eq(const Tensor& a, double s) { return compare("kten::eq_scalar", Comparison::eq, a, s); }
Tensor ne(const Tensor& a, double s) { return compare("kten::ne_scalar", Comparison::ne, a, s); }
Tensor lt(const Tensor& a, double s) { return compare("kten::lt_scalar", Comparison::lt, a, s); }
Tensor le(const Tensor& a, double s) { return compare("kten::le_scalar", Comparison::le, a, s); }
Tensor gt(const Tensor& a, double s) { return compare("kten::gt_scalar", Comparison::gt, a, s); }
Tensor ge(const Tensor& a, double s) { return compare("kten::ge_scalar", Comparison::ge, a, s); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  constexpr const char* label = where_label;
  check_dtype(label, "the condition", cond, DType::boolean,
              "make one with a comparison, e.g. kten::gt(x, 0), or with x.astype(kten::boolean)");
  check_compatible(label, a, b);
  const Shape shape = broadcast_shapes(label, broadcast_shapes(label, cond.shape(), a.shape()).shape, b.shape()).shape;
  Tensor out = empty(shape, a.device(), a.dtype());
  const BroadcastIndex cond_a = strided_index(label, shape, broadcast_strides(cond, shape), broadcast_strides(a, shape));
  const BroadcastIndex b_only = strided_index(label, shape, broadcast_strides(b, shape), Shape(shape.size(), 0));
  launch_views<Accepts::any>(label, [&](const auto& backend, auto* pa, auto* pb, auto* po, const bool* pc) {
    using T = std::remove_pointer_t<decltype(po)>;
    for_each_index(label, backend, out.numel(), WhereKernel<T>{pc, pa, pb, po, cond_a, b_only});
  }, a, b, out, Fixed<bool>{cond});
  if (recording(a, b))  // the gradient goes where each element came from; the condition follows, for a trace
    record(label, out, {&a, &b, &cond}, [cond = saved(cond), sa = a.shape(), sb = b.shape()](const Tensor& g, const Needs& needs) {
      const Tensor zero = zeros({}, g.device(), g.dtype());
      return Grads{needs[0] ? sum_to(where(cond, g, zero), sa) : Tensor(), needs[1] ? sum_to(where(cond, zero, g), sb) : Tensor()};
    });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  check_defined(a, where_label);
  check_scalar_fits(where_label, b, a.dtype());
  return where(cond, a, full({}, b, a.device(), a.dtype()));
}

Tensor where(const Tensor& cond, double a, const Tensor& b) {
  check_defined(b, where_label);
  check_scalar_fits(where_label, a, b.dtype());
  return where(cond, full({}, a, b.device(), b.dtype()), b);
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> where_op(OnnxCall& c) { return {registered("where", {c.at(0), c.at(1), c.at(2)})}; }

// Trilu: x's upper (upper = 1) or lower triangle of its last two axes, from diagonal k on (column
// minus row >= k, or <= k), zero elsewhere: where() over a mask made of two ranges.
std::vector<Tensor> trilu(OnnxCall& c) {
  const Tensor& x = c.at(0);
  if (x.ndim() < 2) fail<ShapeError>("onnx", c.where(), ": the input must have at least 2 axes, not ", x.shape());
  const std::int64_t k = c.has(1) ? c.one_int(1, "k") : 0;
  const std::int64_t rows = x.size(-2), cols = x.size(-1);
  // float64 holds every difference of two positions exactly; k beyond them clamps without changing the mask
  const double diagonal = static_cast<double>(std::clamp<std::int64_t>(k, -rows - 1, cols + 1));
  const Tensor column_minus_row = arange(0, static_cast<double>(cols), 1, x.device(), float64).reshape({1, cols}) -
                                  arange(0, static_cast<double>(rows), 1, x.device(), float64).reshape({rows, 1});
  const Tensor keep = c.attr_int("upper", 1) != 0 ? ge(column_minus_row, diagonal) : le(column_minus_row, diagonal);
  return {registered("where_scalar_b", {keep, x}, OpAttrs::of_reals({0}))};
}

template <const char* Name>
std::vector<Tensor> comparison(OnnxCall& c) { return {registered(Name, {c.at(0), c.at(1)})}; }

constexpr char k_eq[] = "eq", k_lt[] = "lt", k_le[] = "le", k_gt[] = "gt", k_ge[] = "ge";

// ONNX's logic on booleans, as comparisons and where(): not a = (a == false), a and b = (a ? b :
// false), a or b = (a ? true : b), a xor b = (a != b).
void check_booleans(const OnnxCall& c) {
  for (const Tensor& t : c.in)
    if (t.dtype() != boolean) fail<DTypeError>("onnx", c.where(), ": takes booleans, not ", t.dtype());
}
std::vector<Tensor> not_op(OnnxCall& c) {
  check_booleans(c);
  return {registered("eq_scalar", {c.at(0)}, OpAttrs::of_reals({0}))};
}
std::vector<Tensor> and_op(OnnxCall& c) {
  check_booleans(c);
  return {registered("where_scalar_b", {c.at(0), c.at(1)}, OpAttrs::of_reals({0}))};
}
std::vector<Tensor> or_op(OnnxCall& c) {
  check_booleans(c);
  return {registered("where_scalar_a", {c.at(0), c.at(1)}, OpAttrs::of_reals({1}))};
}
std::vector<Tensor> xor_op(OnnxCall& c) {
  check_booleans(c);
  return {registered("ne", {c.at(0), c.at(1)})};
}

}  // namespace

// The registry's rows of this family (registry.hpp). Comparisons are not differentiable.
std::vector<OpDef> compare_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
#define KTEN_COMPARISON_OPS(name)                                                                          \
  {#name, #name "(Tensor,Tensor)", 2, {Domain::real}, DTypes::any, false, [](X x, A) { return name(x[0], x[1]); }}, \
  {#name "_scalar", #name "(Tensor,double)", 1, {Domain::real}, DTypes::any, false,                          \
   [](X x, A a) { return name(x[0], a.reals.at(0)); }}
  std::vector<OpDef> rows = {
      KTEN_COMPARISON_OPS(eq), KTEN_COMPARISON_OPS(ne), KTEN_COMPARISON_OPS(lt),
      KTEN_COMPARISON_OPS(le), KTEN_COMPARISON_OPS(gt), KTEN_COMPARISON_OPS(ge),
      // the condition is the first input, a boolean tensor
      {"where", "where(Tensor,Tensor,Tensor)", 3, {Domain::real}, DTypes::any, true, [](X x, A) { return where(x[0], x[1], x[2]); }},
      {"where_scalar_b", "where(Tensor,Tensor,double)", 2, {Domain::real}, DTypes::any, true,
       [](X x, A a) { return where(x[0], x[1], a.reals.at(0)); }},
      {"where_scalar_a", "where(Tensor,double,Tensor)", 2, {Domain::real}, DTypes::any, true,
       [](X x, A a) { return where(x[0], a.reals.at(0), x[1]); }},
  };
  set_onnx(rows, "eq", {{"Equal", 13, kOnnxLastOpset, 2, 2, 1, true, comparison<k_eq>, nullptr, 0}},
           {onnx_node_of("kten::eq", "Equal")});
  set_onnx(rows, "eq_scalar", {{"Not", 1, kOnnxLastOpset, 1, 1, 1, true, not_op, nullptr, 0}},
           {onnx_with_scalar("kten::eq_scalar", "Equal")});
  const auto not_equal = [](OnnxEmit& e, const std::string& b) { return e.node("Not", {e.node("Equal", {e.in[0], b})}); };
  set_onnx(rows, "ne", {{"Xor", 7, kOnnxLastOpset, 2, 2, 1, true, xor_op, nullptr, 0}},
           {{"kten::ne", [not_equal](OnnxEmit& e) { return not_equal(e, e.in[1]); }}});
  set_onnx(rows, "ne_scalar", {}, {{"kten::ne_scalar", [not_equal](OnnxEmit& e) { return not_equal(e, e.scalar(e.r(0))); }}});
  set_onnx(rows, "lt", {{"Less", 13, kOnnxLastOpset, 2, 2, 1, true, comparison<k_lt>, nullptr, 0}},
           {onnx_node_of("kten::lt", "Less")});
  set_onnx(rows, "le", {{"LessOrEqual", 13, kOnnxLastOpset, 2, 2, 1, true, comparison<k_le>, nullptr, 0}},
           {onnx_node_of("kten::le", "LessOrEqual")});
  set_onnx(rows, "gt", {{"Greater", 13, kOnnxLastOpset, 2, 2, 1, true, comparison<k_gt>, nullptr, 0}},
           {onnx_node_of("kten::gt", "Greater")});
  set_onnx(rows, "ge", {{"GreaterOrEqual", 13, kOnnxLastOpset, 2, 2, 1, true, comparison<k_ge>, nullptr, 0}},
           {onnx_node_of("kten::ge", "GreaterOrEqual")});
  set_onnx(rows, "lt_scalar", {}, {onnx_with_scalar("kten::lt_scalar", "Less")});
  set_onnx(rows, "le_scalar", {}, {onnx_with_scalar("kten::le_scalar", "LessOrEqual")});
  set_onnx(rows, "gt_scalar", {}, {onnx_with_scalar("kten::gt_scalar", "Greater")});
  set_onnx(rows, "ge_scalar", {}, {onnx_with_scalar("kten::ge_scalar", "GreaterOrEqual")});
  set_onnx(rows, "where",
           {{"Where", 13, kOnnxLastOpset, 3, 3, 1, true, where_op, nullptr, 0},
            {"Trilu", 14, kOnnxLastOpset, 1, 2, 1, true, trilu, nullptr, 0b10}},
           {{"kten::where", [](OnnxEmit& e) {
               return e.node("Where", {e.in.at(2), e.in[0], e.in[1]});
             }}});
  // (where() with a scalar records itself as where() with a 0-d tensor: kten::where's export)
  set_onnx(rows, "where_scalar_b", {{"And", 7, kOnnxLastOpset, 2, 2, 1, true, and_op, nullptr, 0}}, {});
  set_onnx(rows, "where_scalar_a", {{"Or", 7, kOnnxLastOpset, 2, 2, 1, true, or_op, nullptr, 0}}, {});
  return rows;
#undef KTEN_COMPARISON_OPS
}

}  // namespace kten::ops
