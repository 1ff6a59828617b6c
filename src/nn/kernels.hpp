#pragma once
// Internal: the optimisers' kernels.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief p -= lr * (g + weight_decay * p), in place.
void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay);

}  // namespace kten::detail
