// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file optim.hpp
/// \brief Optimisers (SGD, Adam, AdamW) that update a module's parameters from their gradients on
/// their device, learning-rate schedules (StepLR, CosineAnnealingLR, LinearLR, SequentialLR), and
/// the optimiser state that checkpoints save and restore. PyTorch 1.13's update rules and schedule
/// formulas.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <kten/nn/module.hpp>

namespace kten::optim {

/// \brief Everything an optimiser has learnt and been told, for a checkpoint: load_state() of this
/// into a new optimiser of the same kind continues bit for bit.
///
/// - `scalars`: the hyperparameters (SGD: "momentum", "dampening", "weight_decay", "nesterov" (0 or
///   1); Adam and AdamW: "beta1", "beta2", "eps", "weight_decay"), "lr" (the current learning
///   rate), the schedule's position "initial_lr" and "schedule_step" (-1 before a schedule started),
///   and "<parameter>.step" for each parameter updated so far (its number of updates, as PyTorch's
///   state['step']), `<parameter>` being its qualified name ("0.weight").
/// - `tensors`: the per-parameter buffers, "<parameter>.<buffer>", on the parameters' device: SGD's
///   "momentum_buffer" (only with momentum), Adam's and AdamW's "exp_avg" and "exp_avg_sq".
///   state() returns the optimiser's own tensors (shared storage, as PyTorch's state_dict()); a later
///   step() changes them, so copy them (copyto) to keep a snapshot.
struct OptimizerState {
  std::string kind;                                     ///< \brief "SGD", "Adam" or "AdamW"
  std::vector<std::pair<std::string, double>> scalars;  ///< \brief hyperparameters, lr, schedule position, step counts
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< \brief per-parameter buffers
};

class LRScheduler;

/// \brief Base of the optimisers. An optimiser keeps per-parameter state (step counts, buffers on
/// the parameter's device, made at its first update) keyed by the parameter's qualified name and
/// bound to the parameter itself, so it serves one model: step() of another model with a parameter
/// of the same name (a second model of the same architecture) is a kten::Error, never two models
/// sharing Adam's moments; the learning rate and the schedule's position live here too, so that
/// state() captures a whole training position.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// \brief Updates every parameter of `model` from its gradient: one kernel per parameter,
  /// enqueued without a host synchronisation. Every parameter is checked first (float dtype, a
  /// gradient of its shape, its state on its device), so a refused step changes nothing. A float
  /// parameter is updated whatever its gradient (zeros after zero_grad: weight decay still acts, as
  /// PyTorch with zero_grad(set_to_none=False)); one that requires no grad (frozen, or registered
  /// with requires_grad = false) is left as it is; an int64 or boolean one throws DTypeError.
  /// Buffers are never stepped.
  virtual void step(nn::Module& model) = 0;
  /// \brief Zeroes every gradient of `model`.
  void zero_grad(nn::Module& model) { model.zero_grad(); }
  /// \brief "SGD", "Adam" or "AdamW" (OptimizerState::kind).
  const std::string& kind() const { return kind_; }

  /// \brief The learning rate the next step() uses.
  double lr() const { return lr_; }
  /// \brief Sets the learning rate (a schedule's step() calls this); kten::Error unless finite and >= 0.
  void set_lr(double lr);
  /// \brief The learning rate a schedule started from (PyTorch's group['initial_lr']): the lr when
  /// the first schedule was made on this optimiser.
  double initial_lr() const { return initial_lr_; }
  /// \brief The schedule's position (PyTorch's last_epoch): -1 until a schedule is made on this
  /// optimiser, 0 after that, then one more per schedule step().
  std::int64_t schedule_step() const { return schedule_step_; }

