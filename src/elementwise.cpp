// Elementwise kernels: fill, arange, dtype conversion, unary maps, scalar maps and broadcasting
// binary operations. All are bandwidth-bound: each element is read and written once, index i goes
// to adjacent threads (coalesced on GPUs, contiguous and vectorisable on CPUs).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <kten/ops.hpp>
#include <kten/detail/kokkos_compat.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"

namespace kten {
namespace detail {

template <class Backend, class T>
void fill_kernel(const Backend& be, T* out, std::int64_t n, T value) {
  Kokkos::parallel_for("kten::fill", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { out[i] = value; });
}

template <class Backend, class T>
void arange_kernel(const Backend& be, T* out, std::int64_t n, double start, double step) {
  Kokkos::parallel_for("kten::arange", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { out[i] = static_cast<T>(start + step * static_cast<double>(i)); });
}

template <class Backend, class From, class To>
void convert_kernel(const Backend& be, const From* x, To* out, std::int64_t n) {
  Kokkos::parallel_for("kten::astype", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { out[i] = static_cast<To>(x[i]); });
}

// Broadcasting decomposes the flat output index into coordinates and re-composes each input's
// offset with stride 0 along broadcast axes; equal shapes take the plain indexed path.
template <class Backend, class T, class Op>
void zip_kernel(const Backend& be, const char* label, const T* a, const T* b, T* out, std::int64_t n,
                const Broadcast& bc, Op op) {
  using Policy = Kokkos::RangePolicy<typename Backend::execution_space>;
  if (bc.same_shape) {
    Kokkos::parallel_for(label, Policy(be.space, 0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = op(a[i], b[i]); });
    return;
  }
  const BroadcastIndex s = bc.index;
  Kokkos::parallel_for(label, Policy(be.space, 0, n), KOKKOS_LAMBDA(std::int64_t i) {
    std::int64_t rest = i, ia = 0, ib = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const std::int64_t c = rest % s.extent[d];
      rest /= s.extent[d];
      ia += c * s.stride_a[d];
      ib += c * s.stride_b[d];
    }
    out[i] = op(a[ia], b[ib]);
  });
}

Broadcast broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  Broadcast bc;
  bc.same_shape = (a == b);
  const int rank = static_cast<int>(std::max(a.size(), b.size()));
  bc.shape.assign(rank, 1);
  if (bc.same_shape) {
    bc.shape = a;
    return bc;
  }
  if (rank > kMaxRank)
    throw ShapeError("kten: " + op_name(op) + ": broadcasting supports up to " + std::to_string(kMaxRank) +
                     " dimensions, got " + shape_str(a) + " and " + shape_str(b));
  bc.index.rank = rank;
  std::int64_t sa = 1, sb = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int da = d - (rank - static_cast<int>(a.size()));
    const int db = d - (rank - static_cast<int>(b.size()));
    const std::int64_t ea = da >= 0 ? a[da] : 1;
    const std::int64_t eb = db >= 0 ? b[db] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      throw ShapeError("kten: " + op_name(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                       " cannot be broadcast (axis " + std::to_string(d) + ": " + std::to_string(ea) +
                       " vs " + std::to_string(eb) + "); extents must match or be 1");
    const std::int64_t e = ea == 1 ? eb : ea;
    bc.shape[d] = e;
    bc.index.extent[d] = e == 0 ? 1 : e;
    bc.index.stride_a[d] = ea == 1 ? 0 : sa;
    bc.index.stride_b[d] = eb == 1 ? 0 : sb;
    sa *= ea;
    sb *= eb;
  }
  return bc;
}

template <class MakeOp>
Tensor map(const char* label, const Tensor& x, MakeOp make_op) {
  check_defined(x, label);
  Tensor out = empty(x.shape(), x.device(), x.dtype());
  with_backend(x.device(), [&](auto be) {
    with_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      map_kernel(be, label, static_cast<const T*>(x.data()), static_cast<T*>(out.data()), x.numel(),
                 make_op(zero));
    });
  });
  return out;
}

