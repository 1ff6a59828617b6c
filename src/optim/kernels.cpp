// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The optimisers' own kernels, bandwidth-bound like every elementwise operation: each reads and
// writes every element of its tensors once, in one pass.
#include "kernels.hpp"

#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"
#include "core/kokkos_compat.hpp"

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

}  // namespace kten::detail
