// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/module.hpp
/// \brief kten::nn::Module: modules that register their parameters, buffers and children (as
/// libtorch's), live on one device, run forward and backward passes, save and load, state dicts.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::nn {

/// \brief A learnable tensor with its gradient, as a module registers it. `expected` describes the
/// shape a lazily-shaped parameter will take (-1 for an extent not known until the first call).
struct Parameter {
  // (Default member initializers, so that Parameter{value} or Parameter{value, grad} is complete.)
  Tensor value{};    ///< \brief a leaf that requires grad; undefined until a lazy layer sees its first input
  Tensor grad{};     ///< \brief value.grad(): the same tensor, which backward() accumulates into in place
  Shape expected{};  ///< \brief the shape value has or will have (-1: inferred later)
  DType dtype = DType::float32;  ///< \brief the dtype value has or will have
  /// \brief Parameter files (Module::save) of format versions up to this one hold this 2-D
  /// parameter transposed, and load() transposes it back; 0: stored as it is in every version.
  /// Linear's weight, (in, out) in version 1, sets 1.
  std::uint32_t transposed_in_format_up_to = 0;

  /// \brief Makes `value` a leaf that requires grad with `grad` as its gradient (zeros of value's
  /// shape when grad is undefined or does not fit): call after assigning either. A leaf stays the
  /// same tensor (every handle to it sees the change); a computed value is detached first. An
  /// int64 or boolean value does not require grad.
  void track();
  /// \brief True when a tensor of `shape` fits this slot: value's shape, or before a lazy layer's
  /// first call the expected one, each unknown extent taken from `shape` (>= 1: never width 0).
  bool fits(const Shape& shape) const;
};

/// \brief A parameter slot and its name: "weight", or "0.weight" inside a Sequential.
struct NamedParameter {
  std::string name;  ///< \brief qualified name, as written by save()
  Parameter* slot;   ///< \brief the slot the module registered
};

/// \brief Named tensors in order, as PyTorch's state_dict(): "0.weight", "0.bias", ...
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module;
/// \brief Modules by name, in registration order (named_children()).
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

/// \brief Base of every layer and model. As in libtorch, a module registers its parts, and the
/// base class walks them: register_parameter(), register_buffer() and register_module() in the
/// constructor, forward() as ordinary C++ (see CONTRIBUTING.md for a user's module):
///
///     class Block : public kten::nn::Module {
///      public:
///       Block() {
///         fc_ = register_module("fc", kten::nn::Linear(4, 4));
///         gain_ = register_parameter("gain", kten::ones({1}));
///         calls_ = register_buffer("calls", kten::zeros({}, kten::cpu(), kten::int64));
///       }
///       kten::Tensor forward(const kten::Tensor& x) override { return x + gain_ * (*fc_)(x); }
///       std::string name() const override { return "Block"; }
///      private:
///       std::shared_ptr<kten::nn::Linear> fc_;
///       kten::Tensor gain_, calls_;
///     };
///
/// A module changes its parameters and buffers in place (Tensor::set_data, copies into their
/// elements), so the handles forward() holds see to(device), to(dtype), load(), load_state_dict()
/// and optimiser steps. Parameters, buffers and children are walked in PyTorch's order: a
/// module's own parameters, then its own buffers, then each child's, in registration order,
/// recursively, with qualified names ("gain", "fc.weight"). A module's parameters and buffers live
/// on one device, device(); calling a module on an input on another device throws
/// kten::DeviceMismatch. Copies of a module share its parameters, buffers and children.
class Module {
 public:
  virtual ~Module() = default;

  /// \brief Runs forward() after checking the input is on device(). Unless a NoGradGuard is
  /// alive, the computation is recorded on the autograd tape. The module keeps no activations
  /// (neither the call's input nor its output): gradients come from Tensor::backward() on the
  /// output or a loss computed from it, as in libtorch.
  Tensor operator()(const Tensor& input);
  /// \brief The layer's computation, on the input's device, written with kten's differentiable
  /// operations (autograd derives its backward).
  virtual Tensor forward(const Tensor& input) = 0;