  /// \brief Everything needed to continue training later (see OptimizerState).
  OptimizerState state() const;
  /// \brief Restores a state() into this optimiser for `model`, whose parameters the state's names
  /// refer to: hyperparameters, learning rate, schedule position, step counts, and copies of the
  /// buffers on each parameter's device (explicit, counted transfers when the state's tensors live
  /// elsewhere). Replaces the whole current state. Everything is checked first (kind, names, values,
  /// shapes, dtypes): a mismatch throws kten::FormatError and leaves the optimiser unchanged.
  void load_state(const OptimizerState& state, nn::Module& model);
  /// \brief Checks `state` against `model` as load_state() does, throwing the same kten::FormatError,
  /// without changing anything (save_checkpoint's loader checks a file's optimiser state before it
  /// touches the model).
  void check_state(const OptimizerState& state, nn::Module& model);
  /// \brief check_state() against the parameters a model will have, by their qualified names (for
  /// a model not yet loaded: load_checkpoint() checks the model as its file will leave it);
  /// `model_name` is for messages.
  void check_state(const OptimizerState& state, const std::vector<nn::NamedParameter>& parameters,
                   const std::string& model_name);

 protected:
  /// \brief Starts with learning rate `lr` (checked as set_lr does); `buffer_names` are the
  /// per-parameter buffers this kind keeps (OptimizerState::tensors), `buffers_optional` whether a
  /// parameter's state may go without them.
  Optimizer(const char* kind, double lr, std::vector<std::string> buffer_names, bool buffers_optional);

  /// \brief One parameter about to be updated: its slot, its update count including this update,
  /// its buffers (allocated, uninitialised, at its first update) and whether they are new.
  struct Update {
    nn::Parameter& parameter;    ///< \brief the parameter and its gradient
    std::int64_t step;           ///< \brief 1 at its first update
    std::vector<Tensor>& buffers;  ///< \brief as buffer_names(); empty when !wants_buffers()
    bool fresh;                  ///< \brief the buffers were just allocated: initialise, do not read them
  };
  /// \brief Checks every parameter of `model`, then counts the step and allocates missing buffers:
  /// the updates to run, in parameter order.
  std::vector<Update> begin_step(nn::Module& model);
  /// \brief Whether the next step keeps buffers (SGD: only with momentum).
  virtual bool wants_buffers() const { return true; }
  /// \brief The hyperparameters as (name, value), for state().
  virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;
  /// \brief Checks hyperparameters read from a state (the names of hyperparameters(), in that
  /// order), throwing kten::FormatError; returns a function that sets them (and cannot fail).
  virtual std::function<void()> restore_hyperparameters(const std::vector<double>& values) = 0;

 private:
  struct ParameterState {
    std::int64_t step = 0;
    std::vector<Tensor> buffers;          // as buffer_names_, or empty
    const nn::Parameter* slot = nullptr;  // whose state it is: a parameter of the same name in another model is refused
  };
  // A state checked against a model, ready to be installed (its buffers still the state's tensors).
  struct Restored {
    std::function<void()> set_hyperparameters;
    double lr, initial_lr;
    std::int64_t schedule_step;
    std::map<std::string, ParameterState> parameters;
  };
  Restored checked_state(const OptimizerState& state, const std::vector<nn::NamedParameter>& parameters,
                         const std::string& model_name);
  std::string kind_;
  std::vector<std::string> buffer_names_;
  bool buffers_optional_;
  double lr_;
  double initial_lr_;
  std::int64_t schedule_step_ = -1;
  std::map<std::string, ParameterState> parameters_;  // by qualified name
  friend class LRScheduler;  // the schedules move schedule_step_ and initial_lr_
};

/// \brief SGD's options, as torch.optim.SGD's (aggregate: SGDOptions{0.9} sets the momentum).
struct SGDOptions {
  double momentum = 0;       ///< \brief >= 0; 0: plain SGD, no buffer
  double dampening = 0;      ///< \brief the momentum buffer takes (1 - dampening) of each gradient
  double weight_decay = 0;   ///< \brief L2 penalty: weight_decay * p is added to the gradient
  bool nesterov = false;     ///< \brief Nesterov momentum: needs momentum > 0 and dampening 0
};

