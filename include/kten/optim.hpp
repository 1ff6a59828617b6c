#pragma once
/// \file optim.hpp
/// \brief Optimisers: update a module's parameters from their gradients, on their device.

#include <kten/nn/module.hpp>

namespace kten::optim {

/// \brief Base of optimisers used by the Trainer.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// \brief Updates every parameter of `model` from its gradient.
  virtual void step(nn::Module& model) = 0;
  /// \brief Zeroes every gradient of `model`.
  void zero_grad(nn::Module& model) { model.zero_grad(); }
};

/// \brief Minibatch SGD: p -= lr * (grad + weight_decay * p), one kernel per parameter.
class SGD : public Optimizer {
 public:
  /// \brief Learning rate and optional L2 weight decay; kten::Error unless both are finite and >= 0.
  explicit SGD(float lr, float weight_decay = 0.f);
  void step(nn::Module& model) override;
  /// \brief The learning rate.
  float lr() const { return lr_; }
  /// \brief The weight decay.
  float weight_decay() const { return weight_decay_; }

 private:
  float lr_;
  float weight_decay_;
};

}  // namespace kten::optim
