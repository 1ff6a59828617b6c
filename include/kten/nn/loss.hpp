#pragma once
/// \file nn/loss.hpp
/// \brief Losses: a value on the device and its gradient with respect to the prediction.

#include <string>

#include <kten/tensor.hpp>

namespace kten::nn {

/// \brief Base of losses used by the Trainer.
class Loss {
 public:
  virtual ~Loss() = default;
  /// \brief The loss of `prediction` against `target`: a 0-d tensor on their device.
  virtual Tensor operator()(const Tensor& prediction, const Tensor& target) const = 0;
  /// \brief d(loss)/d(prediction).
  virtual Tensor backward(const Tensor& prediction, const Tensor& target) const = 0;
};

/// \brief Mean squared error, mean((prediction - target)^2), as PyTorch's MSELoss. Shapes must
/// be equal (no silent broadcasting): a mismatch throws kten::ShapeError.
class MSELoss : public Loss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
  Tensor backward(const Tensor& prediction, const Tensor& target) const override;
};

}  // namespace kten::nn
