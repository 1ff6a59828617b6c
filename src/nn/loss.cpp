// Losses, computed on the prediction's device.
#include <kten/nn/loss.hpp>
#include <kten/ops.hpp>

#include "checks.hpp"
#include "reduce.hpp"

namespace kten::nn {

namespace {
void check_pair(const char* op, const Tensor& prediction, const Tensor& target) {
  detail::check_compatible(op, prediction, target);
  if (prediction.shape() != target.shape())
    detail::fail<ShapeError>(op, "prediction ", prediction.shape(), " and target ", target.shape(),
                             " differ; reshape one so they match (no silent broadcasting)");
}
}  // namespace

Tensor MSELoss::operator()(const Tensor& prediction, const Tensor& target) const {
  check_pair("MSELoss", prediction, target);
  return detail::mean_square(prediction - target);
}

Tensor MSELoss::backward(const Tensor& prediction, const Tensor& target) const {
  check_pair("MSELoss backward", prediction, target);
  return (prediction - target) * (2.0 / static_cast<double>(prediction.numel()));
}

}  // namespace kten::nn
