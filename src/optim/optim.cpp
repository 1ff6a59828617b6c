// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Optimisers: one fused update kernel per parameter on the parameters' device, their state, and the
// learning-rate schedules (host arithmetic in double, as PyTorch's Python floats).
#include <algorithm>
#include <cmath>
#include <string>

#include <kten/optim.hpp>

#include "core/fail.hpp"
#include "kernels.hpp"

namespace kten::optim {

namespace {

// A NaN or infinite rate would turn every parameter into NaN at the first step; like PyTorch,
// kten refuses a negative one too. E is Error for arguments, FormatError for a state being loaded.
template <class E = Error>
double checked_nonnegative(const std::string& op, double value, const char* what) {
  if (!(std::isfinite(value) && value >= 0)) detail::fail<E>(op, "the ", what, " must be a finite number >= 0, got ", value);
  return value;
}

template <class E = Error>
std::int64_t checked_count(const std::string& op, std::int64_t value, std::int64_t least, const char* what) {
  if (value < least) detail::fail<E>(op, "the ", what, " must be >= ", least, ", got ", value);
  return value;
}

// A step count or schedule position read from a state's double: an integer a double holds exactly.
std::int64_t checked_integer(const std::string& op, double value, double least, const std::string& what) {
  if (!(value >= least && value <= 0x1p53 && std::floor(value) == value))
    detail::fail<FormatError>(op, "'", what, "' must be an integer >= ", least, ", got ", value);
  return static_cast<std::int64_t>(value);
}

template <class E = Error>
SGDOptions checked_sgd(const std::string& op, const SGDOptions& o) {
  checked_nonnegative<E>(op, o.momentum, "momentum");
  checked_nonnegative<E>(op, o.dampening, "dampening");
  checked_nonnegative<E>(op, o.weight_decay, "weight decay");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    detail::fail<E>(op, "Nesterov momentum needs a momentum > 0 and dampening 0 (as PyTorch), got momentum ",
                    o.momentum, " and dampening ", o.dampening);
  return o;
}

template <class E = Error>
AdamOptions checked_adam(const std::string& op, const AdamOptions& o) {
  for (const auto& [beta, what] : {std::pair{o.beta1, "beta1"}, std::pair{o.beta2, "beta2"}})
    if (!(beta >= 0 && beta < 1)) detail::fail<E>(op, "the ", what, " must lie in [0, 1), got ", beta);
  checked_nonnegative<E>(op, o.eps, "eps");
  checked_nonnegative<E>(op, o.weight_decay, "weight decay");
  return o;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Optimizer::Optimizer(const char* kind, double lr, std::vector<std::string> buffer_names, bool buffers_optional)
    : kind_(kind),
      buffer_names_(std::move(buffer_names)),
      buffers_optional_(buffers_optional),
      lr_(checked_nonnegative(kind, lr, "learning rate")),
      initial_lr_(lr_) {}

void Optimizer::set_lr(double lr) { lr_ = checked_nonnegative(kind_, lr, "learning rate"); }

std::vector<Optimizer::Update> Optimizer::begin_step(nn::Module& model) {
  const std::string op = kind_ + " step";
  const std::vector<nn::NamedParameter> named = model.named_parameters();
  // Everything is checked before anything changes, so a refused step leaves model and state as they were.
  for (const auto& [name, p] : named) {
    const Tensor& value = p->value;
    if (!value.defined()) continue;  // a lazy layer that has not seen an input yet
    if (!is_floating(value.dtype()))
      detail::fail<DTypeError>(op, "parameter '", name, "' is ", value.dtype(),
                               ": arithmetic is float-only (float32 or float64); keep integer and boolean state out "
                               "of the modules an optimiser steps (register it as a buffer)");
    const Tensor& grad = p->grad;
    if (!grad.defined() || grad.shape() != value.shape() || grad.dtype() != value.dtype() ||
        grad.device() != value.device())
      detail::fail(op, "parameter '", name, "' has no gradient of its shape, dtype and device; call track() after "
                   "assigning a parameter's value");
    if (!value.is_contiguous() || !grad.is_contiguous())
      detail::fail(op, "parameter '", name, "' or its gradient is a strided view, and the update writes it in place as "
                   "contiguous memory; assign value.contiguous() and call track()");
    const auto found = parameters_.find(name);
    if (found == parameters_.end()) continue;
    if (found->second.slot != p)
      detail::fail(op, "parameter '", name, "' is not the one this optimiser has state for: it belongs to another model (",
                   model.name(), ") than the one it stepped (or loaded its state for) first. An optimiser's state (",
                   kind_, "'s step counts and buffers) serves one model, as in PyTorch: make one optimiser per model");
    for (const Tensor& buffer : found->second.buffers) {
      if (buffer.device() != value.device())
        detail::fail<DeviceMismatch>(op, "the state of parameter '", name, "' is on ", buffer.device(),
                                     " but the parameter is on ", value.device(),
                                     " (the model moved after the optimiser's first step); kten never copies "
                                     "implicitly: move the model back, or carry the state over with "
                                     "load_state(state(), model)");
      if (buffer.shape() != value.shape() || buffer.dtype() != value.dtype())
        detail::fail<ShapeError>(op, "the state of parameter '", name, "' has shape ", buffer.shape(), " and dtype ",
                                 buffer.dtype(), ", but the parameter has shape ", value.shape(), " and dtype ",
                                 value.dtype(), "; an optimiser serves one model: make a new one for another");
    }
  }
  // Then the new buffers, before any count changes (an allocation may fail).
  const bool buffers = wants_buffers();
  std::vector<std::vector<Tensor>> fresh(named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    const Tensor& value = named[i].slot->value;
    if (!buffers || !value.defined() || !value.requires_grad()) continue;
    const auto found = parameters_.find(named[i].name);
    if (found != parameters_.end() && !found->second.buffers.empty()) continue;
    for (std::size_t b = 0; b < buffer_names_.size(); ++b)
      fresh[i].push_back(empty(value.shape(), value.device(), value.dtype()));
  }
  std::vector<Update> updates;
  for (std::size_t i = 0; i < named.size(); ++i) {
    if (!named[i].slot->value.defined() || !named[i].slot->value.requires_grad()) continue;
    ParameterState& s = parameters_[named[i].name];
    s.slot = named[i].slot;
    const bool is_fresh = !fresh[i].empty();
    if (is_fresh) s.buffers = std::move(fresh[i]);
    ++s.step;
    updates.push_back({*named[i].slot, s.step, s.buffers, is_fresh});
  }
  return updates;
}

OptimizerState Optimizer::state() const {
  OptimizerState out{kind_, {{"lr", lr_}, {"initial_lr", initial_lr_}, {"schedule_step", static_cast<double>(schedule_step_)}}, {}};
  for (auto& h : hyperparameters()) out.scalars.push_back(std::move(h));
  for (const auto& [name, s] : parameters_) {
    out.scalars.emplace_back(name + ".step", static_cast<double>(s.step));
    for (std::size_t b = 0; b < s.buffers.size(); ++b) out.tensors.emplace_back(name + "." + buffer_names_[b], s.buffers[b]);
  }
  return out;
}

Optimizer::Restored Optimizer::checked_state(const OptimizerState& state, const std::vector<nn::NamedParameter>& named,
                                             const std::string& model_name) {
  const std::string op = kind_ + " load_state";
  if (state.kind != kind_) detail::fail<FormatError>(op, "the state is of an optimiser of kind '", state.kind, "', not ", kind_);
  std::map<std::string, const nn::Parameter*> parameters;
  for (const auto& [name, p] : named) parameters[name] = p;
  const auto parameter = [&](const std::string& name, const std::string& entry) -> const Tensor& {
    const auto found = parameters.find(name);
    if (found == parameters.end())
      detail::fail<FormatError>(op, "the state's '", entry, "' names no parameter of the model (", model_name, ")");
    if (!found->second->value.defined())
      detail::fail<FormatError>(op, "the state's '", entry, "' belongs to parameter '", name,
                                "', which has no value yet (a lazy layer): load the model's parameters first");
    return found->second->value;
  };

  std::map<std::string, double> scalars;
  for (const auto& [name, value] : state.scalars)
    if (!scalars.emplace(name, value).second) detail::fail<FormatError>(op, "the state names '", name, "' twice");
  const auto take = [&](const std::string& name) {
    const auto found = scalars.find(name);
    if (found == scalars.end()) detail::fail<FormatError>(op, "the state has no '", name, "'");
    const double value = found->second;
    scalars.erase(found);
    return value;
  };
  const double lr = checked_nonnegative<FormatError>(op, take("lr"), "learning rate");
  const double initial_lr = checked_nonnegative<FormatError>(op, take("initial_lr"), "initial_lr");
  const std::int64_t schedule_step = checked_integer(op, take("schedule_step"), -1, "schedule_step");
  std::vector<double> hyper;
  for (const auto& h : hyperparameters()) hyper.push_back(take(h.first));
  const std::function<void()> set_hyperparameters = restore_hyperparameters(hyper);

  // What is left: "<parameter>.step", one per parameter with state.
  std::map<std::string, ParameterState> restored;
  for (const auto& [name, value] : scalars) {
    if (!ends_with(name, ".step")) detail::fail<FormatError>(op, "the state's scalar '", name, "' is unknown to ", kind_);
    const std::string owner = name.substr(0, name.size() - 5);
    parameter(owner, name);
    restored[owner].step = checked_integer(op, value, 1, name);
    restored[owner].slot = parameters.at(owner);
  }
  for (const auto& [name, t] : state.tensors) {
    std::size_t b = 0;
    while (b < buffer_names_.size() && !ends_with(name, "." + buffer_names_[b])) ++b;
    if (b == buffer_names_.size()) detail::fail<FormatError>(op, "the state's tensor '", name, "' is no buffer of ", kind_);
    const std::string owner = name.substr(0, name.size() - buffer_names_[b].size() - 1);
    const Tensor& value = parameter(owner, name);
    const auto found = restored.find(owner);
    if (found == restored.end())
      detail::fail<FormatError>(op, "the state's tensor '", name, "' has no '", owner, ".step' beside it");
    std::vector<Tensor>& buffers = found->second.buffers;
    buffers.resize(buffer_names_.size());
    if (buffers[b].defined()) detail::fail<FormatError>(op, "the state names '", name, "' twice");
    if (!t.defined()) detail::fail<FormatError>(op, "the state's tensor '", name, "' is undefined");
    if (t.shape() != value.shape() || t.dtype() != value.dtype())
      detail::fail<FormatError>(op, "the state's tensor '", name, "' has shape ", t.shape(), " and dtype ", t.dtype(),
                                ", but parameter '", owner, "' has shape ", value.shape(), " and dtype ", value.dtype());
    buffers[b] = t;
  }
  for (auto& [name, s] : restored) {
    s.buffers.resize(buffer_names_.size());  // undefined where the state had none
    const bool none = std::none_of(s.buffers.begin(), s.buffers.end(), [](const Tensor& t) { return t.defined(); });
    if (none && buffers_optional_) {
      s.buffers.clear();  // made at the next step, as at a first one
      continue;
    }
    for (std::size_t b = 0; b < buffer_names_.size(); ++b)
      if (!s.buffers[b].defined())
        detail::fail<FormatError>(op, "parameter '", name, "' has a step count but no '", name, ".", buffer_names_[b], "'");
  }
  return {set_hyperparameters, lr, initial_lr, schedule_step, std::move(restored)};
}

void Optimizer::check_state(const OptimizerState& state, nn::Module& model) {
  checked_state(state, model.named_parameters(), model.name());
}

void Optimizer::check_state(const OptimizerState& state, const std::vector<nn::NamedParameter>& parameters,
                            const std::string& model_name) {
  checked_state(state, parameters, model_name);
}

void Optimizer::load_state(const OptimizerState& state, nn::Module& model) {
  Restored r = checked_state(state, model.named_parameters(), model.name());
  // The copies on the parameters' devices (allocations may fail: before anything changes), so that
  // later steps write neither into the caller's tensors nor across devices.
  std::map<std::string, const Tensor*> values;
  for (const auto& [name, p] : model.named_parameters()) values[name] = &p->value;
  for (auto& [name, s] : r.parameters)
    for (Tensor& t : s.buffers) t = t.detach().copyto(values.at(name)->device());

  r.set_hyperparameters();
  lr_ = r.lr;
  initial_lr_ = r.initial_lr;
  schedule_step_ = r.schedule_step;
  parameters_ = std::move(r.parameters);
}

// --- SGD ---

SGD::SGD(double lr, SGDOptions options)
    : Optimizer("SGD", lr, {"momentum_buffer"}, /*buffers_optional=*/true), options_(checked_sgd("SGD", options)) {}

void SGD::step(nn::Module& model) {
  const bool momentum = options_.momentum != 0;
  for (const Update& u : begin_step(model))
    detail::sgd_update(u.parameter.value, u.parameter.grad, momentum ? u.buffers[0] : Tensor(),
                       {lr(), options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov, u.fresh});
}

std::vector<std::pair<std::string, double>> SGD::hyperparameters() const {
  return {{"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"weight_decay", options_.weight_decay},
          {"nesterov", options_.nesterov ? 1 : 0}};
}

std::function<void()> SGD::restore_hyperparameters(const std::vector<double>& values) {
  if (values[3] != 0 && values[3] != 1)
    detail::fail<FormatError>("SGD load_state", "'nesterov' must be 0 or 1, got ", values[3]);
  const SGDOptions o = checked_sgd<FormatError>("SGD load_state", {values[0], values[1], values[2], values[3] == 1});
  return [this, o] { options_ = o; };
}

// --- Adam and AdamW ---

Adam::Adam(double lr, AdamOptions options) : Adam(lr, options, false) {}

Adam::Adam(double lr, AdamOptions options, bool decoupled)
    : Optimizer(decoupled ? "AdamW" : "Adam", lr, {"exp_avg", "exp_avg_sq"}, /*buffers_optional=*/false),
      options_(checked_adam(kind(), options)),
      decoupled_(decoupled) {}

void Adam::step(nn::Module& model) {
  for (const Update& u : begin_step(model)) {
    // PyTorch's host arithmetic, in double: beta^t, the bias corrections, lr / (1 - beta1^t).
    const double t = static_cast<double>(u.step);
    const double bias_correction1 = 1 - std::pow(options_.beta1, t);
    const double bias_correction2 = 1 - std::pow(options_.beta2, t);
    const double decay = options_.weight_decay;
    detail::adam_update(u.parameter.value, u.parameter.grad, u.buffers[0], u.buffers[1],
                        {lr() / bias_correction1, std::sqrt(bias_correction2), options_.beta1, options_.beta2,
                         options_.eps, decoupled_ ? 0 : decay, decoupled_ ? 1 - lr() * decay : 1, u.fresh});
  }
}

std::vector<std::pair<std::string, double>> Adam::hyperparameters() const {
  return {{"beta1", options_.beta1}, {"beta2", options_.beta2}, {"eps", options_.eps}, {"weight_decay", options_.weight_decay}};
}

std::function<void()> Adam::restore_hyperparameters(const std::vector<double>& values) {
  const AdamOptions o = checked_adam<FormatError>(kind() + " load_state", {values[0], values[1], values[2], values[3]});
  return [this, o] { options_ = o; };
}

namespace {
AdamOptions with_decoupled_decay(double weight_decay, AdamOptions options) {
  if (options.weight_decay != 0)
    detail::fail("AdamW", "the decoupled weight decay is AdamW's second argument (", weight_decay,
                 "); options.weight_decay is Adam's L2 penalty and must stay 0 here, got ", options.weight_decay);
  options.weight_decay = weight_decay;
  return options;
}
}  // namespace

AdamW::AdamW(double lr, double weight_decay, AdamOptions options)
    : Adam(lr, with_decoupled_decay(weight_decay, options), true) {}

// --- Schedules ---
//
// A schedule holds its formula's constants only; the position and the starting rate live in the
// optimiser (schedule_step_, initial_lr_), which state() saves, so a restored optimiser with a new
// schedule continues where the old pair stopped. The formulas are PyTorch 1.13's, term for term in
// double, so the rates match its bit for bit.

void LRScheduler::step() {
  Optimizer& o = optimizer_;
  if (o.schedule_step_ < 0) o.initial_lr_ = o.lr_;  // starting (PyTorch: setdefault('initial_lr', lr))
  const std::int64_t epoch = o.schedule_step_ + 1;
  o.set_lr(get_lr(epoch, o.lr_));
  o.schedule_step_ = epoch;
}

void LRScheduler::start() {
  if (optimizer_.schedule_step_ < 0) step();
}

namespace {
constexpr double pi = 3.14159265358979323846;  // Python's math.pi
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer),
      step_size_(checked_count("StepLR", step_size, 1, "step size")),
      gamma_(checked_nonnegative("StepLR", gamma, "gamma")) {
  start();
}

double StepLR::get_lr(std::int64_t epoch, double lr) const {
  if (epoch == 0 || epoch % step_size_ != 0) return lr;
  return lr * gamma_;
}

double StepLR::closed_form_lr(std::int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : LRScheduler(optimizer),
      t_max_(checked_count("CosineAnnealingLR", t_max, 1, "t_max")),
      eta_min_(checked_nonnegative("CosineAnnealingLR", eta_min, "eta_min")) {
  start();
}

double CosineAnnealingLR::get_lr(std::int64_t epoch, double lr) const {
  const double t_max = static_cast<double>(t_max_), e = static_cast<double>(epoch);
  if (epoch == 0) return lr;
  if ((epoch - 1 - t_max_) % (2 * t_max_) == 0)  // just past the minimum, where the ratio below is 0/0
    return lr + (base_lr() - eta_min_) * (1 - std::cos(pi / t_max)) / 2;
  return (1 + std::cos(pi * e / t_max)) / (1 + std::cos(pi * (e - 1) / t_max)) * (lr - eta_min_) + eta_min_;
}

double CosineAnnealingLR::closed_form_lr(std::int64_t epoch) const {
  return eta_min_ + (base_lr() - eta_min_) * (1 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor),
      total_iters_(checked_count("LinearLR", total_iters, 1, "total_iters")) {
  if (!(start_factor > 0 && start_factor <= 1))
    detail::fail("LinearLR", "the start factor must lie in (0, 1], got ", start_factor);
  if (!(end_factor >= 0 && end_factor <= 1)) detail::fail("LinearLR", "the end factor must lie in [0, 1], got ", end_factor);
  start();
}

double LinearLR::get_lr(std::int64_t epoch, double lr) const {
  if (epoch == 0) return lr * start_factor_;
  if (epoch > total_iters_) return lr;
  const double slope = end_factor_ - start_factor_;
  return lr * (1. + slope / (static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(epoch - 1) * slope));
}

double LinearLR::closed_form_lr(std::int64_t epoch) const {
  return base_lr() * (start_factor_ + (end_factor_ - start_factor_) * static_cast<double>(std::min(total_iters_, epoch)) /
                                          static_cast<double>(total_iters_));
}

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<std::int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty()) detail::fail("SequentialLR", "give at least one schedule");
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    if (!schedulers_[i] || &schedulers_[i]->optimizer() != &optimizer)
      detail::fail("SequentialLR", "schedule ", i, schedulers_[i] ? " drives another optimiser" : " is null",
                   "; make each schedule on the optimiser given here");
  if (milestones_.size() + 1 != schedulers_.size())
    detail::fail("SequentialLR", "give one milestone fewer than schedules, got ", schedulers_.size(), " schedules and ",
                 milestones_.size(), " milestones");
  for (std::size_t i = 0; i < milestones_.size(); ++i)
    if (milestones_[i] < 1 || (i > 0 && milestones_[i] <= milestones_[i - 1]))
      detail::fail("SequentialLR", "milestones must increase from 1 or more; milestone ", i, " is ", milestones_[i]);
  // PyTorch's reset: back to initial_lr, then the first schedule's value at 0.
  if (last_epoch() == 0) optimizer.set_lr(get_lr(0, base_lr()));
  start();
}

std::pair<const LRScheduler*, std::int64_t> SequentialLR::at(std::int64_t epoch) const {
  const auto i = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  return {schedulers_[i], i == 0 ? epoch : epoch - milestones_[i - 1]};
}

double SequentialLR::get_lr(std::int64_t epoch, double lr) const {
  if (epoch == 0) return schedulers_[0]->get_lr(0, base_lr());
  const auto [schedule, own_epoch] = at(epoch);
  if (own_epoch == 0) return schedule->closed_form_lr(0);  // a milestone: PyTorch's scheduler.step(0)
  return schedule->get_lr(own_epoch, lr);
}

double SequentialLR::closed_form_lr(std::int64_t epoch) const {
  const auto [schedule, own_epoch] = at(epoch);
  return schedule->closed_form_lr(own_epoch);
}

}  // namespace kten::optim
