// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Module: device placement of parameters, gradients, and the input-device rule; state dicts.
#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "ops/elementwise.hpp"

namespace kten::nn {

Tensor Module::operator()(const Tensor& input) {
  if (!input.defined()) detail::check_defined(input, (name() + " forward").c_str());  // the name costs a string
  if (input.device() != device_)
    detail::fail<DeviceMismatch>(name() + " forward", "the input is on ", input.device(),
                                 " but the module's parameters are on ", device_,
                                 "; kten never copies implicitly. Move the input with x.to(", device_,
                                 ") or the module with .to(", input.device(), ")");
  // Named after the module for profilers; the name is built only when a tool listens (it costs
  // heap allocations on every call).
  std::optional<detail::Region> region;
  if (Kokkos::Profiling::profileLibraryLoaded()) region.emplace("kten::" + name() + "::forward");
  return forward(input);  // the module keeps no activations: what backward needs is on the tape
}

void Parameter::track() {
  if (!value.defined()) return;
  if (!value.is_leaf()) value = value.detach();  // computed: a leaf of its own (a leaf keeps its handles)
  if (!grad.defined() || grad.shape() != value.shape() || grad.device() != value.device() ||
      grad.dtype() != value.dtype())
    grad = zeros(value.shape(), value.device(), value.dtype());
  if (!is_floating(value.dtype())) return;  // an int64 or boolean state (a step count, a mask) has no gradient
  value.requires_grad_();
  value.set_grad(grad);
}

bool Parameter::fits(const Shape& shape) const {
  const Shape& want = value.defined() ? value.shape() : expected;
  if (want.size() != shape.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] == -1 ? shape[i] < 1 : want[i] != shape[i]) return false;
  return true;
}

// --- Registration ------------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  const std::string op = this->name() + " register_" + what;
  if (name.empty())
    detail::fail(op, "the ", what, " name is empty; give it a name, such as \"weight\"");
  if (name.find('.') != std::string::npos)
    detail::fail(op, "the ", what, " name '", name, "' contains '.', which joins names into qualified ones "
                 "(\"0.weight\"); register the module that holds it with register_module() instead");
  const auto taken = [&](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
  };
  const char* kind = taken(parameters_) ? "parameter" : taken(buffers_) ? "buffer" : taken(children_) ? "module" : nullptr;
  if (kind)
    detail::fail(op, "'", name, "' is already registered as a ", kind, " of this ", this->name(),
                 "; every parameter, buffer and child of a module needs a name of its own");
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  if (!module) detail::fail(this->name() + " register_module", "module '", name, "' is null");
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::register_wrapped(std::shared_ptr<Module> module) {
  if (!module) detail::fail(name() + " register_wrapped", "the module is null");
  children_.emplace_back(std::string(), std::move(module));
}

Tensor Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  if (!tensor.defined())
    detail::fail(this->name() + " register_parameter", "parameter '", name, "' is an undefined tensor");
  if (requires_grad && !is_floating(tensor.dtype()))
    detail::fail<DTypeError>(this->name() + " register_parameter", "parameter '", name, "' is ", tensor.dtype(),
                             ", and only float32 and float64 parameters learn; register it with register_buffer(), "
                             "or pass requires_grad = false");
  const auto registered = register_parameter(std::move(name), Parameter{std::move(tensor)});
  if (!requires_grad) registered->value.requires_grad_(false);
  return registered->value;
}

std::shared_ptr<Parameter> Module::register_parameter(std::string name, Parameter parameter) {
  check_new_name(name, "parameter");
  auto slot = std::make_shared<Parameter>(std::move(parameter));
  if (slot->value.defined()) {  // what the value says, for save(), load() and to(dtype)
    slot->expected = slot->value.shape();
    slot->dtype = slot->value.dtype();
  }
  slot->track();
  parameters_.emplace_back(std::move(name), slot);
  return slot;
}

Tensor Module::register_buffer(std::string name, Tensor tensor) {
  check_new_name(name, "buffer");
  if (!tensor.defined()) detail::fail(this->name() + " register_buffer", "buffer '", name, "' is an undefined tensor");
  if (!tensor.is_leaf()) tensor = tensor.detach();  // state, not a step of the tape
  buffers_.emplace_back(std::move(name), tensor);
  return tensor;
}

