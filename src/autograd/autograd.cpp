// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The autograd tape: recording nodes, the backward pass over them, and Tensor's autograd calls.
// The pass visits each node once, after every node that uses its output (Kahn's order over the
// nodes reachable from the root), so a node's output gradient is complete when it runs.
#include <cstdlib>
#include <cstring>
#include <deque>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <kten/ops.hpp>
#include <kten/runtime.hpp>

#include "autograd.hpp"
#include "core/checks.hpp"
#include "core/pool.hpp"
#include "core/storage.hpp"
#include "dispatch/dispatch.hpp"

namespace kten {
namespace detail {

thread_local bool grad_mode_enabled = true;
thread_local Tracer* active_tracer = nullptr;

const std::shared_ptr<AutogradMeta>& AutogradAccess::no_meta() {
  static const std::shared_ptr<AutogradMeta> none;
  return none;
}

bool recording_any(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

std::atomic<bool> check_saved_on{[] {
  const char* env = std::getenv("KTEN_CHECK_SAVED");
  return env != nullptr && std::strcmp(env, "1") == 0;
}()};

namespace {

// What saved() copied since this thread's last record(): that record()'s node keeps it.
thread_local std::vector<SavedSnapshot> pending_snapshots;

// The tensors saved for `node` that were written since: a kten::Error naming the first one.
void check_snapshots(const Node& node) {
  for (const SavedSnapshot& s : node.snapshots) {
    // Elements that differ, NaN counting as equal to NaN (a field may hold NaN without being written).
    const Tensor now = s.saved;
    const Tensor differ = ne(now, s.copy).astype(float64) - ne(now, now).astype(float64) * ne(s.copy, s.copy).astype(float64);
    const auto changed = static_cast<std::int64_t>(sum(differ).to(cpu()).item<double>());
    if (changed == 0) continue;
    const std::string which = s.input >= 0 ? "its input " + std::to_string(s.input) : std::string("a tensor it saved");
    fail("backward()", "going back through ", node.name, ", ", which, " (wrapped memory at ", now.data(), ", shape ",
         now.shape(), ", ", now.dtype(), ", on ", now.device(), ") was written after the forward pass saved it: ",
         changed, " of ", now.numel(), " elements differ, so its gradients would be wrong (check by KTEN_CHECK_SAVED / "
         "set_check_saved()). Write a wrapped field after backward() and the optimiser step, or train on a copy "
         "(x.copyto(device)) made before the write");
  }
}

}  // namespace

void snapshot_if_wrapped(const Tensor& t) {
  if (t.defined() && t.storage()->external) pending_snapshots.push_back({t.detach(), t.copyto(t.device()), -1});
}

void record(const char* name, Tensor& out, const std::vector<const Tensor*>& inputs, BackwardFn fn, TraceAttrs attrs) {
  auto node = std::make_shared<Node>();
  if (!pending_snapshots.empty()) {
    node->snapshots = std::move(pending_snapshots);
    pending_snapshots.clear();
    for (SavedSnapshot& s : node->snapshots)
      for (std::size_t i = 0; i < inputs.size() && s.input < 0; ++i)
        if (inputs[i]->defined() && inputs[i]->storage() == s.saved.storage()) s.input = static_cast<int>(i);
  }
  node->name = name;
  node->inputs.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    node->inputs.push_back(AutogradAccess::meta(*t));
    // Only an input that requires grad receives one: the others (constants, an index listed for
    // a trace) keep an empty shape, no copy.
    node->input_shapes.push_back(node->inputs.back() ? t->shape() : Shape{});
  }
  node->backward = std::move(fn);
  auto meta = std::make_shared<AutogradMeta>();
  meta->grad_fn = std::move(node);
  AutogradAccess::set_meta(out, std::move(meta));
  if (active_tracer) active_tracer->op(name, out, inputs, attrs());
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  // One multi-axis sum over the leading axes broadcasting added and the axes it stretched from 1
  // (at least one, as the shapes differ), the stretched ones kept; the leading ones, now of
  // extent 1, are then dropped by a view.
  const int lead = g.ndim() - static_cast<int>(shape.size());
  std::vector<int> axes;
  for (int d = 0; d < g.ndim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) axes.push_back(d);
  return sum(g, axes, true).reshape(shape);
}

namespace {

void check_float(const char* op, DType dtype) {
  if (!is_floating(dtype))
    fail<DTypeError>(op, "only float32 and float64 tensors have gradients, this one is ", dtype,
                     "; convert with .astype(kten::float32) first");
}

// dst[i] += src[i]: the tape's own kernel (it knows the ops only through what they record).
// Bandwidth-bound: two reads and a write per element.
template <class T>
struct AccumulateKernel {
  T* dst;
  const T* src;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { dst[i] += src[i]; }
};

// leaf.grad += g. The first gradient is adopted when nothing else holds it (no copy); later ones
// are added in place, so a gradient handle taken earlier (an optimiser's, Parameter::grad) stays valid.
void accumulate_leaf(AutogradMeta& leaf, Tensor g) {
  if (!leaf.grad.defined()) {
    if (!g.is_contiguous()) {
      leaf.grad = g.contiguous();
    } else if (sole_owner(g)) {
      leaf.grad = std::move(g);
    } else {
      leaf.grad = g.copyto(g.device());
    }
    return;
  }
  if (g.shape() == leaf.grad.shape() && g.is_contiguous() && leaf.grad.is_contiguous()) {
    launch_each_index("kten::accumulate_grad", g.numel(), [](auto* dst, auto* src) {
      return AccumulateKernel<std::remove_pointer_t<decltype(dst)>>{dst, src};
    }, leaf.grad, g);
    return;
  }
  leaf.grad.copy_from(leaf.grad + g);
}

void check_gradient(const Tensor& root, const Tensor& gradient) {
  check_compatible("backward()", root, gradient);
  if (gradient.shape() != root.shape())
    fail<ShapeError>("backward()", "the gradient has shape ", gradient.shape(), " but the tensor has shape ",
                     root.shape(), "; they must be equal");
}

}  // namespace

void set_grad_ready_hook(const Tensor& leaf, std::function<void()> hook) {
  const auto& meta = AutogradAccess::meta(leaf);
  if (!meta || meta->grad_fn) fail("set_grad_ready_hook", "the tensor is not a leaf that requires grad");
  meta->grad_ready = std::move(hook);
}

void run_backward(const Tensor& root, const Tensor& gradient_in, bool retain_graph) {
  check_defined(root, "backward()");
  const auto& root_meta = AutogradAccess::meta(root);
  if (!root_meta)
    fail("backward()", "the tensor does not require grad: no operation on it was recorded. Call requires_grad_() "
         "on the leaves (parameters, inputs) before computing it, outside any NoGradGuard");
  Tensor gradient = gradient_in;
  if (gradient.defined()) {
    check_gradient(root, gradient);
  } else {
    if (root.numel() != 1)
      fail("backward()", "a gradient is implied only for a one-element output, and this tensor has shape ",
           root.shape(), "; pass backward(gradient) with a gradient of that shape");
    gradient = ones(root.shape(), root.device(), root.dtype());
  }
  NoGradGuard no_grad;  // backward functions compute with tensors; none of that is recorded
  Region region("kten::backward");
  if (!root_meta->grad_fn) {
    accumulate_leaf(*root_meta, gradient);
    if (root_meta->grad_ready) root_meta->grad_ready();
    return;
  }

  // How many reachable nodes use each node's output, and each hooked leaf.
  std::unordered_map<Node*, int> users;
  std::unordered_map<AutogradMeta*, int> leaf_users;
  std::vector<Node*> stack{root_meta->grad_fn.get()};
  users[stack.back()] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& input : node->inputs) {
      if (input && !input->grad_fn && input->grad_ready) ++leaf_users[input.get()];
      if (!input || !input->grad_fn) continue;
      auto [it, first_visit] = users.try_emplace(input->grad_fn.get(), 0);
      ++it->second;
      if (first_visit) stack.push_back(input->grad_fn.get());
    }
  }

