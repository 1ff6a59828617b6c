// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: Philox-4x32-10 (Salmon et al., SC'11), the counter-based generator behind rand/randn.
// Pure integer arithmetic, so host and device produce the same words for the same counter and key.

#include <cstdint>

#include <Kokkos_Core.hpp>

namespace kten::detail {

struct PhiloxBlock {
  std::uint32_t w[4];
};

KOKKOS_INLINE_FUNCTION PhiloxBlock philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                                 std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

}  // namespace kten::detail
