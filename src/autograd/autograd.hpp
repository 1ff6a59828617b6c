#pragma once
// Internal: the autograd tape. An operation computes its result, then, only when an input requires
// grad and grad mode is on, records one Node holding its backward function:
//
//   Tensor y = unary<Exp>("kten::exp", x);
//   if (recording(x))
//     record("kten::exp", y, {x}, [y = saved(y)](const Tensor& g, const Needs&) { return Grads{g * y}; });
//   return y;
//
// The backward function runs with grad mode off and returns one gradient per input (undefined
// where needs[i] is false), shaped like that input; broadcasting is undone with sum_to().

#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::detail {

struct Node;

/// \brief What a tensor that requires grad carries: a leaf's gradient, or the node that computed it.
struct AutogradMeta {
  Tensor grad;                    // leaves only: accumulated by backward()
  std::shared_ptr<Node> grad_fn;  // null for a leaf
  /// \brief A leaf made by Module::operator() so that Module::backward() can return d/d(input):
  /// its gradient is computed only by Module::backward(), never by Tensor::backward().
  bool module_input = false;
  /// \brief Leaves only: called once per backward pass, right after the last gradient this pass
  /// brings to the leaf was accumulated (DistributedDataParallel starts an all_reduce from it).
  std::function<void()> grad_ready;
};

/// \brief One gradient per input of a node (undefined: none flows there).
using Grads = std::vector<Tensor>;
/// \brief Which inputs of a node need a gradient in this backward pass.
using Needs = std::vector<bool>;
/// \brief A node's backward function: the gradient of its output -> the gradients of its inputs.
using BackwardFn = std::function<Grads(const Tensor& grad_output, const Needs& needs)>;

/// \brief One recorded operation.
struct Node {
  const char* name;
  std::vector<std::shared_ptr<AutogradMeta>> inputs;  // null for an input that needs no grad
  std::vector<Shape> input_shapes;                    // the shape each gradient must have
  BackwardFn backward;                                // empty once the graph is freed
};

/// \brief Tensor's private autograd slot, for the tape only.
struct AutogradAccess {
  static const std::shared_ptr<AutogradMeta>& meta(const Tensor& t) { return t.impl_ ? t.impl_->autograd : no_meta(); }
  /// \brief Sets the slot of `t`'s implementation: every handle sharing it sees the change.
  static void set_meta(Tensor& t, std::shared_ptr<AutogradMeta> meta) { t.impl_->autograd = std::move(meta); }
  /// \brief The slot of an undefined tensor: null.
  static const std::shared_ptr<AutogradMeta>& no_meta();
};

/// \brief True when `t` is the only handle to its implementation and its implementation the only
/// user of its storage: nothing else can see its elements change (a gradient can be adopted).
inline bool sole_owner(const Tensor& t) { return t.impl().use_count() == 1 && t.storage().use_count() == 1; }

/// \brief Grad mode of this thread (NoGradGuard turns it off).
extern thread_local bool grad_mode_enabled;

/// \brief True when an operation on these inputs must be recorded: grad mode on and one requires grad.
template <class... Tensors>
bool recording(const Tensors&... inputs) {
  return (inputs.requires_grad() || ...) && grad_mode_enabled;
}
/// \brief recording() over a list of inputs (cat, stack).
bool recording_any(const std::vector<Tensor>& inputs);

/// \brief Makes `out` the result of a node named `name` over `inputs` with backward function `fn`.
void record(const char* name, Tensor& out, const std::vector<const Tensor*>& inputs, BackwardFn fn);
/// \brief record() for the common case of tensors listed in place.
inline void record(const char* name, Tensor& out, std::initializer_list<const Tensor*> inputs, BackwardFn fn) {
  record(name, out, std::vector<const Tensor*>(inputs), std::move(fn));
}

/// \brief A tensor kept by a backward function: the same data without history, so the node does
/// not keep its own output's node alive (no reference cycle).
inline Tensor saved(const Tensor& t) { return t.detach(); }

/// \brief `g` summed over the axes broadcasting added or stretched, so it has `shape` (a gradient
/// flowing back to a broadcast input); `g` itself when it already has it.
Tensor sum_to(const Tensor& g, const Shape& shape);

/// \brief Makes `hook` the grad_ready hook of `leaf`, a leaf that requires grad (empty: none).
void set_grad_ready_hook(const Tensor& leaf, std::function<void()> hook);

/// \brief Runs backward from `root` (see Tensor::backward); with `module_inputs`, leaves made by
/// Module::operator() receive their gradients too. With `stop_at` (a computed tensor), the pass
/// does not go back past it and returns its gradient (Module::backward of an inner module).
Tensor run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool module_inputs,
                    const Tensor* stop_at = nullptr);

}  // namespace kten::detail
