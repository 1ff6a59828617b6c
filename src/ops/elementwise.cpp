// Elementwise operations: fill, dtype conversion, unary maps, scalar maps, fma and broadcasting
// binary operations. All are bandwidth-bound: each element is read and written once, index i goes
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
  for (int r = 0; r < rank; ++r) {
    index.extent[rank - 1 - r] = extent[r] == 0 ? 1 : extent[r];  // no kernel runs over 0 elements
    index.stride_a[rank - 1 - r] = sa[r];
    index.stride_b[rank - 1 - r] = sb[r];
  }
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
// The gradient of x -> x + s, x - s: g itself; of x -> s * x: g * s.
Tensor scaled_gradient(const char* name, Tensor out, const Tensor& x, double scale) {
  if (recording(x))
    record(name, out, {&x}, [scale](const Tensor& g, const Needs&) { return Grads{scale == 1.0 ? g : g * scale}; });
  return out;
}
}  // namespace

Tensor operator+(const Tensor& a, double s) { return scaled_gradient("kten::add_scalar", scalar_map<AddScalar>("kten::add_scalar", a, s), a, 1.0); }
Tensor operator+(double s, const Tensor& a) { return a + s; }
Tensor operator-(const Tensor& a, double s) { return scaled_gradient("kten::sub_scalar", scalar_map<AddScalar>("kten::sub_scalar", a, -s), a, 1.0); }
Tensor operator-(double s, const Tensor& a) { return scaled_gradient("kten::rsub_scalar", scalar_map<ScalarSub>("kten::rsub_scalar", a, s), a, -1.0); }
Tensor operator*(const Tensor& a, double s) { return scaled_gradient("kten::mul_scalar", scalar_map<MulScalar>("kten::mul_scalar", a, s), a, s); }
Tensor operator*(double s, const Tensor& a) { return a * s; }
Tensor operator/(const Tensor& a, double s) { return scaled_gradient("kten::div_scalar", scalar_map<DivScalar>("kten::div_scalar", a, s), a, 1.0 / s); }
Tensor operator/(double s, const Tensor& a) {
  Tensor out = scalar_map<ScalarDiv>("kten::rdiv_scalar", a, s);
  if (recording(a))
    record("kten::rdiv_scalar", out, {&a}, [a = saved(a), s](const Tensor& g, const Needs&) { return Grads{g * -s / (a * a)}; });
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

namespace {
// A unary operation whose gradient is a function of (its input x, its output y, the incoming g).
template <class Op, class Gradient>
Tensor differentiable_unary(const char* label, const Tensor& x, Gradient gradient, Op op = Op{}) {
  Tensor y = unary(label, x, op);
  if (recording(x))
    record(label, y, {&x}, [x = saved(x), y = saved(y), gradient](const Tensor& g, const Needs&) {
      return Grads{gradient(x, y, g)};
    });
  return y;
}

// grad(a, b) for two tensors of one shape (a unary operation's input or output, and its incoming
// gradient), read as contiguous memory: only the plain indexed kernel is compiled. With the
// strided walk of elementwise_binary around them, float64 erf and exp (gelu's gradient) needed
// more registers than an AMD GPU gives each thread of a 1024-thread block, and spilled.
template <class Grad>
Tensor same_shape_gradient(const char* label, const Tensor& a_in, const Tensor& b_in, Grad grad) {
  if (a_in.shape() != b_in.shape())
    fail<ShapeError>(label, "the gradient has shape ", b_in.shape(), ", the operation's output ", a_in.shape());
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor out = empty(a.shape(), a.device(), a.dtype());
  launch(label, [&](const auto& backend, auto* x, auto* y, auto* o) {
    using T = std::remove_pointer_t<decltype(x)>;
    for_each_index(label, backend, out.numel(), BinaryKernel<T, Grad, T>{x, y, o, grad});
  }, a, b, out);
  return out;
}

// A unary operation whose gradient is one kernel grad(x, g), or grad(y, g) of its output y.
enum class GradOf { input, output };
template <GradOf of = GradOf::input, class Op, class Grad>
Tensor unary_with_grad_kernel(const char* label, const char* grad_label, const Tensor& x, Op op, Grad grad) {
  return differentiable_unary(label, x, [grad_label, grad](const Tensor& x, const Tensor& y, const Tensor& g) {
    return same_shape_gradient(grad_label, of == GradOf::input ? x : y, g, grad);
  }, op);
}
}  // namespace

Tensor exp(const Tensor& x) {
  return differentiable_unary<Exp>("kten::exp", x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g * y; });
}
Tensor log(const Tensor& x) {
  return differentiable_unary<Log>("kten::log", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return g / x; });
}
Tensor sqrt(const Tensor& x) {
  return differentiable_unary<Sqrt>("kten::sqrt", x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g / (y * 2.0); });
}
Tensor abs(const Tensor& x) { return unary_with_grad_kernel("kten::abs", "kten::abs_grad", x, Abs{}, AbsGrad{}); }
Tensor neg(const Tensor& x) {
  return differentiable_unary<Neg>("kten::neg", x, [](const Tensor&, const Tensor&, const Tensor& g) { return -g; });
}
Tensor relu(const Tensor& x) {
  return differentiable_unary<Relu>("kten::relu", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return relu_grad(x, g); });
}
Tensor detail::relu_grad(const Tensor& x, const Tensor& grad) {
  return elementwise_binary("kten::relu_grad", x, grad, ReluGrad{});
}
Tensor sigmoid(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::sigmoid", "kten::sigmoid_grad", x, Sigmoid{}, SigmoidGrad{});
}
Tensor tanh(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::tanh", "kten::tanh_grad", x, Tanh{}, TanhGrad{});
}
Tensor sin(const Tensor& x) { return unary_with_grad_kernel("kten::sin", "kten::sin_grad", x, Sin{}, SinGrad{}); }
Tensor cos(const Tensor& x) { return unary_with_grad_kernel("kten::cos", "kten::cos_grad", x, Cos{}, CosGrad{}); }
Tensor log1p(const Tensor& x) { return unary_with_grad_kernel("kten::log1p", "kten::log1p_grad", x, Log1p{}, Log1pGrad{}); }
Tensor expm1(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::expm1", "kten::expm1_grad", x, Expm1{}, Expm1Grad{});
}
Tensor erf(const Tensor& x) { return unary_with_grad_kernel("kten::erf", "kten::erf_grad", x, Erf{}, ErfGrad{}); }
Tensor gelu(const Tensor& x) { return unary_with_grad_kernel("kten::gelu", "kten::gelu_grad", x, Gelu{}, GeluGrad{}); }
Tensor silu(const Tensor& x) { return unary_with_grad_kernel("kten::silu", "kten::silu_grad", x, Silu{}, SiluGrad{}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return unary_with_grad_kernel("kten::softplus", "kten::softplus_grad", x, Softplus{beta, threshold},
                                SoftplusGrad{beta, threshold});
}
Tensor clamp(const Tensor& x, double lo, double hi) {
  return unary_with_grad_kernel("kten::clamp", "kten::clamp_grad", x, Clamp{lo, hi}, ClampGrad{lo, hi});
}
// --- leaky_relu (issue 31, normalisation and small layers) ---
Tensor leaky_relu(const Tensor& x, double slope) {
  return unary_with_grad_kernel("kten::leaky_relu", "kten::leaky_relu_grad", x, LeakyRelu{slope}, LeakyReluGrad{slope});
}
Tensor pow(const Tensor& x, double exponent) {
  const PowScalarGrad grad{PowScalar::of(exponent - 1), exponent};
  return differentiable_unary("kten::pow_scalar", x, [grad](const Tensor& x, const Tensor&, const Tensor& g) {
    if (grad.e == 0) return zeros(x.shape(), x.device(), x.dtype());  // PyTorch's, even where g is NaN or inf
    return elementwise_binary("kten::pow_scalar_grad", x, g, grad);
  }, PowScalar::of(exponent));
}

Tensor pow(const Tensor& a, const Tensor& b) {
  constexpr const char* label = "kten::pow";
  Tensor out = elementwise_binary(label, a, b, Pow{});
  if (recording(a, b))
    record(label, out, {&a, &b}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      Tensor ga, gb;
      if (needs[0]) {  // where(b == 0, 0, g b a^(b-1)): the mask wins over a NaN or infinite g
        const Tensor t = elementwise_binary("kten::pow_base_factor", a, b, PowBaseFactor{}) * g;
        ga = sum_to(elementwise_binary("kten::pow_base_mask", t, b, ZeroWhereExponentZero{}), a.shape());
      }
      if (needs[1]) gb = sum_to(g * elementwise_binary("kten::pow_exponent_factor", a, b, PowExponentFactor{}), b.shape());
      return Grads{ga, gb};
    });
  return out;
}

