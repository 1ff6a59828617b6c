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

// Comparisons, selection and indexing. None is differentiable. Comparisons and where() take
// every dtype; index tensors are int64.

/// \brief a == b elementwise with NumPy broadcasting -> boolean. a and b have one dtype (convert
/// with astype() otherwise); NaN equals nothing, itself included (IEEE).
Tensor eq(const Tensor& a, const Tensor& b);
/// \brief a != b elementwise with broadcasting -> boolean; true wherever either is NaN (IEEE).
Tensor ne(const Tensor& a, const Tensor& b);
/// \brief a < b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor lt(const Tensor& a, const Tensor& b);
/// \brief a <= b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor le(const Tensor& a, const Tensor& b);
/// \brief a > b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor gt(const Tensor& a, const Tensor& b);
/// \brief a >= b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor ge(const Tensor& a, const Tensor& b);
/// \brief a == s elementwise -> boolean. The scalar is converted to a's dtype; for an int64 (or
/// boolean) tensor it must be an integer (0 or 1) that the dtype holds, else DTypeError: compare
/// with a float copy instead (a.astype(kten::float64)).
Tensor eq(const Tensor& a, double s);
/// \brief a != s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor ne(const Tensor& a, double s);
/// \brief a < s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor lt(const Tensor& a, double s);
/// \brief a <= s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor le(const Tensor& a, double s);
/// \brief a > s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor gt(const Tensor& a, double s);
/// \brief a >= s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor ge(const Tensor& a, double s);

/// \brief a where cond is true, else b: cond boolean (DTypeError otherwise: make one with a
/// comparison), a and b of one dtype (any), all three broadcast together; the result has a's dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// \brief where() with b a scalar, converted to a's dtype (as full() converts).
Tensor where(const Tensor& cond, const Tensor& a, double b);
/// \brief where() with a a scalar, converted to b's dtype (as full() converts).
Tensor where(const Tensor& cond, double a, const Tensor& b);

/// \brief The index (int64) of the largest element along `axis`, which is removed (kept with
/// extent 1 when `keepdim`). NaN counts as the largest (the first NaN wins, as PyTorch); among
/// equal largest elements the first index wins. ShapeError when the axis is empty.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);
/// \brief The flat row-major index (a 0-d int64 tensor on x's device) of the largest element,
/// NaN and ties as for argmax(x, axis); ShapeError for an empty tensor.
Tensor argmax(const Tensor& x);

/// \brief The slices of x at `indices` along `axis` (torch.index_select): indices is a 1-D int64
/// tensor; the result has x's shape with that axis's extent indices.numel(). An index outside
/// [0, extent) (negative ones included, as PyTorch) throws IndexError. The check reduces the
/// indices to their min and max on the device and reads those two numbers: one host
/// synchronisation per call (counted in stats(), reported by SyncDebug on a GPU).
Tensor index_select(const Tensor& x, int axis, const Tensor& indices);
/// \brief torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for axis 0 (likewise for the
/// other axes). index is int64 with x's rank and no extent larger than x's off the axis; the result
/// has index's shape. Indices are checked as for index_select (IndexError, one host synchronisation).
Tensor gather(const Tensor& x, int axis, const Tensor& index);

/// \brief Matrix product: (m x k) * (k x n) -> (m x n), or (m x k) * (k) -> (m).
Tensor matmul(const Tensor& a, const Tensor& b);
/// \brief Transposed view of a 2-D tensor (x.transpose(); shares storage, no copy).
Tensor transpose(const Tensor& x);

}  // namespace kten
