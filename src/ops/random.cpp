// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Random tensors. Element i takes the Philox block for counter (i, stream) and key = seed, so the
// values depend on (seed, i) alone: the same on every device and for every thread layout.
// Bandwidth-bound like any elementwise kernel (ten rounds of integer multiplies per element).
#include <atomic>
#include <cmath>

#include <kten/random.hpp>
#include "core/kokkos_compat.hpp"

#include "dispatch/dispatch.hpp"
#include "philox.hpp"

namespace kten {
namespace detail {
namespace {

enum Stream : std::uint32_t { uniform_stream = 0, normal_stream = 1 };

// 24 (float) or 53 (double) random bits scaled into [0, 1): exact, so identical everywhere.
KOKKOS_INLINE_FUNCTION float unit_float(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1.0p-24f; }
KOKKOS_INLINE_FUNCTION double unit_double(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>((static_cast<std::uint64_t>(hi >> 5) << 26) | (lo >> 6)) * 0x1.0p-53;
}

}  // namespace

template <class T>
struct RandomKernel {
  T* out;
  std::uint32_t k0, k1;
  bool normal;
  double a, b;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const auto c0 = static_cast<std::uint32_t>(i), c1 = static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) >> 32);
    if (normal) {
      // Box-Muller in double: u1 in (0, 1] keeps log finite.
      const PhiloxBlock r = philox4x32_10(c0, c1, normal_stream, 0, k0, k1);
      const double u1 = unit_double(r.w[0], r.w[1]) + 0x1.0p-53;
      const double u2 = unit_double(r.w[2], r.w[3]);
      const double z = compat::math::sqrt(-2.0 * compat::math::log(u1)) * compat::math::cos(6.283185307179586476925 * u2);
      out[i] = static_cast<T>(a + b * z);
    } else {
      const PhiloxBlock r = philox4x32_10(c0, c1, uniform_stream, 0, k0, k1);
      if constexpr (sizeof(T) == 4) {
        const float u = unit_float(r.w[0]);
        out[i] = (a == 0.0 && b == 1.0) ? u : static_cast<T>(a + (b - a) * static_cast<double>(u));
      } else {
        const double u = unit_double(r.w[0], r.w[1]);
        out[i] = (a == 0.0 && b == 1.0) ? u : static_cast<T>(a + (b - a) * u);
      }
    }
  }
};

Tensor random_tensor(const Shape& shape, const Device& device, std::uint64_t seed, DType dtype, bool normal,
                     double a, double b) {
  const char* label = normal ? "kten::randn" : "kten::rand";
  if (!is_floating(dtype))
    fail<DTypeError>(label, "random tensors are float32 or float64, not ", dtype,
                     "; draw floats and convert them, e.g. rand(...).astype(kten::", dtype, ")");
  Tensor out = empty(shape, device, dtype);
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  launch(label, [&](const auto& backend, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    for_each_index(label, backend, out.numel(), RandomKernel<T>{o, k0, k1, normal, a, b});
  }, out);
  return out;
}

}  // namespace detail

Tensor rand(const Shape& shape, const Device& device, std::uint64_t seed, DType dtype) {
  return detail::random_tensor(shape, device, seed, dtype, false, 0.0, 1.0);
}
Tensor uniform(const Shape& shape, double low, double high, const Device& device, std::uint64_t seed, DType dtype) {
  return detail::random_tensor(shape, device, seed, dtype, false, low, high);
}
Tensor randn(const Shape& shape, const Device& device, std::uint64_t seed, DType dtype) {
  return detail::random_tensor(shape, device, seed, dtype, true, 0.0, 1.0);
}
Tensor normal(const Shape& shape, double mean, double stddev, const Device& device, std::uint64_t seed,
              DType dtype) {
  return detail::random_tensor(shape, device, seed, dtype, true, mean, stddev);
}

void philox4x32(const std::uint32_t counter[4], const std::uint32_t key[2], std::uint32_t out[4]) {
  const detail::PhiloxBlock r =
      detail::philox4x32_10(counter[0], counter[1], counter[2], counter[3], key[0], key[1]);
  for (int i = 0; i < 4; ++i) out[i] = r.w[i];
}

}  // namespace kten

namespace kten::nn {

namespace {
std::atomic<std::uint64_t>& seed_counter() {
  static std::atomic<std::uint64_t> counter{0};
  return counter;
}
}  // namespace

std::uint64_t next_seed() { return seed_counter()++; }
void manual_seed(std::uint64_t seed) { seed_counter() = seed; }

}  // namespace kten::nn