namespace {
// maximum or minimum: g goes to the input that is the result, half to each at a tie (PyTorch 1.13).
template <class Op>
Tensor extremum(const char* label, const Tensor& a, const Tensor& b, bool larger) {
  Tensor out = elementwise_binary(label, a, b, Op{});
  if (recording(a, b))
    record(label, out, {&a, &b}, [a = saved(a), b = saved(b), larger](const Tensor& g, const Needs& needs) {
      const auto share = [&](const Tensor& self, const Tensor& other) {
        const Tensor w = elementwise_binary("kten::extremum_share", self, other, ExtremumShare{larger});
        return sum_to(elementwise_binary("kten::extremum_grad", w, g, ShareOf{}), self.shape());
      };
      return Grads{needs[0] ? share(a, b) : Tensor(), needs[1] ? share(b, a) : Tensor()};
    });
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum<Maximum>("kten::maximum", a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum<Minimum>("kten::minimum", a, b, false); }

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

// The registry's rows of this family (registry.hpp): each public operation above, once.
std::vector<OpDef> elementwise_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, positive = Domain::positive, nonzero = Domain::nonzero;
  return {
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
      {"exp", "exp(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return exp(x[0]); }},
      {"log", "log(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return log(x[0]); }},
      {"sqrt", "sqrt(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return sqrt(x[0]); }},
      {"abs", "abs(Tensor)", 1, {nonzero}, DTypes::floating, true, [](X x, A) { return abs(x[0]); }},
      {"neg", "neg(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return neg(x[0]); }},
      {"relu", "relu(Tensor)", 1, {nonzero}, DTypes::floating, true, [](X x, A) { return relu(x[0]); }},
      {"sigmoid", "sigmoid(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return sigmoid(x[0]); }},
      {"tanh", "tanh(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return tanh(x[0]); }},
      {"sin", "sin(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return sin(x[0]); }},
      {"cos", "cos(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return cos(x[0]); }},
      {"log1p", "log1p(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return log1p(x[0]); }},
      {"expm1", "expm1(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return expm1(x[0]); }},
      {"erf", "erf(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return erf(x[0]); }},
      {"gelu", "gelu(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return gelu(x[0]); }},
      {"silu", "silu(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return silu(x[0]); }},
      // reals: beta, threshold (PyTorch's 1 and 20 when not given)
      {"softplus", "softplus(Tensor,double,double)", 1, {real}, DTypes::floating, true,
       [](X x, A a) { return softplus(x[0], a.reals.size() > 0 ? a.reals[0] : 1.0, a.reals.size() > 1 ? a.reals[1] : 20.0); }},
      {"pow_scalar", "pow(Tensor,double)", 1, {positive}, DTypes::floating, true, [](X x, A a) { return pow(x[0], a.reals.at(0)); }},
      {"pow", "pow(Tensor,Tensor)", 2, {positive, real}, DTypes::floating, true, [](X x, A) { return pow(x[0], x[1]); }},
      {"maximum", "maximum(Tensor,Tensor)", 2, {Domain::distinct}, DTypes::floating, true, [](X x, A) { return maximum(x[0], x[1]); }},
      {"minimum", "minimum(Tensor,Tensor)", 2, {Domain::distinct}, DTypes::floating, true, [](X x, A) { return minimum(x[0], x[1]); }},
      {"clamp", "clamp(Tensor,double,double)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { return clamp(x[0], a.reals.at(0), a.reals.at(1)); }},
      // --- leaky_relu (issue 31, normalisation and small layers); reals: slope (0.01 when not given)
      {"leaky_relu", "leaky_relu(Tensor,double)", 1, {nonzero}, DTypes::floating, true,
       [](X x, A a) { return leaky_relu(x[0], a.reals.empty() ? 0.01 : a.reals[0]); }},
      {"Tensor::astype", "Tensor::astype(DType)", 1, {real}, DTypes::any, true, [](X x, A a) { return x[0].astype(a.dtype); }},
  };
}

}  // namespace kten::ops
