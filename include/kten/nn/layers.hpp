#pragma once
/// \file nn/layers.hpp
/// \brief Layers: Linear (eager or lazily shaped), ReLU, and the Sequential container.

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <kten/nn/module.hpp>

namespace kten::nn {

/// \brief Options of a Linear layer.
struct LinearOptions {
  bool bias = true;                     ///< \brief learn an additive bias
  DType dtype = DType::float32;         ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;    ///< \brief initialisation seed; default: next_seed()
};

/// \brief y = x W + b with W of shape (in_features, out_features) and b of shape (out_features).
///
/// PyTorch's default initialisation: W and b uniform in [-1/sqrt(in), 1/sqrt(in)], drawn from
/// the layer's seed. Linear(out) infers in_features from the first input (LazyLinear, Dense(1)).
/// The bias is added inside the matrix product's epilogue, so forward costs one GEMM.
class Linear : public Module {
 public:
  /// \brief A lazily shaped layer: in_features comes from the first input.
  explicit Linear(std::int64_t out_features, LinearOptions options = {});
  /// \brief A layer with known input width.
  Linear(std::int64_t in_features, std::int64_t out_features, LinearOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::vector<NamedParameter> named_parameters() override;
  std::string name() const override { return "Linear"; }
  void parameters_loaded() override;

  /// \brief Input width (-1 until a lazy layer sees its first input).
  std::int64_t in_features() const { return in_features_; }
  /// \brief Output width.
  std::int64_t out_features() const { return out_features_; }
  /// \brief The (in, out) weight, undefined before a lazy layer's first call.
  const Tensor& weight() const { return weight_.value; }
  /// \brief The (out) bias, undefined without bias or before a lazy layer's first call.
  const Tensor& bias() const { return bias_.value; }

 private:
  void initialise(std::int64_t in_features);
  std::int64_t in_features_;
  std::int64_t out_features_;
  LinearOptions options_;
  std::uint64_t seed_;
  Parameter weight_;
  Parameter bias_;
};

/// \brief max(x, 0), elementwise.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "ReLU"; }
};

/// \brief Layers applied in order; its parameters are theirs, named "<index>.<name>".
class Sequential : public Module {
 public:
  /// \brief Appends a layer (taken by value) and returns it.
  template <class Layer>
  Layer& add(Layer layer) {
    static_assert(std::is_base_of_v<Module, Layer>, "Sequential::add takes a kten::nn::Module");
    auto owned = std::make_shared<Layer>(std::move(layer));
    owned->to(device());
    layers_.push_back(owned);
    return *owned;
  }
  /// \brief Number of layers.
  std::size_t size() const { return layers_.size(); }
  /// \brief The i-th layer; throws kten::Error when out of range.
  Module& operator[](std::size_t i);

  Tensor forward(const Tensor& input) override;
  void to(const Device& device) override;
  std::vector<NamedParameter> named_parameters() override;
  std::string name() const override { return "Sequential"; }
  void parameters_loaded() override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

/// \brief The seed the next layer created without one will use (a process-wide counter).
std::uint64_t next_seed();
/// \brief Restarts the counter behind next_seed(), like torch.manual_seed for initialisation.
void manual_seed(std::uint64_t seed);

}  // namespace kten::nn
