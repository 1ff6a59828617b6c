#pragma once
/// \file nn/module.hpp
/// \brief kten::nn::Module: parameters that live on one device, forward and backward passes,
/// save and load, state dicts.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::nn {

/// \brief A learnable tensor with its gradient. `expected` describes the shape a lazily-shaped
/// parameter will take (-1 for an extent not known until the first call).
struct Parameter {
  Tensor value;    ///< \brief a leaf that requires grad; undefined until a lazy layer sees its first input
  Tensor grad;     ///< \brief value.grad(): the same storage, which backward() accumulates into in place
  Shape expected;  ///< \brief the shape value has or will have (-1: inferred later)
  DType dtype = DType::float32;  ///< \brief the dtype value has or will have
  /// \brief Parameter files (Module::save) of format versions up to this one hold this 2-D
  /// parameter transposed, and load() transposes it back; 0: stored as it is in every version.
  /// Linear's weight, (in, out) in version 1, sets 1.
  std::uint32_t transposed_in_format_up_to = 0;

  /// \brief Makes `value` a leaf that requires grad with `grad` as its gradient (zeros of value's
  /// shape when grad is undefined or does not fit): call after assigning either. An int64 or
  /// boolean value does not require grad.
  void track();
  /// \brief True when a tensor of `shape` fits this slot: value's shape, or before a lazy layer's
  /// first call the expected one, each unknown extent taken from `shape` (>= 1: never width 0).
  bool fits(const Shape& shape) const;
};

/// \brief A parameter slot and its name: "weight", or "0.weight" inside a Sequential.
struct NamedParameter {
  std::string name;  ///< \brief qualified name, as written by save()
  Parameter* slot;   ///< \brief the module's own slot
};

/// \brief Named tensors in order, as PyTorch's state_dict(): "0.weight", "0.bias", ...
using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// \brief Base of every layer. A module's parameters live on one device, device(); to() moves
/// them. Calling a module on an input on another device throws kten::DeviceMismatch.
class Module {
 public:
  virtual ~Module() = default;

  /// \brief Runs forward() after checking the input is on device(). Unless a NoGradGuard is
  /// alive, the computation is recorded on the autograd tape and the call's input and output are
  /// kept for backward(grad_output).
  Tensor operator()(const Tensor& input);
  /// \brief The layer's computation, on the input's device, written with kten's differentiable
  /// operations (autograd derives its backward).
  virtual Tensor forward(const Tensor& input) = 0;
  /// \brief Given d(loss)/d(output) of the last call, goes back through the tape recorded by that
  /// call: accumulates the parameters' gradients and returns d(loss)/d(input). Throws kten::Error
  /// when there was no recorded forward call to go back through. Training code may instead call
  /// backward() on the loss, which does not compute d(loss)/d(input).
  virtual Tensor backward(const Tensor& grad_output);

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

  /// \brief Training mode (on = true), or evaluation mode (on = false): layers such as Dropout act
  /// differently in each. A new module is in training mode; containers pass the mode on to their
  /// layers (override this to do so).
  virtual void train(bool on = true) { training_ = on; }
  /// \brief Evaluation mode: train(false).
  void eval() { train(false); }
  /// \brief True in training mode.
  bool is_training() const { return training_; }

  /// \brief Writes the parameters to `path`: a versioned, little-endian, checksummed file that
  /// does not depend on the device. The write is atomic: a crash never leaves a broken file.
  void save(const std::string& path);
  /// \brief Reads parameters saved by save() onto `device` (the module moves there). A missing,
  /// truncated, corrupted or mismatching file throws kten::FormatError and leaves the module
  /// exactly as it was.
  void load(const std::string& path, const Device& device);

  /// \brief Every parameter by its qualified name (named_parameters()' order), sharing storage
  /// with the module but detached (no history), as PyTorch's state_dict(). Throws kten::Error for
  /// a lazy layer that has no shape yet.
  StateDict state_dict();
  /// \brief Copies `state_dict`'s tensors into the parameters of the same names, in place, on
  /// device(), converting the dtype (as PyTorch's copy_). Strict: the names must be exactly the
  /// module's; otherwise the names both have are loaded. Shapes must match; a lazy layer takes
  /// its shape from the dict. Anything missing, unexpected or mismatching throws
  /// kten::FormatError naming it, and leaves the module exactly as it was.
  void load_state_dict(const StateDict& state_dict, bool strict = true);

  /// \brief The layer's name in messages, e.g. "Linear".
  virtual std::string name() const = 0;

  /// \brief Hook called after load() replaced the parameters, so lazy layers take their shape.
  virtual void parameters_loaded() {}

 protected:
  /// \brief Records the device without moving anything (for containers).
  void set_device(const Device& device) { device_ = device; }

 private:
  Device device_ = cpu();
  bool training_ = true;
  Tensor last_input_;   // the last recorded call's input (a leaf when the caller's did not require grad)
  Tensor last_output_;  // and output, for backward(grad_output)
};

}  // namespace kten::nn