template <class Op>
Tensor zip(const char* label, const Tensor& a, const Tensor& b, Op op) {
  check_compatible(label, a, b);
  const Broadcast bc = broadcast_shapes(label, a.shape(), b.shape());
  Tensor out = empty(bc.shape, a.device(), a.dtype());
  with_backend(a.device(), [&](auto be) {
    with_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      zip_kernel(be, label, static_cast<const T*>(a.data()), static_cast<const T*>(b.data()),
                 static_cast<T*>(out.data()), out.numel(), bc, op);
    });
  });
  return out;
}

void fill(const Tensor& t, double value) {
  with_backend(t.device(), [&](auto be) {
    with_dtype(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      fill_kernel(be, static_cast<T*>(t.data()), t.numel(), static_cast<T>(value));
    });
  });
}

template <class Backend, class T>
void fma_kernel(const Backend& be, const T* a, const T* b, const T* c, T* out, std::int64_t n) {
  Kokkos::parallel_for("kten::fma", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { out[i] = compat::fma(a[i], b[i], c[i]); });
}

// The same test as Relu: where relu passed x (x > 0 or NaN), the gradient passes.
struct ReluGrad {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return x <= T(0) ? T(0) : g; }
};

Tensor relu_grad(const Tensor& x, const Tensor& grad) { return zip("kten::relu_grad", x, grad, ReluGrad{}); }

template <class Backend, class T>
void sgd_kernel(const Backend& be, T* p, const T* g, std::int64_t n, T lr, T weight_decay) {
  Kokkos::parallel_for("kten::sgd", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { p[i] -= lr * (g[i] + weight_decay * p[i]); });
}

void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay) {
  check_compatible("kten::sgd", p, g);
  with_backend(p.device(), [&](auto be) {
    with_dtype(p.dtype(), [&](auto zero) {
      using T = decltype(zero);
      sgd_kernel(be, static_cast<T*>(p.data()), static_cast<const T*>(g.data()), p.numel(), static_cast<T>(lr),
                 static_cast<T>(weight_decay));
    });
  });
}

}  // namespace detail

using namespace detail;

Tensor operator+(const Tensor& a, const Tensor& b) { return zip("kten::add", a, b, Add{}); }
Tensor operator-(const Tensor& a, const Tensor& b) { return zip("kten::sub", a, b, Sub{}); }
Tensor operator*(const Tensor& a, const Tensor& b) { return zip("kten::mul", a, b, Mul{}); }
Tensor operator/(const Tensor& a, const Tensor& b) { return zip("kten::div", a, b, Div{}); }

template <template <class> class Op>
static Tensor scalar_map(const char* label, const Tensor& a, double s) {
  return map(label, a, [s](auto zero) { return Op<decltype(zero)>{static_cast<decltype(zero)>(s)}; });
}

Tensor operator+(const Tensor& a, double s) { return scalar_map<AddScalar>("kten::add_scalar", a, s); }
Tensor operator+(double s, const Tensor& a) { return scalar_map<AddScalar>("kten::add_scalar", a, s); }
Tensor operator-(const Tensor& a, double s) { return scalar_map<AddScalar>("kten::sub_scalar", a, -s); }
Tensor operator-(double s, const Tensor& a) { return scalar_map<ScalarSub>("kten::rsub_scalar", a, s); }
Tensor operator*(const Tensor& a, double s) { return scalar_map<MulScalar>("kten::mul_scalar", a, s); }
Tensor operator*(double s, const Tensor& a) { return scalar_map<MulScalar>("kten::mul_scalar", a, s); }
Tensor operator/(const Tensor& a, double s) { return scalar_map<DivScalar>("kten::div_scalar", a, s); }
Tensor operator/(double s, const Tensor& a) { return scalar_map<ScalarDiv>("kten::rdiv_scalar", a, s); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor fma(const Tensor& a, const Tensor& b, const Tensor& c) {
  check_compatible("kten::fma", a, b);
  check_compatible("kten::fma", a, c);
  if (a.shape() != b.shape() || a.shape() != c.shape())
    throw ShapeError("kten: fma: shapes " + shape_str(a.shape()) + ", " + shape_str(b.shape()) + " and " +
                     shape_str(c.shape()) + " differ; fma needs equal shapes (use a * b + c to broadcast)");
  Tensor out = empty(a.shape(), a.device(), a.dtype());
  with_backend(a.device(), [&](auto be) {
    with_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      fma_kernel(be, static_cast<const T*>(a.data()), static_cast<const T*>(b.data()), static_cast<const T*>(c.data()),
                 static_cast<T*>(out.data()), a.numel());
    });
  });
  return out;
}

