// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the reductions' arithmetic (what to accumulate from which identity, how to combine and
// finish), shared by the reduction kernels (reduce.cpp) and the row kernels (rows.hpp), and the
// Kokkos reducer that runs one of them in a parallel_reduce.

#include <cmath>
#include <cstdint>

#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"

namespace kten::detail {

/// \brief max that propagates NaN: NaN wins over any number, whichever side it is on. Two plain
/// selects (`acc` stays when it is NaN, as nothing compares greater; a NaN `v` replaces it), which
/// compilers turn into a vector max and a blend; one select with `||` stays a branch per element.
template <class T>
KOKKOS_INLINE_FUNCTION T nan_max(T acc, T v) {
  const T larger = v > acc ? v : acc;
  return v != v ? v : larger;
}
/// \brief min that propagates NaN, as nan_max.
template <class T>
KOKKOS_INLINE_FUNCTION T nan_min(T acc, T v) {
  const T smaller = v < acc ? v : acc;
  return v != v ? v : smaller;
}

// Reductions: what to accumulate (from its identity), how to finish and the kernel label: sum,
// mean (sum / n), max, min, norm (sqrt of the sum of squares), mean square (the sum of squares / n:
// MSE in one pass), and the unbiased variance's second pass (squared deviations / (n - 1)).
// `extreme` names the element max and min pick ("largest"): over nothing there is none.
struct SumReduction {
  static constexpr const char* label = "kten::sum";
  static constexpr const char* extreme = nullptr;
  static constexpr bool selects = false;  // true where combine is a select (max, min)
  static constexpr bool has_finish = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T identity() { return T(0); }
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return acc + v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return acc; }
};
struct MeanReduction : SumReduction {
  static constexpr const char* label = "kten::mean";
  static constexpr bool has_finish = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t n) { return acc / T(n); }
};
struct NormReduction : SumReduction {
  static constexpr const char* label = "kten::norm";
  static constexpr bool has_finish = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v * v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return compat::math::sqrt(acc); }
};
struct MeanSquareReduction : MeanReduction {
  static constexpr const char* label = "kten::mean_square";
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v * v; }
};
/// \brief The second pass of var: the squared deviations from the mean over n - 1 (Bessel's
/// correction, as torch.var); NaN for n = 0 and, by 0 / 0, for n = 1 (as PyTorch).
struct SquaredDeviationReduction : NormReduction {
  static constexpr const char* label = "kten::var";
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t n) {
    return n == 0 ? static_cast<T>(NAN) : acc / T(n - 1);
  }
};
// The identities of max and min are -inf and +inf (not -FLT_MAX: max over all -inf is -inf on
// every device).
struct MaxReduction : SumReduction {
  static constexpr const char* label = "kten::max";
  static constexpr const char* extreme = "largest";
  static constexpr bool selects = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T identity() { return static_cast<T>(-INFINITY); }
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return nan_max(acc, v); }
};
struct MinReduction : SumReduction {
  static constexpr const char* label = "kten::min";
  static constexpr const char* extreme = "smallest";
  static constexpr bool selects = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T identity() { return static_cast<T>(INFINITY); }
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return nan_min(acc, v); }
};


/// \brief A Kokkos reducer over a reduction: join is Reduction::combine, init its identity.
template <class Reduction, class T, class Space>
struct ReductionReducer {
  using reducer = ReductionReducer;
  using value_type = T;
  using result_view_type = Kokkos::View<T, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  KOKKOS_INLINE_FUNCTION explicit ReductionReducer(T& value) : value_(&value), references_scalar_(true) {}
  KOKKOS_INLINE_FUNCTION explicit ReductionReducer(const result_view_type& value)
      : value_(value), references_scalar_(false) {}

  KOKKOS_INLINE_FUNCTION void join(T& dest, const T& src) const { dest = Reduction::combine(dest, src); }
  KTEN_VOLATILE_JOIN(T, dest = Reduction::combine(static_cast<T>(dest), static_cast<T>(src));)
  KOKKOS_INLINE_FUNCTION void init(T& v) const { v = Reduction::template identity<T>(); }
  KOKKOS_INLINE_FUNCTION T& reference() const { return *value_.data(); }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return value_; }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return references_scalar_; }

 private:
  result_view_type value_;
  bool references_scalar_;
};

}  // namespace kten::detail
