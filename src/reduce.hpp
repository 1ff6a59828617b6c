#pragma once
// Internal reductions beside the public ones (kten/ops.hpp).

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief mean(x * x) in one pass (a 0-d tensor; NaN propagates): MSELoss without a temporary.
Tensor mean_square(const Tensor& x);

}  // namespace kten::detail
