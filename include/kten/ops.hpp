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
