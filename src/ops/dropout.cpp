// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Dropout as one kernel and one autograd node (nn::Dropout, attention's weights, ONNX's Dropout in
// training mode): bandwidth-bound, each element read and written once; the mask is computed, never
// stored.
#include "dropout.hpp"

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "philox.hpp"

namespace kten::detail {

namespace {
// The Philox stream of dropout masks: rand and randn use counter[2] = 0 and 1 (random.cpp), so a
// mask never reuses their numbers, whatever the seeds.
constexpr std::uint32_t dropout_stream = 2;
}  // namespace

// One Philox block per element, like rand(): ten rounds of integer arithmetic, identical on every
// device, hidden behind the memory traffic on GPUs.
template <class T>
struct DropoutKernel {
  const T* x;
  T* out;
  std::uint32_t k0, k1;
  double p;
  T scale;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const PhiloxBlock r = philox4x32_10(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) >> 32),
                                        dropout_stream, 0, k0, k1);
    const bool keep = static_cast<double>(r.w[0] >> 8) * 0x1.0p-24 >= p;  // exact: the same choice everywhere
    out[i] = x[i] * (keep ? scale : T(0));  // a multiply, not a select: a dropped NaN stays NaN, as PyTorch
  }
};

Tensor dropout(const Tensor& x_in, double p, std::uint64_t seed, std::uint64_t call) {
  constexpr const char* label = "kten::dropout";
  check_defined(x_in, label);
  const Tensor x = x_in.contiguous();
  Tensor out = empty(x.shape(), x.device(), x.dtype());
  // Each call its own key (a Weyl step from the seed): masks of one layer never repeat.
  const std::uint64_t key = seed + call * 0x9E3779B97F4A7C15ull;
  launch_each_index(label, x.numel(), [&](auto* in, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    return DropoutKernel<T>{in, o, static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32), p,
                            static_cast<T>(1 / (1 - p))};
  }, x, out);
  if (recording(x_in))
    record(label, out, {&x_in}, [p, seed, call](const Tensor& g, const Needs&) { return Grads{dropout(g, p, seed, call)}; },
           [p] { return ops::OpAttrs::of_reals({p}); });
  return out;
}

}  // namespace kten::detail