// --- Walks -------------------------------------------------------------------------------------

namespace {
// The prefix of a child's names: "conv." under "", "block.conv." under "block."; a wrapped module's
// (empty name) is its parent's.
std::string child_prefix(const std::string& prefix, const std::string& child) {
  return child.empty() ? prefix : prefix + child + ".";
}
}  // namespace

void Module::for_each_module(const std::string& prefix, const std::function<void(const std::string&, Module&)>& visit) {
  visit(prefix, *this);
  for (auto& [name, child] : children_) child->for_each_module(child_prefix(prefix, name), visit);
}

void Module::collect_state(std::vector<StateEntry>& out) {
  for_each_module("", [&](const std::string& prefix, Module& m) {
    for (auto& [name, slot] : m.parameters_) out.push_back({prefix + name, slot.get(), nullptr});
    for (auto& [name, buffer] : m.buffers_) out.push_back({prefix + name, nullptr, &buffer});
  });
}

void Module::notify_loaded() {
  for_each_module("", [](const std::string&, Module& m) { m.parameters_loaded(); });
}

std::vector<NamedParameter> Module::named_parameters() {
  std::vector<NamedParameter> out;
  for_each_module("", [&](const std::string& prefix, Module& m) {
    for (auto& [name, slot] : m.parameters_) out.push_back({prefix + name, slot.get()});
  });
  return out;
}

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters())
    if (p->value.defined()) out.push_back(p->value);
  return out;
}

StateDict Module::named_buffers() {
  StateDict out;
  for_each_module("", [&](const std::string& prefix, Module& m) {
    for (auto& [name, buffer] : m.buffers_) out.emplace_back(prefix + name, buffer);
  });
  return out;
}

std::vector<Tensor> Module::buffers() {
  std::vector<Tensor> out;
  for (auto& entry : named_buffers()) out.push_back(std::move(entry.second));
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& entry : children_) out.push_back(entry.second);
  return out;
}

// --- Modes, devices, dtypes --------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (auto& entry : children_) entry.second->train(on);
}

void Module::to(const Device& device) {
  require_available(device);
  // In place, so that the handles forward() holds see it; the gradient first, so that the value's
  // set_data() finds it there already.
  for (auto& entry : parameters_) {
    Parameter& p = *entry.second;
    if (!p.value.defined()) continue;  // lazy: made on device_ at the first call
    if (p.grad.defined()) p.grad.set_data(p.grad.to(device));
    p.value.set_data(p.value.detach().to(device));  // a move, not an operation to differentiate
  }
  for (auto& entry : buffers_) entry.second.set_data(entry.second.detach().to(device));
  for (auto& entry : children_) entry.second->to(device);
  device_ = device;
}

void Module::to(DType dtype) {
  if (!is_floating(dtype))
    detail::fail<DTypeError>(name() + " to", "a module casts its float parameters and buffers to float32 or float64, "
                             "not to ", dtype, " (integer and boolean buffers keep their dtype)");
  for (auto& entry : parameters_) {
    Parameter& p = *entry.second;
    if (!is_floating(p.dtype)) continue;  // an int64 or boolean state
    p.dtype = dtype;  // a lazy parameter is made in it
    if (p.grad.defined()) p.grad.set_data(p.grad.astype(dtype));
    if (p.value.defined()) p.value.set_data(p.value.detach().astype(dtype));
  }
  for (auto& entry : buffers_)
    if (is_floating(entry.second.dtype())) entry.second.set_data(entry.second.detach().astype(dtype));
  for (auto& entry : children_) entry.second->to(dtype);
}

void Module::zero_grad() {
  for (auto& [name, p] : named_parameters())
    if (p->grad.defined()) detail::fill(p->grad, 0.0);
}

namespace {
// "'0.weight', '0.bias'" for messages.
std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}
}  // namespace

