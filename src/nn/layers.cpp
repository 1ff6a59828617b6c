// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Linear, the activations, LayerNorm, Dropout and Sequential on the parameters' device; autograd
// derives their backward.
#include <cmath>

#include <kten/nn/layers.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "functional.hpp"
#include "ops/dropout.hpp"
#include "ops/elementwise.hpp"
#include "ops/linalg.hpp"

namespace kten::nn {

// --- Linear ------------------------------------------------------------------------------------

Linear::Linear(std::int64_t out_features, LinearOptions options)
    : out_features_(out_features), has_bias_(options.bias), seed_(options.seed ? *options.seed : next_seed()) {
  if (out_features < 1) detail::fail<ShapeError>("Linear", "out_features must be >= 1, got ", out_features);
  weight_ = register_parameter("weight", Parameter{{}, {}, {out_features, -1}, options.dtype, /*transposed_in_format_up_to=*/1});
  if (has_bias_) bias_ = register_parameter("bias", Parameter{{}, {}, {out_features}, options.dtype});
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options)
    : Linear(out_features, options) {
  if (in_features < 1) detail::fail<ShapeError>("Linear", "in_features must be >= 1, got ", in_features);
  initialise(in_features);
}

void Linear::initialise(std::int64_t in_features) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const Device d = device();
  weight_->expected = {out_features_, in_features};
  weight_->value = uniform(weight_->expected, -bound, bound, d, seed_, weight_->dtype);
  weight_->track();
  if (bias_) {
    // A second stream of the same seed: bias and weight never share numbers.
    bias_->value = uniform({out_features_}, -bound, bound, d, seed_ ^ 0x9E3779B97F4A7C15ull, bias_->dtype);
    bias_->track();
  }
}

std::int64_t Linear::in_features() const { return weight_->value.defined() ? weight_->value.shape()[1] : -1; }

const Tensor& Linear::bias() const {
  static const Tensor none;
  return bias_ ? bias_->value : none;
}

Tensor Linear::forward(const Tensor& input) {
  detail::check_defined(input, "Linear forward");
  detail::check_same_device("Linear forward", input.device(), device());
  if (input.ndim() != 2)
    detail::fail<ShapeError>("Linear forward", "expects (batch, features), got shape ", input.shape());
  if (input.dtype() != weight_->dtype)
    detail::fail<DTypeError>("Linear forward", "the input is ", input.dtype(), " but the parameters are ",
                             weight_->dtype, "; convert with .astype(...)");
  // Every check before a lazy layer shapes itself, so a refused first input leaves it lazy.
  if (!weight_->value.defined()) {
    if (input.shape()[1] < 1)
      detail::fail<ShapeError>("Linear forward", "a lazy Linear takes in_features from its first input, whose shape ",
                               input.shape(), " has no features; in_features must be >= 1");
    initialise(input.shape()[1]);
  }
  if (input.shape()[1] != in_features())
    detail::fail<ShapeError>("Linear forward", "expects ", in_features(), " input features, got shape ", input.shape());
  return detail::linear(input, weight_->value, bias_ ? &bias_->value : nullptr);
}

// --- Activations -------------------------------------------------------------------------------

Activation::Activation(std::string name, std::function<Tensor(const Tensor&)> function)
    : name_(std::move(name)), function_(std::move(function)) {
  if (!function_) detail::fail("Activation", "layer '", name_, "' was given an empty function");
}

Tensor Activation::forward(const Tensor& input) { return function_(input); }

ReLU::ReLU() : Activation("ReLU", [](const Tensor& x) { return relu(x); }) {}
Tanh::Tanh() : Activation("Tanh", [](const Tensor& x) { return tanh(x); }) {}
Sigmoid::Sigmoid() : Activation("Sigmoid", [](const Tensor& x) { return sigmoid(x); }) {}
GELU::GELU() : Activation("GELU", [](const Tensor& x) { return gelu(x); }) {}
SiLU::SiLU() : Activation("SiLU", [](const Tensor& x) { return silu(x); }) {}
Softplus::Softplus(double beta, double threshold)
    : Activation("Softplus", [beta, threshold](const Tensor& x) { return softplus(x, beta, threshold); }),
      beta_(beta),
      threshold_(threshold) {}

// --- LayerNorm ---------------------------------------------------------------------------------

LayerNorm::LayerNorm(std::int64_t features, double eps, DType dtype) : features_(features), eps_(eps) {
  if (features < 1) detail::fail<ShapeError>("LayerNorm", "features must be >= 1, got ", features);
  if (!(std::isfinite(eps) && eps >= 0))
    detail::fail("LayerNorm", "eps must be finite and >= 0, got ", eps);
  if (!is_floating(dtype))
    detail::fail<DTypeError>("LayerNorm", "parameters are float32 or float64, not ", dtype);
  weight_ = register_parameter("weight", Parameter{ones({features}, device(), dtype), {}, {features}, dtype});
  bias_ = register_parameter("bias", Parameter{zeros({features}, device(), dtype), {}, {features}, dtype});
}

Tensor LayerNorm::forward(const Tensor& input) {
  detail::check_defined(input, "LayerNorm forward");
  if (input.ndim() == 0 || input.shape().back() != features_)
    detail::fail<ShapeError>("LayerNorm forward", "normalises the last axis, of ", features_,
                             " features, but the input has shape ", input.shape());
  if (input.dtype() != weight_->dtype)
    detail::fail<DTypeError>("LayerNorm forward", "the input is ", input.dtype(), " but the parameters are ",
                             weight_->dtype, "; convert with .astype(...)");
  return detail::layer_norm(input, weight_->value, bias_->value, eps_);
}

// --- Dropout -----------------------------------------------------------------------------------

Dropout::Dropout(double p, std::optional<std::uint64_t> seed) : p_(p), seed_(seed ? *seed : next_seed()) {
  if (!(p >= 0 && p < 1))
    detail::fail("Dropout", "p is the probability of dropping an element and must lie in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& input) {
  if (!is_training() || p_ == 0) return input;
  return detail::dropout(input, p_, seed_, calls_++);
}

// --- Sequential --------------------------------------------------------------------------------

Module& Sequential::operator[](std::size_t i) {
  if (i >= layers_.size())
    detail::fail("Sequential", "layer ", i, " does not exist (size ", layers_.size(), ")");
  return *layers_[i];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& layer : layers_) x = (*layer)(x);
  return x;
}

}  // namespace kten::nn
