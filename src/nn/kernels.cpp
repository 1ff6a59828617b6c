// The layers' and optimisers' own kernels, bandwidth-bound like every elementwise operation. (An
// op's gradient lives beside its forward, in the op family's file.)
#include "nn/kernels.hpp"

#include "autograd.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "fail.hpp"
#include "philox.hpp"

namespace kten::detail {

template <class T>
struct SgdKernel {
  T* p;
  const T* g;
  T lr, weight_decay;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { p[i] -= lr * (g[i] + weight_decay * p[i]); }
};

void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay) {
  if (p.shape() != g.shape())
    fail<ShapeError>("kten::sgd", "parameter ", p.shape(), " and gradient ", g.shape(), " differ in shape");
  launch_each_index("kten::sgd", p.numel(), [&](auto* param, auto* grad) {
    using T = std::remove_pointer_t<decltype(param)>;
    return SgdKernel<T>{param, grad, static_cast<T>(lr), static_cast<T>(weight_decay)};
  }, p, g);
}

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
    record(label, out, {&x_in}, [p, seed, call](const Tensor& g, const Needs&) { return Grads{dropout(g, p, seed, call)}; });
  return out;
}

}  // namespace kten::detail