/// \brief Minibatch SGD with momentum, dampening, Nesterov and weight decay: torch.optim.SGD's rule,
/// one kernel per parameter. d = g + weight_decay * p; with momentum, b = d at the first step and
/// b = momentum * b + (1 - dampening) * d after, then d = d + momentum * b (Nesterov) or d = b;
/// p -= lr * d.
class SGD : public Optimizer {
 public:
  /// \brief Learning rate and options; kten::Error for a NaN, infinite or negative value, or
  /// Nesterov without momentum or with dampening.
  SGD(double lr, SGDOptions options);
  /// \brief Plain SGD: p -= lr * g.
  explicit SGD(double lr) : SGD(lr, SGDOptions{}) {}
  /// \brief Learning rate and L2 weight decay (SGD(lr, SGDOptions{0, 0, weight_decay})). A template
  /// only so that a braced list means options: SGD(lr, {0.9}) has momentum 0.9, not a weight decay.
  template <class WeightDecay, std::enable_if_t<std::is_arithmetic_v<WeightDecay>, int> = 0>
  SGD(double lr, WeightDecay weight_decay) : SGD(lr, SGDOptions{0, 0, static_cast<double>(weight_decay), false}) {}
  void step(nn::Module& model) override;
  /// \brief The options.
  const SGDOptions& options() const { return options_; }
  /// \brief The weight decay.
  double weight_decay() const { return options_.weight_decay; }

 protected:
  bool wants_buffers() const override { return options_.momentum != 0; }
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  std::function<void()> restore_hyperparameters(const std::vector<double>& values) override;

 private:
  SGDOptions options_;
};

/// \brief Adam's options, with torch.optim.Adam's defaults.
struct AdamOptions {
  double beta1 = 0.9;        ///< \brief decay of the gradient's running mean, in [0, 1)
  double beta2 = 0.999;      ///< \brief decay of the squared gradient's running mean, in [0, 1)
  double eps = 1e-8;         ///< \brief added to the denominator, >= 0
  double weight_decay = 0;   ///< \brief Adam: L2 penalty added to the gradient (0 for AdamW, see there)
};

/// \brief Adam (torch.optim.Adam, PyTorch 1.13's rule, amsgrad off): one fused kernel per parameter,
/// exp_avg and exp_avg_sq on the parameter's device, the step count on the host. At step t:
/// g += weight_decay * p; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
/// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
class Adam : public Optimizer {
 public:
  /// \brief Learning rate and options; kten::Error for a NaN, infinite or negative value or a beta
  /// outside [0, 1).
  explicit Adam(double lr, AdamOptions options = {});
  void step(nn::Module& model) override;
  /// \brief The options (for AdamW, weight_decay is the decoupled decay).
  const AdamOptions& options() const { return options_; }

 protected:
  /// \brief For AdamW: weight decay decoupled from the gradient.
  Adam(double lr, AdamOptions options, bool decoupled);
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  std::function<void()> restore_hyperparameters(const std::vector<double>& values) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

/// \brief AdamW (torch.optim.AdamW, PyTorch 1.13's rule): Adam whose weight decay shrinks the
/// parameter, p *= 1 - lr * weight_decay, before the update instead of joining the gradient.
/// The decay is the second argument; `options` gives the betas and eps, and its weight_decay
/// (Adam's L2 penalty) must stay 0 (kten::Error otherwise: one decay, said once).
class AdamW : public Adam {
 public:
  /// \brief Learning rate, decoupled weight decay (PyTorch's default 1e-2) and betas and eps.
  explicit AdamW(double lr, double weight_decay = 1e-2, AdamOptions options = {});
};

/// \brief Base of learning-rate schedules. A schedule keeps nothing of its own: its position is the
/// optimiser's schedule_step() and its base the optimiser's initial_lr(), so restoring an optimiser's
/// state() into a fresh optimiser, with a freshly made schedule of the same kind, continues the
/// schedule exactly (whether the schedule is made before or after load_state()). Making a schedule
/// on an optimiser whose schedule has not started (schedule_step() == -1) starts it as PyTorch's
/// constructors do: initial_lr = lr, position 0, lr set to the schedule's value at 0; on one whose
/// schedule is under way it changes nothing. Use one schedule per optimiser (two calling step()
/// would both advance one position): combine schedules with SequentialLR.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;
  /// \brief Advances the position by one and sets the optimiser's learning rate (call after
  /// optimizer.step(), as in PyTorch).
  void step();
  /// \brief The position (PyTorch's last_epoch): the optimiser's schedule_step().
  std::int64_t last_epoch() const { return optimizer_.schedule_step(); }
  /// \brief The optimiser this schedule drives.
  Optimizer& optimizer() const { return optimizer_; }
  /// \brief PyTorch's chainable form (get_lr()): the learning rate at position `epoch` given the
  /// rate `lr` at the position before (at 0: the rate before the schedule started).
  virtual double get_lr(std::int64_t epoch, double lr) const = 0;
  /// \brief PyTorch's closed form (_get_closed_form_lr()): the rate at position `epoch` from
  /// initial_lr() alone. SequentialLR starts a later schedule with it.
  virtual double closed_form_lr(std::int64_t epoch) const = 0;

