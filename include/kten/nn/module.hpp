#pragma once
/// \file nn/module.hpp
/// \brief kten::nn::Module: parameters that live on one device, forward and backward passes,
/// save and load.

#include <memory>
#include <string>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::nn {

/// \brief A learnable tensor with its gradient. `expected` describes the shape a lazily-shaped
/// parameter will take (-1 for an extent not known until the first call).
struct Parameter {
  Tensor value;    ///< \brief undefined until a lazy layer sees its first input
  Tensor grad;     ///< \brief same shape, dtype and device as value
  Shape expected;  ///< \brief the shape value has or will have (-1: inferred later)
  DType dtype = DType::float32;  ///< \brief the dtype value has or will have
};

/// \brief A parameter slot and its name: "weight", or "0.weight" inside a Sequential.
struct NamedParameter {
  std::string name;  ///< \brief qualified name, as written by save()
  Parameter* slot;   ///< \brief the module's own slot
};

/// \brief Base of every layer. A module's parameters live on one device, device(); to() moves
/// them. Calling a module on an input on another device throws kten::DeviceMismatch.
class Module {
 public:
  virtual ~Module() = default;

  /// \brief Runs forward() after checking the input is on device(); keeps what backward() needs.
  Tensor operator()(const Tensor& input);
  /// \brief The layer's computation, on the input's device.
  virtual Tensor forward(const Tensor& input) = 0;
  /// \brief Given d(loss)/d(output) of the last call, accumulates parameter gradients and returns
  /// d(loss)/d(input). Throws kten::Error when there was no forward call to go back through.
  virtual Tensor backward(const Tensor& grad_output) = 0;

  /// \brief Moves every parameter and gradient to `device` (no-op for those already there);
  /// lazily-shaped parameters are created there later.
  virtual void to(const Device& device);
  /// \brief Where the parameters live (cpu() until to() says otherwise).
  Device device() const { return device_; }
  /// \brief The parameter tensors (defined ones), in registration order, sharing storage.
  std::vector<Tensor> parameters();
  /// \brief Every parameter slot with its gradient, in registration order, names qualified.
  virtual std::vector<NamedParameter> named_parameters();
  /// \brief Sets every gradient to zero (on the device).
  void zero_grad();

  /// \brief Writes the parameters to `path`: a versioned, little-endian, checksummed file that
  /// does not depend on the device. The write is atomic: a crash never leaves a broken file.
  void save(const std::string& path);
  /// \brief Reads parameters saved by save() onto `device` (the module moves there). A missing,
  /// truncated, corrupted or mismatching file throws kten::FormatError and leaves the module
  /// exactly as it was.
  void load(const std::string& path, const Device& device);

  /// \brief The layer's name in messages, e.g. "Linear".
  virtual std::string name() const = 0;

  /// \brief Hook called after load() replaced the parameters, so lazy layers take their shape.
  virtual void parameters_loaded() {}

 protected:
  /// \brief Records the device without moving anything (for containers).
  void set_device(const Device& device) { device_ = device; }

 private:
  Device device_ = cpu();
};

}  // namespace kten::nn
