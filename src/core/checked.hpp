// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: size arithmetic that cannot wrap. Element counts and byte sizes go through these, so a
// size that does not fit becomes a clear kten::Error instead of a small allocation and a crash.

#include <optional>
#include <type_traits>

namespace kten::detail {

/// \brief a * b for non-negative sizes, or nothing when the product does not fit in T. The
/// compiler's overflow flag, not a division: every tensor's element count goes through this, and a
/// 64-bit division per axis was a twentieth of a small operation's time.
template <class T>
constexpr std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>, "sizes are integers");
  T product{};
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// \brief a + b for non-negative sizes, or nothing when the sum does not fit in T.
template <class T>
constexpr std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>, "sizes are integers");
  T sum{};
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

}  // namespace kten::detail
