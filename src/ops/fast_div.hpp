// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: division of non-negative indices by a divisor fixed at launch, without a divide
// instruction where the indices allow it.

#include <cstdint>

#include <Kokkos_Core.hpp>

namespace kten::detail {

/// \brief n / d for 0 <= n <= `largest`, d > 0 fixed at construction. Below 2^31 a multiply-high
/// and a shift (Granlund and Montgomery's method, as CUTLASS's FastDivmod): a GPU has no integer
/// divide unit, and a 64-bit division there is a routine of dozens of instructions (the conv
/// kernel's gather divides each loaded element's indices several times: on an H200 its integer
/// pipe was the busiest, the FMA pipe mostly idle). Larger indices divide plainly; d = 1 is n.
class FastDiv {
 public:
  FastDiv() = default;
  FastDiv(std::int64_t divisor, std::int64_t largest) : d_(divisor), mode_(Mode::plain) {
    if (divisor == 1) {
      mode_ = Mode::one;
    } else if (divisor > 1 && largest < (std::int64_t(1) << 31) && divisor < (std::int64_t(1) << 31)) {
      int log2 = 0;  // ceil(log2(divisor))
      while ((std::int64_t(1) << log2) < divisor) ++log2;
      const int p = 31 + log2;
      mul_ = static_cast<std::uint32_t>(((std::uint64_t(1) << p) + static_cast<std::uint64_t>(divisor) - 1) /
                                        static_cast<std::uint64_t>(divisor));  // ceil(2^p / d) < 2^32
      shift_ = p - 32;
      mode_ = Mode::multiply;
    }
  }
  /// \brief n / d, for 0 <= n <= largest.
  KOKKOS_INLINE_FUNCTION std::int64_t div(std::int64_t n) const {
    if (mode_ == Mode::one) return n;
    if (mode_ == Mode::multiply)
      return static_cast<std::int64_t>(((static_cast<std::uint64_t>(n) * mul_) >> 32) >> shift_);
    return n / d_;
  }
  /// \brief The divisor.
  KOKKOS_INLINE_FUNCTION std::int64_t divisor() const { return d_; }

 private:
  enum class Mode : std::uint8_t { plain, one, multiply };
  std::int64_t d_ = 1;
  std::uint32_t mul_ = 0;
  int shift_ = 0;
  Mode mode_ = Mode::one;
};

}  // namespace kten::detail
