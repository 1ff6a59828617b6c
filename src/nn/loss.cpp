// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Losses, computed on the prediction's device with differentiable operations.
#include <cmath>
#include <limits>
#include <vector>

#include <kten/nn/loss.hpp>
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "core/storage.hpp"
#include "ops/reduce.hpp"
#include "ops/transfer.hpp"

namespace kten::nn {

namespace {
void check_pair(const char* op, const Tensor& prediction, const Tensor& target) {
  detail::check_compatible(op, prediction, target);
  if (prediction.shape() != target.shape())
    detail::fail<ShapeError>(op, "prediction ", prediction.shape(), " and target ", target.shape(),
                             " differ; reshape one so they match (no silent broadcasting)");
}

// Records on the tape while alive, whatever the caller's grad mode (Loss::backward's own graph).
struct GradModeOn {
  bool previous = detail::grad_mode_enabled;
  GradModeOn() { detail::grad_mode_enabled = true; }
  ~GradModeOn() { detail::grad_mode_enabled = previous; }
  GradModeOn(const GradModeOn&) = delete;
  GradModeOn& operator=(const GradModeOn&) = delete;
};

// The mean of loss(x, y) over the elements, recorded with the elementwise derivatives d_x(x, y)
// and d_y(x, y) in closed form rather than through the expression's tape: for a loss whose stable
// expression has kinks where the loss is smooth, or whose tape would turn NaN into 0.
template <class Elementwise, class DX, class DY>
Tensor mean_with_derivatives(const char* name, const Tensor& x, const Tensor& y, Elementwise loss, DX d_x, DY d_y) {
  Tensor value;
  {
    const NoGradGuard no_grad;
    value = mean(loss(x, y));
  }
  if (detail::recording(x, y))
    detail::record(name, value, {&x, &y},
                   [x = detail::saved(x), y = detail::saved(y), d_x, d_y](const Tensor& g, const detail::Needs& needs) {
                     const Tensor scale = g / static_cast<double>(x.numel());
                     return detail::Grads{needs[0] ? d_x(x, y) * scale : Tensor(), needs[1] ? d_y(x, y) * scale : Tensor()};
                   });
  return value;
}
}  // namespace

Tensor Loss::backward(const Tensor& prediction, const Tensor& target) const {
  detail::check_defined(prediction, "Loss backward");
  const GradModeOn grad_mode;
  Tensor leaf = prediction.detach();
  leaf.requires_grad_();
  (*this)(leaf, target.detach()).backward();
  const Tensor grad = leaf.grad();
  return grad.defined() ? grad : zeros(prediction.shape(), prediction.device(), prediction.dtype());
}

Tensor MSELoss::operator()(const Tensor& prediction, const Tensor& target) const {
  check_pair("MSELoss", prediction, target);
  return detail::mean_square(prediction - target);
}

Tensor MSELoss::backward(const Tensor& prediction, const Tensor& target) const {
  check_pair("MSELoss backward", prediction, target);
  return (prediction - target) * (2.0 / static_cast<double>(prediction.numel()));
}

Tensor L1Loss::operator()(const Tensor& prediction, const Tensor& target) const {
  check_pair("L1Loss", prediction, target);
  return mean(abs(prediction - target));
}

HuberLoss::HuberLoss(double delta) : delta_(delta) {
  if (!(std::isfinite(delta) && delta > 0)) detail::fail("HuberLoss", "delta must be finite and > 0, got ", delta);
}

Tensor HuberLoss::operator()(const Tensor& prediction, const Tensor& target) const {
  check_pair("HuberLoss", prediction, target);
  const double delta = delta_;
  return mean_with_derivatives(
      "kten::huber_loss", prediction, target,
      [delta](const Tensor& x, const Tensor& y) {
        // Both pieces in one expression: with c = min(|d|, delta), c (|d| - c / 2) is d^2 / 2
        // where |d| <= delta and delta (|d| - delta / 2) beyond.
        const Tensor distance = abs(x - y);
        const Tensor c = clamp(distance, 0.0, delta);
        return c * (distance - 0.5 * c);
      },
      // PyTorch's derivative: d clamped to [-delta, delta] (NaN where d is NaN).
      [delta](const Tensor& x, const Tensor& y) { return clamp(x - y, -delta, delta); },
      [delta](const Tensor& x, const Tensor& y) { return clamp(y - x, -delta, delta); });
}

namespace {
// IndexError for a class outside [0, classes), read where the targets already are: on the host
// (no host wait is counted: on a GPU the same step reads nothing).
void check_classes_on_host(const Tensor& target, std::int64_t classes) {
  std::vector<std::int64_t> targets(static_cast<std::size_t>(target.numel()));
  detail::read_cpu_values(target, targets.data(), DType::int64, targets.size());
  for (const std::int64_t c : targets)
    if (c < 0 || c >= classes)
      detail::fail<IndexError>("CrossEntropyLoss", "target class ", c, " is out of range for ", classes,
                               " classes; targets must lie in [0, ", classes, ")");
}
}  // namespace

Tensor CrossEntropyLoss::operator()(const Tensor& prediction, const Tensor& target) const {
  constexpr const char* op = "CrossEntropyLoss";
  detail::check_defined(prediction, op);
  detail::check_dtype(op, "the target (class indices)", target, DType::int64, "convert it with .astype(kten::int64)");
  detail::check_same_device(op, prediction.device(), target.device());
  if (!is_floating(prediction.dtype()))
    detail::fail<DTypeError>(op, "the prediction holds class scores and must be float32 or float64, got ",
                             prediction.dtype(), "; convert it with .astype(kten::float32)");
  if (prediction.ndim() == 1 && target.ndim() == 0) return (*this)(prediction.unsqueeze(0), target.unsqueeze(0));
  if (prediction.ndim() != 2 || target.ndim() != 1 || target.shape()[0] != prediction.shape()[0])
    detail::fail<ShapeError>(op, "expects (N, C) scores with N class indices, or (C) scores with a 0-d index; got scores ",
                             prediction.shape(), " and targets ", target.shape());
  const std::int64_t classes = prediction.shape()[1];
  if (target.device().is_cpu()) check_classes_on_host(target, classes);
  const Device d = prediction.device();
  // Each row's log-probability of its class: the (N, C) one-hot mask selects it.
  const Tensor is_target = eq(target.unsqueeze(1), arange(classes, d, DType::int64));
  const Tensor picked = sum(where(is_target, log_softmax(prediction, 1), 0.0), 1);
  // A class out of range (unchecked on a GPU) matches no column: NaN marks its row, without a host read.
  const Tensor non_negative = ge(target, 0.0);
  const Tensor in_range = where(non_negative, lt(target, static_cast<double>(classes)), non_negative);
  return -mean(where(in_range, picked, std::numeric_limits<double>::quiet_NaN()));
}

Tensor BCEWithLogitsLoss::operator()(const Tensor& prediction, const Tensor& target) const {
  check_pair("BCEWithLogitsLoss", prediction, target);
  return mean_with_derivatives(
      "kten::bce_with_logits", prediction, target,
      // The stable form (1 - y) x + max(-x, 0) + log(1 + e^-|x|), in PyTorch's order, so that
      // infinite logits give its results; its kinks at 0 are no kinks of the loss.
      [](const Tensor& x, const Tensor& y) { return (1.0 - y) * x + relu(-x) + log1p(exp(-abs(x))); },
      [](const Tensor& x, const Tensor& y) { return sigmoid(x) - y; },
      [](const Tensor& x, const Tensor&) { return -x; });
}

}  // namespace kten::nn