template <class Op>
static Tensor unary(const char* label, const Tensor& x) {
  return map(label, x, [](auto) { return Op{}; });
}

Tensor exp(const Tensor& x) { return unary<Exp>("kten::exp", x); }
Tensor log(const Tensor& x) { return unary<Log>("kten::log", x); }
Tensor sqrt(const Tensor& x) { return unary<Sqrt>("kten::sqrt", x); }
Tensor abs(const Tensor& x) { return unary<Abs>("kten::abs", x); }
Tensor neg(const Tensor& x) { return unary<Neg>("kten::neg", x); }
Tensor relu(const Tensor& x) { return unary<Relu>("kten::relu", x); }
Tensor sigmoid(const Tensor& x) { return unary<Sigmoid>("kten::sigmoid", x); }
Tensor tanh(const Tensor& x) { return unary<Tanh>("kten::tanh", x); }

Tensor zeros(const Shape& shape, const Device& device, DType dtype) { return full(shape, 0.0, device, dtype); }
Tensor ones(const Shape& shape, const Device& device, DType dtype) { return full(shape, 1.0, device, dtype); }

Tensor full(const Shape& shape, double value, const Device& device, DType dtype) {
  Tensor out = empty(shape, device, dtype);
  fill(out, value);
  return out;
}

Tensor arange(std::int64_t stop, const Device& device, DType dtype) {
  return arange(0.0, static_cast<double>(stop), 1.0, device, dtype);
}

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// NumPy's length: ceil((stop - start) / step), 0 when negative, and 1 when the quotient underflowed
// to +0 although start != stop (a step past the span, an infinite one included: arange(0, 10, inf)
// is [0]). A length that is NaN or outside int64 is an error, as in NumPy, never a cast.
std::int64_t arange_length(double start, double stop, double step) {
  const std::string call = "kten: arange(" + number(start) + ", " + number(stop) + ", " + number(step) + "): ";
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step))
    throw ShapeError(call + "start, stop and step must not be NaN");
  if (step == 0.0) throw ShapeError(call + "step must not be 0");
  const double delta = stop - start, span = delta / step;
  if (span == 0.0 && delta != 0.0) return std::signbit(span) ? 0 : 1;
  const double length = std::ceil(span);
  if (!(length >= -0x1p63 && length < 0x1p63))
    throw ShapeError(call + "the length ceil((stop - start) / step) = " + number(length) +
                     " is not a number that fits in 64 bits");
  return length > 0 ? static_cast<std::int64_t>(length) : 0;
}
}  // namespace

Tensor arange(double start, double stop, double step, const Device& device, DType dtype) {
  const std::int64_t n = arange_length(start, stop, step);
  Tensor out = empty({n}, device, dtype);
  const double stride = n > 1 ? step : 0.0;  // one element is start itself (the step may be infinite)
  with_backend(device, [&](auto be) {
    with_dtype(dtype, [&](auto zero) {
      arange_kernel(be, static_cast<decltype(zero)*>(out.data()), n, start, stride);
    });
  });
  return out;
}

Tensor Tensor::astype(DType dtype) const {
  check_defined(*this, "astype()");
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, device(), dtype);
  with_backend(device(), [&](auto be) {
    with_dtype(dtype_, [&](auto from) {
      with_dtype(dtype, [&](auto to) {
        convert_kernel(be, static_cast<const decltype(from)*>(data()), static_cast<decltype(to)*>(out.data()),
                       numel());
      });
    });
  });
  return out;
}

}  // namespace kten
