#pragma once
// Internal: the elementwise kernels behind the layers and optimisers.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief The gradient of relu at x: 0 where x <= 0, else grad (NaN x included, as in PyTorch).
Tensor relu_grad(const Tensor& x, const Tensor& grad);
/// \brief p -= lr * (g + weight_decay * p), in place.
void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay);

}  // namespace kten::detail
