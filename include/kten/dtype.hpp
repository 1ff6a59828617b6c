// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file dtype.hpp
/// \brief Element types of tensors.

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kten {

/// \brief Element type of a tensor: float32 (the default), float64, int64 (indices, labels,
/// argmax results) or boolean (comparison results, where() conditions; one byte per element).
/// Arithmetic, reductions, matmul, layers and optimisers take float32 and float64 only; int64 and
/// boolean tensors are created, copied, viewed, converted (astype), compared, selected and
/// indexed with, and anything float-only says so with a DTypeError.
enum class DType { float32, float64, int64, boolean };

/// \brief Shorthand for DType::float32.
inline constexpr DType float32 = DType::float32;
/// \brief Shorthand for DType::float64.
inline constexpr DType float64 = DType::float64;
/// \brief Shorthand for DType::int64.
inline constexpr DType int64 = DType::int64;
/// \brief Shorthand for DType::boolean.
inline constexpr DType boolean = DType::boolean;

/// \brief Bytes per element: 4, 8, 8 and 1.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::boolean: return 1;
    default: return 8;
  }
}
/// \brief "float32", "float64", "int64" or "boolean".
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
    default: return "boolean";
  }
}
/// \brief True for float32 and float64, the dtypes arithmetic takes.
constexpr bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }

/// \brief The DType of a C++ element type: float -> float32, double -> float64,
/// std::int64_t -> int64, bool -> boolean.
template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> ||
                    std::is_same_v<T, bool>,
                "kten tensors hold float (float32), double (float64), std::int64_t (int64) or bool (boolean)");
  if constexpr (std::is_same_v<T, float>) return DType::float32;
  else if constexpr (std::is_same_v<T, double>) return DType::float64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::int64;
  else return DType::boolean;
}

}  // namespace kten
