// Linear, ReLU and Sequential: forward and backward on the parameters' device.
#include <atomic>
#include <cmath>

#include <kten/nn/layers.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"
#include "linalg.hpp"

namespace kten::nn {

namespace {
std::atomic<std::uint64_t>& seed_counter() {
  static std::atomic<std::uint64_t> counter{0};
  return counter;
}

void check_forward_done(const Tensor& input, const std::string& layer) {
  if (!input.defined())
    detail::fail(layer + " backward", "no forward call to go back through");
}
}  // namespace

std::uint64_t next_seed() { return seed_counter()++; }
void manual_seed(std::uint64_t seed) { seed_counter() = seed; }

// --- Linear ------------------------------------------------------------------------------------

Linear::Linear(std::int64_t out_features, LinearOptions options)
    : in_features_(-1), out_features_(out_features), options_(options),
      seed_(options.seed ? *options.seed : next_seed()) {
  if (out_features < 1) detail::fail<ShapeError>("Linear", "out_features must be >= 1, got ", out_features);
  weight_ = {{}, {}, {-1, out_features}, options_.dtype};
  if (options_.bias) bias_ = {{}, {}, {out_features}, options_.dtype};
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options)
    : Linear(out_features, options) {
  if (in_features < 1) detail::fail<ShapeError>("Linear", "in_features must be >= 1, got ", in_features);
  initialise(in_features);
}

void Linear::initialise(std::int64_t in_features) {
  in_features_ = in_features;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const Device d = device();
  weight_.expected = {in_features, out_features_};
  weight_.value = uniform(weight_.expected, -bound, bound, d, seed_, options_.dtype);
  weight_.grad = zeros(weight_.expected, d, options_.dtype);
  if (options_.bias) {
    // A second stream of the same seed: bias and weight never share numbers.
    bias_.value = uniform({out_features_}, -bound, bound, d, seed_ ^ 0x9E3779B97F4A7C15ull, options_.dtype);
    bias_.grad = zeros({out_features_}, d, options_.dtype);
  }
}

void Linear::parameters_loaded() { in_features_ = weight_.value.shape()[0]; }

std::vector<NamedParameter> Linear::named_parameters() {
  std::vector<NamedParameter> out;
  out.reserve(2);  // one allocation: optimisers ask for the parameters every step
  out.push_back({"weight", &weight_});
  if (options_.bias) out.push_back({"bias", &bias_});
  return out;
}

Tensor Linear::forward(const Tensor& input) {
  detail::check_defined(input, "Linear forward");
  detail::check_same_device("Linear forward", input.device(), device());
  if (input.ndim() != 2)
    detail::fail<ShapeError>("Linear forward", "expects (batch, features), got shape ", input.shape());
  if (input.dtype() != options_.dtype)
    detail::fail<DTypeError>("Linear forward", "the input is ", input.dtype(), " but the parameters are ",
                             options_.dtype, "; convert with .astype(...)");
  // Every check before a lazy layer shapes itself, so a refused first input leaves it lazy.
  if (in_features_ < 0) {
    if (input.shape()[1] < 1)
      detail::fail<ShapeError>("Linear forward", "a lazy Linear takes in_features from its first input, whose shape ",
                               input.shape(), " has no features; in_features must be >= 1");
    initialise(input.shape()[1]);
  }
  if (input.shape()[1] != in_features_)
    detail::fail<ShapeError>("Linear forward", "expects ", in_features_, " input features, got shape ", input.shape());
  input_ = input;
  Tensor out = empty({input.shape()[0], out_features_}, input.device(), input.dtype());
  detail::gemm(input, false, weight_.value, false, out, options_.bias ? &bias_.value : nullptr, false);
  return out;
}

Tensor Linear::backward(const Tensor& grad_output) {
  detail::Region region("kten::Linear::backward");
  check_forward_done(input_, name());
  detail::check_compatible("Linear backward", grad_output, input_);
  if (grad_output.shape() != Shape{input_.shape()[0], out_features_})
    detail::fail<ShapeError>("Linear backward", "the gradient has shape ", grad_output.shape(),
                             ", the output had shape ", Shape{input_.shape()[0], out_features_});
  detail::gemm(input_, true, grad_output, false, weight_.grad, nullptr, true);  // dW += X^T dY
  if (options_.bias) bias_.grad = bias_.grad + sum(grad_output, 0);              // db += sum_rows dY
  Tensor grad_input = empty(input_.shape(), input_.device(), input_.dtype());
  detail::gemm(grad_output, false, weight_.value, true, grad_input, nullptr, false);  // dX = dY W^T
  return grad_input;
}

// --- ReLU --------------------------------------------------------------------------------------

Tensor ReLU::forward(const Tensor& input) {
  input_ = input;
  return relu(input);
}

Tensor ReLU::backward(const Tensor& grad_output) {
  detail::Region region("kten::ReLU::backward");
  check_forward_done(input_, name());
  if (grad_output.shape() != input_.shape())
    detail::fail<ShapeError>("ReLU backward", "the gradient has shape ", grad_output.shape(),
                             ", the output had shape ", input_.shape());
  return detail::relu_grad(input_, grad_output);
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

Tensor Sequential::backward(const Tensor& grad_output) {
  detail::Region region("kten::Sequential::backward");
  Tensor g = grad_output;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) g = (*it)->backward(g);
  return g;
}

void Sequential::to(const Device& device) {
  require_available(device);
  for (auto& layer : layers_) layer->to(device);
  set_device(device);
}

std::vector<NamedParameter> Sequential::named_parameters() {
  std::vector<NamedParameter> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    auto inner = layers_[i]->named_parameters();
    if (out.empty()) {  // the common case of one layer with parameters: its vector, renamed in place
      out = std::move(inner);
      for (auto& p : out) p.name = std::to_string(i) + "." + p.name;
      continue;
    }
    for (auto& [name, slot] : inner) out.push_back({std::to_string(i) + "." + name, slot});
  }
  return out;
}

void Sequential::parameters_loaded() {
  for (auto& layer : layers_) layer->parameters_loaded();
}

}  // namespace kten::nn