  std::unordered_map<Node*, Tensor> grads{{root_meta->grad_fn.get(), gradient}};
  std::deque<Node*> ready{root_meta->grad_fn.get()};
  while (!ready.empty()) {
    Node* node = ready.front();
    ready.pop_front();
    const auto found = grads.find(node);
    Grads input_grads;
    if (found != grads.end()) {
      if (!node->backward)
        fail("backward()", "going back through ", node->name, " a second time, but the first backward() freed "
             "what the graph saved; pass retain_graph = true to the first backward() to go back twice");
      Needs needs(node->inputs.size());
      for (std::size_t i = 0; i < needs.size(); ++i) needs[i] = node->inputs[i] != nullptr;
      check_snapshots(*node);
      input_grads = node->backward(found->second, needs);
      grads.erase(found);
      if (!retain_graph) {  // frees the saved tensors now
        node->backward = nullptr;
        node->snapshots.clear();
      }
    }
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      const auto& input = node->inputs[i];
      if (!input) continue;
      Tensor g = i < input_grads.size() ? std::move(input_grads[i]) : Tensor();
      if (g.defined() && g.shape() != node->input_shapes[i])
        fail("backward()", "the gradient of ", node->name, "'s input ", i, " has shape ", g.shape(), ", expected ",
             node->input_shapes[i], " (a bug in kten; please report it)");
      if (!input->grad_fn) {
        if (g.defined()) accumulate_leaf(*input, std::move(g));
        if (input->grad_ready && --leaf_users[input.get()] == 0) input->grad_ready();
        continue;
      }
      Node* next = input->grad_fn.get();
      if (g.defined()) {
        Tensor& slot = grads[next];
        slot = slot.defined() ? slot + g : std::move(g);
      }
      if (--users[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace detail

using detail::AutogradAccess;

Tensor& Tensor::requires_grad_(bool requires_grad) {
  detail::check_defined(*this, "requires_grad_()");
  auto& autograd = impl_->autograd;
  if (requires_grad) {
    detail::check_float("requires_grad_()", dtype());
    if (!autograd) autograd = std::make_shared<detail::AutogradMeta>();
    return *this;
  }
  if (autograd && autograd->grad_fn)
    detail::fail("requires_grad_(false)", "this tensor was computed by ", autograd->grad_fn->name,
                 "; only a leaf can stop requiring grad. Use detach() for the same data without history");
  autograd.reset();
  return *this;
}

bool Tensor::is_leaf() const { return !requires_grad() || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const { return requires_grad() ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  constexpr const char* op = "set_grad()";
  detail::check_defined(*this, op);
  if (!requires_grad() || !is_leaf())
    detail::fail(op, "only a leaf that requires grad has a gradient to set; call requires_grad_() first");
  if (grad.defined()) {
    detail::check_compatible(op, *this, grad);
    if (grad.shape() != shape())
      detail::fail<ShapeError>(op, "the gradient has shape ", grad.shape(), " but the tensor has shape ", shape());
  }
  impl_->autograd->grad = grad;
}

const char* Tensor::grad_fn() const { return is_leaf() ? nullptr : impl_->autograd->grad_fn->name; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  detail::run_backward(*this, gradient, retain_graph);
}
void Tensor::backward() const { detail::run_backward(*this, Tensor(), false); }

Tensor Tensor::detach() const {
  Tensor out;
  if (!impl_) return out;
  out.impl_ = detail::make_pooled<detail::TensorImpl>(*impl_);
  out.impl_->autograd.reset();
  return out;
}

NoGradGuard::NoGradGuard() : previous_(detail::grad_mode_enabled) { detail::grad_mode_enabled = false; }
NoGradGuard::~NoGradGuard() { detail::grad_mode_enabled = previous_; }

bool is_grad_enabled() { return detail::grad_mode_enabled; }

bool set_check_saved(bool on) { return detail::check_saved_on.exchange(on); }
bool check_saved_enabled() { return detail::check_saved_on; }

}  // namespace kten
