#pragma once
// Internal: the elementwise kernels behind the layers and optimisers.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief grad where x > 0, else 0: the gradient of relu at x.
Tensor relu_grad(const Tensor& x, const Tensor& grad);
/// \brief p -= lr * (g + weight_decay * p), in place.
void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay);

}  // namespace kten::detail