StateDict Module::state_dict() {
  std::vector<StateEntry> entries;
  collect_state(entries);
  StateDict out;
  out.reserve(entries.size());
  for (auto& [name, p, buffer] : entries) {
    if (p && !p->value.defined())
      detail::fail("state_dict()", "parameter '", name,
                   "' has no shape yet (a lazy layer that has not seen an input); run a forward pass first");
    out.emplace_back(std::move(name), (p ? p->value : *buffer).detach());
  }
  return out;
}

void Module::load_state_dict(const StateDict& state_dict, bool strict) {
  const std::string op = name() + " load_state_dict";
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [key, t] : state_dict)
    if (!given.emplace(key, &t).second) detail::fail<FormatError>(op, "the state dict names '", key, "' twice");

  // Everything is checked, then every tensor staged on this device, before anything changes.
  std::vector<StateEntry> entries;
  collect_state(entries);
  std::vector<const Tensor*> sources(entries.size(), nullptr);
  std::vector<std::string> missing, unexpected, left_lazy;
  std::unordered_set<std::string> own;
  bool shapes_lazy = false;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const StateEntry& e = entries[i];
    own.insert(e.name);
    const auto found = given.find(e.name);
    if (found != given.end()) sources[i] = found->second;
    else missing.push_back(e.name);
    if (!e.parameter || e.parameter->value.defined()) continue;
    if (sources[i]) shapes_lazy = true;
    else left_lazy.push_back(e.name);
  }
  for (const auto& entry : state_dict)
    if (!own.count(entry.first)) unexpected.push_back(entry.first);
  // Every fault at once, as PyTorch's "Error(s) in loading state_dict": names (strict), then each
  // entry that cannot load (in either mode).
  std::vector<std::string> faults;
  const bool names_differ = strict && (!missing.empty() || !unexpected.empty());
  if (strict && !missing.empty()) faults.push_back("missing " + quoted(missing));
  if (strict && !unexpected.empty()) faults.push_back("unexpected " + quoted(unexpected));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!sources[i]) continue;
    const Tensor& t = *sources[i];
    const StateEntry& e = entries[i];
    const bool fits = e.parameter ? e.parameter->fits(t.shape()) : t.shape() == e.buffer->shape();
    if (!t.defined())
      faults.push_back("'" + e.name + "' is an undefined tensor in the state dict");
    else if (!fits)
      faults.push_back("'" + e.name + "' has shape " + shape_str(t.shape()) + " in the state dict but " +
                       shape_str(!e.parameter                 ? e.buffer->shape()
                                 : e.parameter->value.defined() ? e.parameter->value.shape()
                                                                : e.parameter->expected) +
                       " in the model");
  }
  if (!faults.empty()) {
    std::string all;
    for (const auto& f : faults) all += (all.empty() ? "" : "; ") + f;
    detail::fail<FormatError>(op, "the state dict does not fit the model (", faults.size(),
                              faults.size() == 1 ? " fault): " : " faults): ", all,
                              names_differ ? " (load_state_dict(dict, /*strict=*/false) loads the names both have)" : "");
  }
  // A lazy layer takes every parameter from the dict or none: one shaped in part would make up the
  // rest at its first call.
  if (shapes_lazy && !left_lazy.empty())
    detail::fail<FormatError>(op, "the state dict shapes lazily shaped parameters but not ", quoted(left_lazy),
                              ", which have no shape yet; give those too, or run a forward pass first");
  std::vector<Tensor> staged(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!sources[i]) continue;
    const StateEntry& e = entries[i];
    // One counted transfer when the dict is on another device; the conversion runs here.
    staged[i] = sources[i]->detach().to(device_).astype(e.parameter ? e.parameter->dtype : e.buffer->dtype());
    if (e.parameter && !e.parameter->value.defined() && staged[i].shares_storage_with(*sources[i]))
      staged[i] = staged[i].copyto(device_);  // a new parameter's storage is its own, never the dict's
  }

  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!staged[i].defined()) continue;
    Parameter* p = entries[i].parameter;
    if (!p) {
      entries[i].buffer->copy_from(staged[i]);  // in place, as PyTorch: handles and state_dict() see it
    } else if (p->value.defined()) {
      p->value.copy_from(staged[i]);
    } else {
      p->value = staged[i];
      p->track();
    }
  }
  if (shapes_lazy) notify_loaded();
}

}  // namespace kten::nn