 protected:
  /// \brief Attaches to `optimizer`; the derived constructor calls start() when its members are set.
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {}
  /// \brief Starts the schedule if the optimiser's has not started (see the class).
  void start();
  /// \brief The rate the schedule started from (the optimiser's initial_lr()).
  double base_lr() const { return optimizer_.initial_lr(); }

 private:
  Optimizer& optimizer_;
};

/// \brief torch.optim.lr_scheduler.StepLR: the rate times gamma every step_size steps,
/// lr = initial_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  /// \brief kten::Error unless step_size >= 1 and gamma is finite and >= 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  double get_lr(std::int64_t epoch, double lr) const override;
  double closed_form_lr(std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

/// \brief torch.optim.lr_scheduler.CosineAnnealingLR: from initial_lr down to eta_min along half a
/// cosine over t_max steps, eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2, and
/// back up over the next t_max (PyTorch's recursive form, which follows set_lr() changes).
class CosineAnnealingLR : public LRScheduler {
 public:
  /// \brief kten::Error unless t_max >= 1 and eta_min is finite and >= 0.
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0);
  double get_lr(std::int64_t epoch, double lr) const override;
  double closed_form_lr(std::int64_t epoch) const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// \brief torch.optim.lr_scheduler.LinearLR, a linear warm-up: the rate goes from initial_lr *
/// start_factor to initial_lr * end_factor over total_iters steps, then stays.
class LinearLR : public LRScheduler {
 public:
  /// \brief kten::Error unless 0 < start_factor <= 1, 0 <= end_factor <= 1 and total_iters >= 1.
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    std::int64_t total_iters = 5);
  double get_lr(std::int64_t epoch, double lr) const override;
  double closed_form_lr(std::int64_t epoch) const override;

 private:
  double start_factor_;
  double end_factor_;
  std::int64_t total_iters_;
};

/// \brief torch.optim.lr_scheduler.SequentialLR: schedules one after another, the next taking over
/// at each milestone (starting from its closed form at 0), e.g. a warm-up then a cosine:
/// `LinearLR warmup(opt, 0.1, 1, 5); CosineAnnealingLR cosine(opt, 95);
/// SequentialLR schedule(opt, {&warmup, &cosine}, {5});` then only schedule.step(). The schedules
/// must live as long as this one and be made on the same optimiser; only this one is stepped. Made
/// at position 0 it sets the rate to the first schedule's value at 0 from initial_lr (PyTorch resets
/// what the later schedules' constructors did); later it changes nothing, as any schedule.
class SequentialLR : public LRScheduler {
 public:
  /// \brief kten::Error unless there is one milestone fewer than schedules, milestones increase
  /// from >= 1, and every schedule drives `optimizer`.
  SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<std::int64_t> milestones);
  double get_lr(std::int64_t epoch, double lr) const override;
  double closed_form_lr(std::int64_t epoch) const override;

 private:
  /// \brief The schedule in charge at `epoch` and its own position.
  std::pair<const LRScheduler*, std::int64_t> at(std::int64_t epoch) const;
  std::vector<LRScheduler*> schedulers_;
  std::vector<std::int64_t> milestones_;
};

}  // namespace kten::optim
