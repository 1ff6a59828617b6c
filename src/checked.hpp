#pragma once
// Internal: size arithmetic that cannot wrap. Element counts and byte sizes go through these, so a
// size that does not fit becomes a clear kten::Error instead of a small allocation and a crash.

#include <limits>
#include <optional>
#include <type_traits>

namespace kten::detail {

/// \brief a * b for non-negative sizes, or nothing when the product does not fit in T.
template <class T>
constexpr std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>, "sizes are integers");
  if (b != 0 && a > std::numeric_limits<T>::max() / b) return std::nullopt;
  return a * b;
}

/// \brief a + b for non-negative sizes, or nothing when the sum does not fit in T.
template <class T>
constexpr std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>, "sizes are integers");
  if (a > std::numeric_limits<T>::max() - b) return std::nullopt;
  return a + b;
}

}  // namespace kten::detail
