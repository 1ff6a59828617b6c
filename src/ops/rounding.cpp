// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Rounding and remainders: floor, ceil, trunc, round (half to even), sign, fmod and remainder.
// Elementwise and bandwidth-bound like the arithmetic (elementwise.cpp). As compare.cpp does for
// the comparisons, the five roundings share one functor that takes the rounding as a run-time value
// (uniform across threads, so free) and the two remainders another: two kernels per dtype and
// backend instead of seven. NaN stays NaN (sign too, as NumPy and ONNX: PyTorch 1.13 gives 0).
// The roundings' gradient is zero (PyTorch's); the remainders' is written in differentiable ops.
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"
#include "unary.hpp"

namespace kten {
namespace detail {

enum class Rounding { floor, ceil, trunc, nearest, sign };

/// \brief x rounded as chosen at run time; nearest is half to even (the default rounding mode's
/// nearbyint, as torch.round and ONNX's Round).
struct RoundBy {
  Rounding mode;
  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(T x) const {
    switch (mode) {
      case Rounding::floor: return math::floor(x);
      case Rounding::ceil: return math::ceil(x);
      case Rounding::trunc: return math::trunc(x);
      case Rounding::nearest: return math::nearbyint(x);
      default: return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;  // 0, -0 and NaN stay
    }
  }
};

/// \brief fmod(a, b) (the sign of a, C's fmod) or, with `floored`, the remainder with the sign of b
/// (Python's %, torch.remainder); NaN where b is 0.
struct Remainder {
  bool floored;
  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const {
    const T r = math::fmod(a, b);
    return floored && r != T(0) && (r < T(0)) != (b < T(0)) ? r + b : r;
  }
};

namespace {

Tensor round_by(const char* label, const Tensor& x, Rounding mode) {
  return differentiable_unary(label, x, [](const Tensor&, const Tensor&, const Tensor& g) { return zeros_like(g); },
                              RoundBy{mode});
}

// d/da = 1, d/db = -q for the whole quotient q = (a - r) / b: trunc(a / b) for fmod; for remainder
// Python's floor division, (a - r) / b rounded to the whole number it is up to rounding (NaN where
// r is, an infinite a: PyTorch's div(a, b, rounding_mode="floor")).
Tensor remainder_of(const char* label, const Tensor& a, const Tensor& b, bool floored) {
  Tensor out = elementwise_binary(label, a, b, Remainder{floored});
  if (recording(a, b))
    record(label, out, {&a, &b}, [a = saved(a), b = saved(b), r = saved(out), floored](const Tensor& g, const Needs& needs) {
      Tensor gb;
      if (needs[1]) gb = sum_to(-g * (floored ? round((a - r.detach()) / b) : trunc(a / b)), b.shape());
      return Grads{needs[0] ? sum_to(g, a.shape()) : Tensor(), gb};
    });
  return out;
}

}  // namespace
}  // namespace detail

using namespace detail;

Tensor floor(const Tensor& x) { return round_by("kten::floor", x, Rounding::floor); }
Tensor ceil(const Tensor& x) { return round_by("kten::ceil", x, Rounding::ceil); }
Tensor trunc(const Tensor& x) { return round_by("kten::trunc", x, Rounding::trunc); }
Tensor round(const Tensor& x) { return round_by("kten::round", x, Rounding::nearest); }
Tensor sign(const Tensor& x) { return round_by("kten::sign", x, Rounding::sign); }
Tensor fmod(const Tensor& a, const Tensor& b) { return remainder_of("kten::fmod", a, b, false); }
Tensor remainder(const Tensor& a, const Tensor& b) { return remainder_of("kten::remainder", a, b, true); }

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

constexpr char k_floor[] = "floor", k_ceil[] = "ceil", k_round[] = "round", k_sign[] = "sign";

// Mod: fmod 0 (the default) is Python's % (the divisor's sign), fmod 1 C's fmod; int64 through
// float64, exact below 2^53 (an integer divisor of 0 gives 0, as ONNX's integer Div by 0 does here).
void check_mod(const OnnxNode& n) { check_flag(n, "fmod", 0); }

std::vector<Tensor> mod_op(OnnxCall& c) {
  const bool c_fmod = c.attr_int("fmod", 0) == 1;
  return {onnx_numeric({c.at(0), c.at(1)}, [c_fmod](const std::vector<Tensor>& v) {
    return registered(c_fmod ? "fmod" : "remainder", v);
  })};
}

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> rounding_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, nonzero = Domain::nonzero;
  std::vector<OpDef> rows = {
      // a step function: no finite differences (its harness rows say so)
      {"floor", "floor(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return floor(x[0]); }},
      {"ceil", "ceil(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return ceil(x[0]); }},
      {"trunc", "trunc(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return trunc(x[0]); }},
      {"round", "round(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return round(x[0]); }},
      {"sign", "sign(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return sign(x[0]); }},
      {"fmod", "fmod(Tensor,Tensor)", 2, {real, nonzero}, DTypes::floating, true, [](X x, A) { return fmod(x[0], x[1]); }},
      {"remainder", "remainder(Tensor,Tensor)", 2, {real, nonzero}, DTypes::floating, true,
       [](X x, A) { return remainder(x[0], x[1]); }},
  };
  set_onnx(rows, "floor", {{"Floor", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_floor>, nullptr, 0}},
           {onnx_node_of("kten::floor", "Floor")});
  set_onnx(rows, "ceil", {{"Ceil", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_ceil>, nullptr, 0}},
           {onnx_node_of("kten::ceil", "Ceil")});
  set_onnx(rows, "round", {{"Round", 11, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_round>, nullptr, 0}},
           {onnx_node_of("kten::round", "Round")});
  set_onnx(rows, "sign", {{"Sign", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_sign>, nullptr, 0}},
           {onnx_node_of("kten::sign", "Sign")});
  // ONNX has no Trunc: ceil below 0, floor elsewhere (exact, infinities and NaN included)
  set_onnx(rows, "trunc", {}, {{"kten::trunc", [](OnnxEmit& e) {
                                 return e.node("Where", {e.node("Less", {e.in[0], e.scalar(0)}), e.node("Ceil", {e.in[0]}),
                                                         e.node("Floor", {e.in[0]})});
                               }}});
  set_onnx(rows, "remainder", {{"Mod", 13, kOnnxLastOpset, 2, 2, 1, true, mod_op, check_mod, 0}},
           {onnx_node_of("kten::remainder", "Mod")});
  set_onnx(rows, "fmod", {}, {{"kten::fmod", [](OnnxEmit& e) {
                                return e.node("Mod", {e.in[0], e.in[1]}, {attr_i("fmod", 1)});
                              }}});
  return rows;
}

}  // namespace kten::ops
