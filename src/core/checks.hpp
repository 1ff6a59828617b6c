// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: argument checks shared by every operation, so messages read the same everywhere.

#include <string>

#include <kten/errors.hpp>
#include <kten/tensor.hpp>

#include "fail.hpp"

namespace kten::detail {

/// \brief Throws kten::Error when `t` is a default-constructed tensor.
inline void check_defined(const Tensor& t, const char* op) {
  if (!t.defined()) fail(op, "the tensor is undefined (default-constructed)");
}

/// \brief Throws DeviceMismatch naming the operation, both devices and the fix.
inline void check_same_device(const char* op, const Device& a, const Device& b) {
  if (a == b) return;
  fail<DeviceMismatch>(op, "operands are on different devices (", a, " and ", b,
                       "); kten never copies between devices implicitly. Move one first, e.g. x.to(", a,
                       ") or x.to(", b, ")");
}

/// \brief Checks both tensors are defined, on one device and of one dtype.
inline void check_compatible(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op);
  check_defined(b, op);
  check_same_device(op, a.device(), b.device());
  if (a.dtype() != b.dtype())  // name a float dtype as the target when there is one: arithmetic is float-only
    fail<DTypeError>(op, "operands have different dtypes (", a.dtype(), " and ", b.dtype(),
                     "); kten never converts implicitly: convert one with .astype(kten::",
                     is_floating(b.dtype()) ? b.dtype() : a.dtype(), ")");
}

/// \brief Throws DTypeError unless `t` has `dtype`; `fix` says what to do instead.
inline void check_dtype(const char* op, const char* what, const Tensor& t, DType dtype, const char* fix) {
  check_defined(t, op);
  if (t.dtype() != dtype) fail<DTypeError>(op, what, " must be ", dtype, ", got ", t.dtype(), "; ", fix);
}

/// \brief Throws DTypeError when `value` has no int64 to convert to (NaN, infinite, outside
/// [-2^63, 2^63)) and `dtype` is int64: a scalar becomes an element of the tensor's dtype.
inline void check_scalar_fits(const char* op, double value, DType dtype) {
  if (dtype == DType::int64 && !(value >= -0x1p63 && value < 0x1p63))
    fail<DTypeError>(op, "the value ", value, " has no int64 (NaN, infinite or past 2^63); use a float dtype");
}

/// \brief Maps a possibly negative axis into [0, ndim) or throws ShapeError.
inline int normalize_axis(const char* op, const Tensor& t, int axis) {
  const int n = t.ndim();
  const int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    fail<ShapeError>(op, "axis ", axis, " is out of range for a tensor of shape ", t.shape(), " (ndim ", n, ")");
  return a;
}

/// \brief Element count of a shape; ShapeError for negative extents or overflow.
std::int64_t checked_numel(const Shape& shape, const char* op);

/// \brief Row-major strides of `shape`, in elements.
Shape contiguous_strides(const Shape& shape);

/// \brief Bytes of `numel` elements of `dtype`; OutOfMemory naming `device` and the size when the
/// count does not fit in 64 bits, so no allocation is ever asked for a wrapped size.
std::size_t checked_nbytes(std::int64_t numel, DType dtype, const Device& device, const char* op);

}  // namespace kten::detail
