#pragma once
/// \file ops.hpp
/// \brief Operations on tensors. Each runs on its inputs' device and returns a tensor there;
/// inputs on different devices throw kten::DeviceMismatch, mixed dtypes kten::DTypeError.

#include <kten/tensor.hpp>

namespace kten {

/// \brief a + b with NumPy broadcasting.
Tensor operator+(const Tensor& a, const Tensor& b);
/// \brief a - b with NumPy broadcasting.
Tensor operator-(const Tensor& a, const Tensor& b);
/// \brief a * b (elementwise) with NumPy broadcasting.
Tensor operator*(const Tensor& a, const Tensor& b);
/// \brief a / b (elementwise) with NumPy broadcasting.
Tensor operator/(const Tensor& a, const Tensor& b);
/// \brief Adds a scalar to every element.
Tensor operator+(const Tensor& a, double s);
/// \brief Adds every element to a scalar.
Tensor operator+(double s, const Tensor& a);
/// \brief Subtracts a scalar from every element.
Tensor operator-(const Tensor& a, double s);
/// \brief s - a, elementwise.
Tensor operator-(double s, const Tensor& a);
/// \brief Multiplies every element by a scalar.
Tensor operator*(const Tensor& a, double s);
/// \brief Multiplies a scalar by every element.
Tensor operator*(double s, const Tensor& a);
/// \brief Divides every element by a scalar.
Tensor operator/(const Tensor& a, double s);
/// \brief s / a, elementwise.
Tensor operator/(double s, const Tensor& a);
/// \brief -a, elementwise.
Tensor operator-(const Tensor& a);

/// \brief a * b + c in one pass over memory (one kernel, one rounding); shapes must be equal.
/// Writing `a * b + c` makes two passes and a temporary, as in PyTorch (torch.addcmul fuses).
Tensor fma(const Tensor& a, const Tensor& b, const Tensor& c);

/// \brief Elementwise e^x.
Tensor exp(const Tensor& x);
/// \brief Elementwise natural logarithm.
Tensor log(const Tensor& x);
/// \brief Elementwise square root.
Tensor sqrt(const Tensor& x);
/// \brief Elementwise absolute value.
Tensor abs(const Tensor& x);
/// \brief Elementwise negation.
Tensor neg(const Tensor& x);
/// \brief Elementwise max(x, 0).
Tensor relu(const Tensor& x);
/// \brief Elementwise logistic function.
Tensor sigmoid(const Tensor& x);
/// \brief Elementwise hyperbolic tangent.
Tensor tanh(const Tensor& x);

// Differentiable like every op here, with PyTorch 1.13's values and gradients at the edges.

/// \brief Elementwise x^exponent (torch.pow): exponents 0.5 and -0.5 are sqrt and 1/sqrt (so
/// pow(-inf, 0.5) is NaN), 0 gives 1 everywhere, NaN included, and a gradient of 0.
Tensor pow(const Tensor& x, double exponent);
/// \brief Elementwise a^b with NumPy broadcasting; d/db is a^b log(a), taken as 0 where a == 0 and
/// b >= 0, and d/da is 0 where b == 0 (as PyTorch).
Tensor pow(const Tensor& a, const Tensor& b);
/// \brief Elementwise larger of a and b with broadcasting (torch.maximum): NaN when either is NaN;
/// at a tie each input gets half the gradient.
Tensor maximum(const Tensor& a, const Tensor& b);
/// \brief Elementwise smaller of a and b with broadcasting (torch.minimum): NaN when either is
/// NaN; at a tie each input gets half the gradient.
Tensor minimum(const Tensor& a, const Tensor& b);
/// \brief Elementwise min(max(x, lo), hi) (hi everywhere when lo > hi; NaN everywhere when a bound
/// is NaN); the gradient passes where lo <= x <= hi, bounds included, and is 0 elsewhere.
Tensor clamp(const Tensor& x, double lo, double hi);
/// \brief Elementwise sine.
Tensor sin(const Tensor& x);
/// \brief Elementwise cosine.
Tensor cos(const Tensor& x);
/// \brief Elementwise log(1 + x), accurate for small x.
Tensor log1p(const Tensor& x);
/// \brief Elementwise e^x - 1, accurate for small x.
Tensor expm1(const Tensor& x);
/// \brief Elementwise error function.
Tensor erf(const Tensor& x);
/// \brief Elementwise log(1 + e^(beta x)) / beta, and x itself where beta x > threshold
/// (torch.nn.functional.softplus).
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
/// \brief Elementwise exact GELU, x/2 (1 + erf(x / sqrt 2)) (torch.nn.functional.gelu, approximate='none').
Tensor gelu(const Tensor& x);
/// \brief Elementwise SiLU (swish), x / (1 + e^-x).
Tensor silu(const Tensor& x);

/// \brief Sum of all elements: a 0-d tensor on x's device (no host synchronisation).
Tensor sum(const Tensor& x);
/// \brief Sum along one axis (negative counts from the end); the axis is removed.
Tensor sum(const Tensor& x, int axis);
/// \brief Mean of all elements: a 0-d tensor on x's device.
Tensor mean(const Tensor& x);
/// \brief Mean along one axis.
Tensor mean(const Tensor& x, int axis);
/// \brief Largest element: a 0-d tensor on x's device; ShapeError for an empty tensor.
Tensor max(const Tensor& x);
/// \brief Largest element along one axis.
Tensor max(const Tensor& x, int axis);
/// \brief Frobenius (L2) norm of all elements: a 0-d tensor on x's device.
Tensor norm(const Tensor& x);
/// \brief L2 norm along one axis.
Tensor norm(const Tensor& x, int axis);

/// \brief Matrix product: (m x k) * (k x n) -> (m x n), or (m x k) * (k) -> (m).
Tensor matmul(const Tensor& a, const Tensor& b);
/// \brief Transposed view of a 2-D tensor (x.transpose(); shares storage, no copy).
Tensor transpose(const Tensor& x);

}  // namespace kten
