#pragma once
// Internal: the one place where a runtime DType becomes an element type.

#include <kten/dtype.hpp>

namespace kten::detail {

/// \brief Calls f(T{}) with T = float for float32 and double for float64.
template <class F>
decltype(auto) with_dtype(DType dtype, F&& f) {
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

}  // namespace kten::detail
