// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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

#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

#include <kten/tensor.hpp>

#include "autograd/op_attrs.hpp"  // plain data, the registry's form of an op's arguments

namespace kten::detail {

struct Node;

/// \brief What a tensor that requires grad carries: a leaf's gradient, or the node that computed it.
struct AutogradMeta {
  Tensor grad;                    // leaves only: accumulated by backward()
  std::shared_ptr<Node> grad_fn;  // null for a leaf
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

/// \brief A tensor over wrapped memory that a backward function keeps, with the copy made when it
/// was saved (set_check_saved() only): backward() compares the two before it uses the tensor.
struct SavedSnapshot {
  Tensor saved;
  Tensor copy;
  int input = -1;  // which of the node's inputs it is a view of (-1: its output or another tensor)
};

/// \brief One recorded operation.
struct Node {
  const char* name;
  std::vector<std::shared_ptr<AutogradMeta>> inputs;  // null for an input that needs no grad
  std::vector<Shape> input_shapes;                    // the shape each gradient must have (empty: none flows)
  BackwardFn backward;                                // empty once the graph is freed
  std::vector<SavedSnapshot> snapshots;               // set_check_saved() only; freed with backward
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

/// \brief An op's non-tensor arguments (axes, sizes, scalars, modes) in the registry's form, built
/// only when a trace asks for them (onnx::save): a training step builds none. It refers to a
/// callable written at the record() call, which outlives that call.
class TraceAttrs {
 public:
  /// \brief No attributes.
  TraceAttrs() = default;
  /// \brief Attributes computed by `f()` (an ops::OpAttrs), on demand.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TraceAttrs> &&
                                              std::is_invocable_r_v<ops::OpAttrs, const F&>>>
  TraceAttrs(const F& f) : f_(&f), call_([](const void* g) { return (*static_cast<const F*>(g))(); }) {}  // NOLINT: implicit
  /// \brief The attributes (empty ones when none were given).
  ops::OpAttrs operator()() const { return call_ ? call_(f_) : ops::OpAttrs{}; }

 private:
  const void* f_ = nullptr;
  ops::OpAttrs (*call_)(const void*) = nullptr;
};

/// \brief What watches the tape (onnx::save's trace): told of every op record() records while
/// it is this thread's active_tracer.
class Tracer {
 public:
  virtual ~Tracer() = default;
  /// \brief One recorded op: its name ("kten::conv2d"), its output, its inputs as recorded
  /// (tensors autograd does not track, such as an index, after those it does) and its attributes.
  virtual void op(const char* name, const Tensor& out, const std::vector<const Tensor*>& inputs,
                  const ops::OpAttrs& attrs) = 0;
};

/// \brief This thread's tracer; null (the usual case) when nothing traces.
extern thread_local Tracer* active_tracer;

/// \brief Makes `tracer` this thread's active_tracer for its lifetime (null: pauses a trace),
/// restoring the previous one when it ends, by an exception too.
class TraceScope {
 public:
  /// \brief Installs `tracer`.
  explicit TraceScope(Tracer* tracer) : previous_(active_tracer) { active_tracer = tracer; }
  ~TraceScope() { active_tracer = previous_; }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* previous_;
};

/// \brief Makes `out` the result of a node named `name` over `inputs` with backward function `fn`;
/// an active tracer is told, with the attributes `attrs` gives. Inputs that need no gradient (an
/// int64 index) may follow the others, for the tracer: the tape keeps nothing of them.
void record(const char* name, Tensor& out, const std::vector<const Tensor*>& inputs, BackwardFn fn,
            TraceAttrs attrs = {});
/// \brief record() for the common case of tensors listed in place.
inline void record(const char* name, Tensor& out, std::initializer_list<const Tensor*> inputs, BackwardFn fn,
                   TraceAttrs attrs = {}) {
  record(name, out, std::vector<const Tensor*>(inputs), std::move(fn), attrs);
}

/// \brief `compute()` (an op made of other recorded ops, such as batch_norm in evaluation mode)
/// traced as one op `name` over `inputs`: its inner ops are hidden from an active tracer, which is
/// told of the result once, when it was recorded. Without a tracer, just `compute()`.
template <class Compute>
Tensor traced_as(const char* name, std::initializer_list<const Tensor*> inputs, TraceAttrs attrs, Compute compute) {
  Tracer* const tracer = active_tracer;
  if (!tracer) return compute();
  Tensor y;
  {
    TraceScope pause(nullptr);
    y = compute();
  }
  if (y.requires_grad()) tracer->op(name, y, std::vector<const Tensor*>(inputs), attrs());
  return y;
}

/// \brief set_check_saved()'s switch, read by every saved().
extern std::atomic<bool> check_saved_on;
/// \brief Copies `t` when it is over wrapped memory, for the next record() on this thread to keep
/// (set_check_saved()).
void snapshot_if_wrapped(const Tensor& t);

/// \brief A tensor kept by a backward function: the same data without history, so the node does
/// not keep its own output's node alive (no reference cycle). Every tensor a backward function
/// reads goes through here, so that set_check_saved() sees it.
inline Tensor saved(const Tensor& t) {
  if (check_saved_on.load(std::memory_order_relaxed)) snapshot_if_wrapped(t);
  return t.detach();
}

/// \brief `g` summed over the axes broadcasting added or stretched, so it has `shape` (a gradient
/// flowing back to a broadcast input); `g` itself when it already has it.
Tensor sum_to(const Tensor& g, const Shape& shape);

/// \brief Makes `hook` the grad_ready hook of `leaf`, a leaf that requires grad (empty: none).
void set_grad_ready_hook(const Tensor& leaf, std::function<void()> hook);

/// \brief Runs backward from `root` (Tensor::backward; `gradient` undefined: the implied 1 of a
/// one-element root).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace kten::detail
