// The layers' and optimisers' own kernels, bandwidth-bound like every elementwise operation: each
// reads and writes every element of its tensors once, in one pass. (An op's gradient lives beside
// its forward, in the op family's file.)
#include "kernels.hpp"

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"
#include "core/kokkos_compat.hpp"
#include "ops/philox.hpp"

namespace kten::detail {

namespace math = compat::math;

namespace {
void check_same_shape(const char* op, const Tensor& p, const Tensor& other, const char* what) {
  if (p.shape() != other.shape())
    fail<ShapeError>(op, "parameter ", p.shape(), " and ", what, " ", other.shape(), " differ in shape");
}
}  // namespace

template <class T>
struct SgdKernel {
  T* p;
  const T* g;
  T* buffer;  // null without momentum
  T lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, fresh;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    T d = g[i];
    if (weight_decay != T(0)) d = d + weight_decay * p[i];
    if (buffer) {
      const T b = fresh ? d : momentum * buffer[i] + one_minus_dampening * d;
      buffer[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    p[i] = p[i] - lr * d;
  }
};

void sgd_update(const Tensor& p, const Tensor& g, const Tensor& momentum_buffer, const SgdStep& step) {
  check_same_shape("kten::sgd", p, g, "gradient");
  if (momentum_buffer.defined()) check_same_shape("kten::sgd", p, momentum_buffer, "momentum buffer");
  const auto make = [&](auto* param, auto* grad, auto*... buffer) {
    using T = std::remove_pointer_t<decltype(param)>;
    T* b = nullptr;
    ((b = buffer), ...);
    return SgdKernel<T>{param, grad, b, static_cast<T>(step.lr), static_cast<T>(step.momentum),
                        static_cast<T>(1 - step.dampening), static_cast<T>(step.weight_decay), step.nesterov,
                        step.fresh};
  };
  if (momentum_buffer.defined()) launch_each_index("kten::sgd", p.numel(), make, p, g, momentum_buffer);
  else launch_each_index("kten::sgd", p.numel(), make, p, g);
}

// PyTorch's order of operations (mul_, add_, addcmul_, sqrt, div, add_, addcdiv_), fused.
template <class T>
struct AdamKernel {
  T* p;
  const T* g;
  T* exp_avg;
  T* exp_avg_sq;
  T neg_step_size, bias_correction2_sqrt, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, decay;
  bool fresh;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const T param = p[i] * decay;
    T grad = g[i];
    if (weight_decay != T(0)) grad = grad + weight_decay * param;
    const T m = (fresh ? T(0) : exp_avg[i] * beta1) + one_minus_beta1 * grad;
    const T v = (fresh ? T(0) : exp_avg_sq[i] * beta2) + one_minus_beta2 * grad * grad;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const T denom = math::sqrt(v) / bias_correction2_sqrt + eps;
    p[i] = param + neg_step_size * (m / denom);
  }
};

void adam_update(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& step) {
  check_same_shape("kten::adam", p, g, "gradient");
  check_same_shape("kten::adam", p, exp_avg, "exp_avg");
  check_same_shape("kten::adam", p, exp_avg_sq, "exp_avg_sq");
  launch_each_index("kten::adam", p.numel(), [&](auto* param, auto* grad, auto* m, auto* v) {
    using T = std::remove_pointer_t<decltype(param)>;
    return AdamKernel<T>{param, grad, m, v, static_cast<T>(-step.step_size), static_cast<T>(step.bias_correction2_sqrt),
                         static_cast<T>(step.beta1), static_cast<T>(step.beta2), static_cast<T>(1 - step.beta1),
                         static_cast<T>(1 - step.beta2), static_cast<T>(step.eps), static_cast<T>(step.weight_decay),
                         static_cast<T>(step.decay), step.fresh};
  }, p, g, exp_avg, exp_avg_sq);
}

template <class T>
struct ScaleKernel {
  T* t;
  const T* factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { t[i] = t[i] * factor[0]; }
};

void scale_in_place(const Tensor& t, const Tensor& factor) {
  if (factor.numel() != 1) fail<ShapeError>("kten::scale", "the factor must hold one element, got shape ", factor.shape());
  launch_each_index("kten::scale", t.numel(), [](auto* data, auto* f) {
    return ScaleKernel<std::remove_pointer_t<decltype(data)>>{data, f};
  }, t, factor);
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
    record(label, out, {&x_in}, [p, seed, call](const Tensor& g, const Needs&) { return Grads{dropout(g, p, seed, call)}; },
           [p] { return ops::OpAttrs::of_reals({p}); });
  return out;
}

}  // namespace kten::detail
