// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/loss.hpp
/// \brief Losses: a 0-d tensor on the prediction's device, with autograd history, and its gradient
/// with respect to the prediction.
///
/// Every loss averages over its elements (PyTorch's default reduction, "mean") and is written with
/// kten's differentiable operations: `loss(model(X), Y).backward()` fills the model's gradients.
/// Any tensor expression is a loss in the same way (a physics-informed residual, for example).
/// Prediction and target live on one device (kten::DeviceMismatch otherwise); their shapes must
/// be equal unless a loss says otherwise (no silent broadcasting): kten::ShapeError.

#include <string>

#include <kten/tensor.hpp>

namespace kten::nn {

/// \brief Base of losses used by the Trainer.
class Loss {
 public:
  virtual ~Loss() = default;
  /// \brief The loss of `prediction` against `target`: a 0-d tensor on their device, recorded for
  /// autograd when the prediction requires grad.
  virtual Tensor operator()(const Tensor& prediction, const Tensor& target) const = 0;
  /// \brief d(loss)/d(prediction), the prediction's shape, on its device. The default runs
  /// autograd through operator() on a detached prediction (the caller's graph is untouched, even
  /// under a NoGradGuard).
  virtual Tensor backward(const Tensor& prediction, const Tensor& target) const;
};

/// \brief Mean squared error, mean((prediction - target)^2), as PyTorch's MSELoss.
class MSELoss : public Loss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
  /// \brief The closed form 2 (prediction - target) / numel.
  Tensor backward(const Tensor& prediction, const Tensor& target) const override;
};

/// \brief Mean absolute error, mean(|prediction - target|), as PyTorch's L1Loss (its gradient at
/// a zero difference is 0, as PyTorch's).
class L1Loss : public Loss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
};

/// \brief PyTorch's HuberLoss: with d = prediction - target, 0.5 d^2 where |d| < delta and
/// delta (|d| - 0.5 delta) elsewhere, averaged. The gradient is PyTorch's, d clamped to
/// [-delta, delta] over numel (NaN where d is NaN).
class HuberLoss : public Loss {
 public:
  /// \brief The loss with threshold `delta`: finite and > 0, else kten::Error.
  explicit HuberLoss(double delta = 1.0);
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
  /// \brief The threshold between the quadratic and the linear piece.
  double delta() const { return delta_; }

 private:
  double delta_;
};

/// \brief Cross entropy of class scores, as PyTorch's CrossEntropyLoss: the prediction holds
/// unnormalised scores (logits) of shape (N, C), float32 or float64, the target N class indices
/// (int64, shape (N)); the loss is the mean over the N rows of -log_softmax(row)[class], computed
/// stably. A single example may be (C) scores with a 0-d target.
///
/// Errors: a target that is not int64 is kten::DTypeError, shapes that do not fit kten::ShapeError.
/// A class outside [0, C) is kten::IndexError when the target is on cpu(), checked on the host
/// before computing. On a GPU that check would cost a host synchronisation every step, so there
/// the loss becomes NaN instead (visible when it is read). There is no ignore_index: every target
/// must be a class.
class CrossEntropyLoss : public Loss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
};

/// \brief Binary cross entropy of logits, as PyTorch's BCEWithLogitsLoss: with x the prediction
/// and y the target (probabilities in [0, 1], x's shape and dtype), the mean of
/// max(x, 0) - x y + log(1 + e^-|x|), which never overflows. The gradient is PyTorch's,
/// (sigmoid(x) - y) / numel for x (also at x = 0) and -x / numel for y.
class BCEWithLogitsLoss : public Loss {
 public:
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override;
};

}  // namespace kten::nn
