#pragma once
// Internal: argument checks shared by every operation, so messages read the same everywhere.

#include <string>

#include <kten/errors.hpp>
#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief "add" for the kernel label "kten::add": messages already start with "kten: ".
inline std::string op_name(const char* op) {
  const std::string s = op;
  return s.rfind("kten::", 0) == 0 ? s.substr(6) : s;
}

/// \brief Throws kten::Error when `t` is a default-constructed tensor.
inline void check_defined(const Tensor& t, const char* op) {
  if (!t.defined())
    throw Error("kten: " + op_name(op) + ": the tensor is undefined (default-constructed)");
}

/// \brief Throws DeviceMismatch naming the operation, both devices and the fix.
inline void check_same_device(const char* op, const Device& a, const Device& b) {
  if (a == b) return;
  throw DeviceMismatch("kten: " + op_name(op) + ": operands are on different devices (" +
                       a.str() + " and " + b.str() +
                       "); kten never copies between devices implicitly. Move one first, e.g. "
                       "x.to(" + a.str() + ") or x.to(" + b.str() + ")");
}

/// \brief Checks both tensors are defined, on one device and of one dtype.
inline void check_compatible(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op);
  check_defined(b, op);
  check_same_device(op, a.device(), b.device());
  if (a.dtype() != b.dtype())
    throw DTypeError("kten: " + op_name(op) + ": operands have different dtypes (" +
                     dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                     "); convert one with .astype(...)");
}

/// \brief Maps a possibly negative axis into [0, ndim) or throws ShapeError.
inline int normalize_axis(const char* op, const Tensor& t, int axis) {
  const int n = t.ndim();
  const int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    throw ShapeError("kten: " + op_name(op) + ": axis " + std::to_string(axis) +
                     " is out of range for a tensor of shape " + shape_str(t.shape()) + " (ndim " +
                     std::to_string(n) + ")");
  return a;
}

/// \brief Element count of a shape; ShapeError for negative extents or overflow.
std::int64_t checked_numel(const Shape& shape, const char* op);

/// \brief Bytes of `numel` elements of `dtype`; OutOfMemory naming `device` and the size when the
/// count does not fit in 64 bits, so no allocation is ever asked for a wrapped size.
std::size_t checked_nbytes(std::int64_t numel, DType dtype, const Device& device, const char* op);

}  // namespace kten::detail