  /// \brief Registers `module` as the child `name` (its parameters become "name.<theirs>") and
  /// returns it. The name must be non-empty, without '.', and not yet used by a parameter, buffer
  /// or child of this module (kten::Error naming the module and the name otherwise).
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module takes a kten::nn::Module");
    add_child(std::move(name), module);
    return module;
  }
  /// \brief register_module() of a module taken by value: `conv_ = register_module("conv",
  /// kten::nn::Linear(3, 4))` gives a std::shared_ptr<kten::nn::Linear>.
  template <class M, std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>, int> = 0>
  std::shared_ptr<std::decay_t<M>> register_module(std::string name, M&& module) {
    return register_module(std::move(name), std::make_shared<std::decay_t<M>>(std::forward<M>(module)));
  }
  /// \brief Registers `tensor` as the parameter `name` and returns it: the same tensor (the same
  /// handle, sharing its storage), now a leaf that requires grad (unless `requires_grad` is false)
  /// with a zero gradient; a computed tensor is detached first. Names as register_module(); an
  /// undefined tensor is a kten::Error.
  Tensor register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  /// \brief Registers a parameter slot (a lazily shaped one: value undefined, `expected` with -1
  /// where the first input decides) and returns it; the module reads the value through it.
  std::shared_ptr<Parameter> register_parameter(std::string name, Parameter parameter);
  /// \brief Registers `tensor` as the buffer `name` and returns it (the same handle): state that
  /// state_dict(), save(), to() and train() carry but no optimiser steps and no gradient reaches
  /// (running statistics, counters; any dtype). Names as register_module().
  Tensor register_buffer(std::string name, Tensor tensor);

  /// \brief Moves every parameter, gradient and buffer to `device` in place (no-op for those
  /// already there), recursively; lazily-shaped parameters are created there later. A subclass
  /// that overrides it keeps to(DType) visible with `using Module::to;`.
  virtual void to(const Device& device);
  /// \brief Casts every float parameter, gradient and buffer to `dtype` (float32 or float64;
  /// DTypeError otherwise) in place, recursively; int64 and boolean buffers stay as they are, and
  /// lazily-shaped parameters are created in `dtype` later.
  virtual void to(DType dtype);
  /// \brief Where the parameters live (cpu() until to() says otherwise).
  Device device() const { return device_; }
  /// \brief The parameter tensors (defined ones), in named_parameters()' order, sharing storage.
  std::vector<Tensor> parameters();
  /// \brief Every parameter slot with its gradient, names qualified: this module's own in
  /// registration order, then each child's, recursively.
  std::vector<NamedParameter> named_parameters();
  /// \brief Every buffer by its qualified name: this module's own in registration order, then each
  /// child's, recursively. The handles are the module's own (set_data() or an in-place change
  /// through one changes the module's).
  StateDict named_buffers();
  /// \brief The buffers, in named_buffers()' order.
  std::vector<Tensor> buffers();
  /// \brief The direct children by name, in registration order (a wrapper's inner module, as
  /// DistributedDataParallel's, under the empty name).
  NamedModules named_children() const { return children_; }
  /// \brief The direct children, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// \brief Sets every gradient to zero (on the device).
  void zero_grad();

  /// \brief Training mode (on = true), or evaluation mode (on = false), for this module and every
  /// child, recursively: layers such as Dropout act differently in each. A new module is in
  /// training mode.
  virtual void train(bool on = true);
  /// \brief Evaluation mode: train(false).
  void eval() { train(false); }
  /// \brief True in training mode.
  bool is_training() const { return training_; }

  /// \brief Writes state_dict() (parameters and buffers) to `path`: a versioned, little-endian,
  /// checksummed file that does not depend on the device. The write is atomic: a crash never
  /// leaves a broken file.
  void save(const std::string& path);
  /// \brief Reads what save() wrote into the parameters and buffers, in place, onto `device` (the
  /// module moves there). A missing, truncated, corrupted or mismatching file throws
  /// kten::FormatError and leaves the module exactly as it was.
  void load(const std::string& path, const Device& device);

  /// \brief Every parameter and buffer by its qualified name, in PyTorch's order (see Module),
  /// sharing storage with the module but detached (no history), as PyTorch's state_dict().
  /// Throws kten::Error for a lazy layer that has no shape yet.
  StateDict state_dict();
  /// \brief Copies `state_dict`'s tensors into the parameters and buffers of the same names, in
  /// place, on device(), converting the dtype (as PyTorch's copy_). Strict: the names must be
  /// exactly the module's; otherwise the names both have are loaded. Shapes must match; a lazy
  /// layer takes its shape from the dict. Anything missing, unexpected or mismatching throws
  /// kten::FormatError naming every fault, and leaves the module exactly as it was.
  void load_state_dict(const StateDict& state_dict, bool strict = true);

  /// \brief The layer's name in messages, e.g. "Linear".
  virtual std::string name() const = 0;

  /// \brief Hook called on every module of the tree after load() or load_state_dict() replaced
  /// the parameters (a lazy layer's may have taken their shape).
  virtual void parameters_loaded() {}

 protected:
  /// \brief Records the device without moving anything.
  void set_device(const Device& device) { device_ = device; }
  /// \brief Makes `module` this wrapper's inner module: a child whose parameters, buffers and
  /// children keep their own names (DistributedDataParallel's parameters are the module's).
  void register_wrapped(std::shared_ptr<Module> module);

 private:
  /// \brief One entry of state_dict() in its order: a parameter slot or a buffer.
  struct StateEntry {
    std::string name;
    Parameter* parameter;  // null for a buffer
    Tensor* buffer;        // null for a parameter
  };
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(std::string name, std::shared_ptr<Module> module);
  /// \brief visit(prefix, module) for this module and each descendant, parents first, children in
  /// registration order; `prefix` qualifies the module's own names ("", "body.", "body.0.").
  void for_each_module(const std::string& prefix, const std::function<void(const std::string&, Module&)>& visit);
  /// \brief state_dict()'s entries, in its order.
  void collect_state(std::vector<StateEntry>& out);
  void notify_loaded();

  Device device_ = cpu();
  bool training_ = true;
  std::vector<std::pair<std::string, std::shared_ptr<Parameter>>> parameters_;
  StateDict buffers_;
  NamedModules children_;
};

}  // namespace kten::nn
