// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the one place where a runtime DType becomes an element type. Arithmetic kernels are
// written for float and double only (with_dtype refuses int64 and boolean with a DTypeError that
// says what to do); kernels that only move elements (copies, fills, gathers, where) take every
// dtype (with_any_dtype).

#include <cstdint>

#include <kten/dtype.hpp>

#include "core/fail.hpp"

namespace kten::detail {

/// \brief Calls f(T{}) with T = float for float32 and double for float64; DTypeError naming `op`
/// for int64 and boolean, which arithmetic does not take.
template <class F>
decltype(auto) with_dtype(const char* op, DType dtype, F&& f) {
  if (!is_floating(dtype))
    fail<DTypeError>(op, "arithmetic is float-only (float32 or float64) and this operand is ", dtype,
                     "; convert it first, e.g. x.astype(kten::float32)");
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

/// \brief Calls f(T{}) with T = float, double, std::int64_t or bool: for kernels that move
/// elements without computing on them.
template <class F>
decltype(auto) with_any_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::int64: return f(std::int64_t{});
    default: return f(bool{});
  }
}

/// \brief Which dtypes a kernel is written for: arithmetic (float32, float64) or any (it moves
/// elements of any type).
enum class Accepts { floats, any };

/// \brief with_dtype or with_any_dtype, as the kernel accepts.
template <Accepts accepts, class F>
decltype(auto) with_element_type(const char* op, DType dtype, F&& f) {
  if constexpr (accepts == Accepts::any) return with_any_dtype(dtype, f);
  else return with_dtype(op, dtype, f);
}

/// \brief The C++ element type of a dtype, for messages ("float", ..., "std::int64_t", "bool").
constexpr const char* element_type_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float";
    case DType::float64: return "double";
    case DType::int64: return "std::int64_t";
    default: return "bool";
  }
}

}  // namespace kten::detail
