// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/layers.hpp
/// \brief Layers: Linear (eager or lazily shaped), the activations, LayerNorm, Dropout, and the
/// Sequential container.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <kten/nn/module.hpp>
#include <kten/random.hpp>  // nn::next_seed(), nn::manual_seed()
// Pooling and resampling layers (issue 31 item 2).
#include <kten/nn/resample.hpp>

// Convolution layers (issue 31)
#include <kten/nn/conv.hpp>

namespace kten::nn {

/// \brief Options of a Linear layer.
struct LinearOptions {
  bool bias = true;                     ///< \brief learn an additive bias
  DType dtype = DType::float32;         ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;    ///< \brief initialisation seed; default: next_seed()
};

/// \brief y = x W^T + b with W of shape (out_features, in_features) and b of shape (out_features),
/// PyTorch's layout and parameter names ("weight", "bias").
///
/// PyTorch's default initialisation: W and b uniform in [-1/sqrt(in), 1/sqrt(in)], drawn from
/// the layer's seed. Linear(out) infers in_features from the first input (LazyLinear, Dense(1)).
/// Forward costs one GEMM, which reads W transposed in place and adds the bias in its epilogue.
class Linear : public Module {
 public:
  /// \brief A lazily shaped layer: in_features comes from the first input.
  explicit Linear(std::int64_t out_features, LinearOptions options = {});
  /// \brief A layer with known input width.
  Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Linear"; }

  /// \brief Input width (-1 until a lazy layer sees its first input).
  std::int64_t in_features() const;
  /// \brief Output width.
  std::int64_t out_features() const { return out_features_; }
  /// \brief The (out, in) weight, undefined before a lazy layer's first call.
  const Tensor& weight() const { return weight_->value; }
  /// \brief The (out) bias, undefined without bias or before a lazy layer's first call.
  const Tensor& bias() const;

 private:
  void initialise(std::int64_t in_features);
  std::int64_t out_features_;
  bool has_bias_;
  std::uint64_t seed_;
  std::shared_ptr<Parameter> weight_;  // registered "weight"; lazily shaped (out, -1) until the first call
  std::shared_ptr<Parameter> bias_;    // registered "bias", or null without bias
};

/// \brief A layer without parameters that applies one elementwise function, e.g.
/// `Activation("Mish", [](const Tensor& x) { return x * tanh(softplus(x)); })`. The function is
/// written with kten's differentiable operations, so autograd derives the backward.
class Activation : public Module {
 public:
  /// \brief The layer `name` computing `function(input)`.
  Activation(std::string name, std::function<Tensor(const Tensor&)> function);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return name_; }

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> function_;
};

/// \brief max(x, 0), elementwise (kten::relu).
class ReLU : public Activation {
 public:
  /// \brief The layer.
  ReLU();
};

/// \brief tanh(x), elementwise.
class Tanh : public Activation {
 public:
  /// \brief The layer.
  Tanh();
};

/// \brief 1 / (1 + e^-x), elementwise.
class Sigmoid : public Activation {
 public:
  /// \brief The layer.
  Sigmoid();
};

/// \brief x Phi(x) with Phi the standard normal CDF, in its exact erf form (PyTorch's default
/// GELU, not the tanh approximation).
class GELU : public Activation {
 public:
  /// \brief The layer.
  GELU();
};

/// \brief x sigmoid(x) (also called Swish), elementwise.
class SiLU : public Activation {
 public:
  /// \brief The layer.
  SiLU();
};

/// \brief log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (PyTorch's Softplus;
/// kten::softplus).
class Softplus : public Activation {
 public:
  /// \brief The layer, with PyTorch's defaults beta 1 and threshold 20.
  explicit Softplus(double beta = 1, double threshold = 20);
  /// \brief The sharpness beta.
  double beta() const { return beta_; }
  /// \brief Above beta x > threshold the layer returns x.
  double threshold() const { return threshold_; }

 private:
  double beta_, threshold_;
};

/// \brief Layer normalisation over the last axis (PyTorch's LayerNorm with one normalised
/// dimension): (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance (divided by
/// the number of features, as PyTorch), weight and bias of shape (features) starting at ones and
/// zeros. An input whose last extent is not `features` throws ShapeError, one of another dtype
/// than the parameters DTypeError.
class LayerNorm : public Module {
 public:
  /// \brief Normalises `features` values; eps (finite, >= 0, else kten::Error) keeps the
  /// division finite for a constant input; `dtype` is the parameters' (and inputs') dtype.
  explicit LayerNorm(std::int64_t features, double eps = 1e-5, DType dtype = DType::float32);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "LayerNorm"; }

  /// \brief The number of features normalised together.
  std::int64_t features() const { return features_; }
  /// \brief The epsilon added to the variance.
  double eps() const { return eps_; }
  /// \brief The (features) scale, ones at first (registered "weight").
  const Tensor& weight() const { return weight_->value; }
  /// \brief The (features) shift, zeros at first (registered "bias").
  const Tensor& bias() const { return bias_->value; }

 private:
  std::int64_t features_;
  double eps_;
  std::shared_ptr<Parameter> weight_;
  std::shared_ptr<Parameter> bias_;
};

/// \brief In training mode, zeroes each element with probability p and scales the others by
/// 1 / (1 - p) (PyTorch's inverted dropout); in evaluation mode, and for p = 0, returns its input.
///
/// The mask comes from kten's counter-based generator: element i of the layer's n-th masked call
/// depends on (seed, n, i) alone, so a seed gives the same masks on every device, and each call
/// draws a new one. A NaN input stays NaN where it is dropped (NaN * 0), as in PyTorch. The
/// gradient goes through the same mask.
class Dropout : public Module {
 public:
  /// \brief Drops with probability p, in [0, 1) (kten::Error otherwise); masks drawn from `seed`,
  /// by default nn::next_seed().
  explicit Dropout(double p = 0.5, std::optional<std::uint64_t> seed = std::nullopt);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Dropout"; }

  /// \brief The probability of zeroing an element.
  double p() const { return p_; }
  /// \brief The seed of the masks.
  std::uint64_t seed() const { return seed_; }
  /// \brief How many masks the layer has drawn (its training-mode calls with p > 0): the next
  /// call's mask is number calls().
  std::uint64_t calls() const { return calls_; }

 private:
  double p_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
};

/// \brief Layers applied in order, each registered as the child "<index>", so its parameters are
/// named "<index>.<name>" (PyTorch's nn.Sequential).
class Sequential : public Module {
 public:
  /// \brief Appends a layer (taken by value), moved to this container's device and put in its
  /// mode (training or evaluation), and returns it.
  template <class Layer>
  Layer& add(Layer layer) {
    static_assert(std::is_base_of_v<Module, Layer>, "Sequential::add takes a kten::nn::Module");
    auto owned = std::make_shared<Layer>(std::move(layer));
    owned->to(device());
    owned->train(is_training());
    layers_.push_back(register_module(std::to_string(layers_.size()), owned));
    return *owned;
  }
  /// \brief Number of layers.
  std::size_t size() const { return layers_.size(); }
  /// \brief The i-th layer; throws kten::Error when out of range.
  Module& operator[](std::size_t i);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<Module>> layers_;  // the registered children, in order, for forward()
};

}  // namespace kten::nn

// --- issue 31: normalisation layers with state and the small layers of grid models ---
#include <kten/nn/norm.hpp>
// Graph and lookup layers.
#include <kten/nn/embedding.hpp>
