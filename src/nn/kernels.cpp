// The optimisers' own kernels, bandwidth-bound like every elementwise operation. (An op's
// gradient lives beside its forward, in the op family's file.)
#include "nn/kernels.hpp"

#include "dispatch.hpp"
#include "fail.hpp"

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

}  // namespace kten::detail
