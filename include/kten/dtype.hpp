#pragma once
/// \file dtype.hpp
/// \brief Element types of tensors.

#include <cstddef>
#include <type_traits>

namespace kten {

/// \brief Element type of a tensor: float32 (the default) or float64.
enum class DType { float32, float64 };

/// \brief Shorthand for DType::float32.
inline constexpr DType float32 = DType::float32;
/// \brief Shorthand for DType::float64.
inline constexpr DType float64 = DType::float64;

/// \brief Bytes per element.
constexpr std::size_t dtype_size(DType t) { return t == DType::float32 ? 4 : 8; }
/// \brief "float32" or "float64".
constexpr const char* dtype_name(DType t) { return t == DType::float32 ? "float32" : "float64"; }

/// \brief The DType of a C++ element type: float -> float32, double -> float64.
template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "kten tensors hold float (float32) or double (float64)");
  return std::is_same_v<T, float> ? DType::float32 : DType::float64;
}

}  // namespace kten
