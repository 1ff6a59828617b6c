// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten's optimisers, schedules and clip_grad_norm_ against PyTorch 1.13 (label torch): libtorch's
// torch::optim::SGD, Adam, AdamW, StepLR and torch::nn::utils::clip_grad_norm_ in process, on the
// same parameters and gradients, several steps, both float dtypes. libtorch's C++ API has no
// CosineAnnealingLR, LinearLR or SequentialLR: their rates below were printed by Debian's Python
// PyTorch 1.13 (the script is in the test), and kten must give the same doubles.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <torch/optim.h>
#include <torch/types.h>
// Not self-contained: after the two above, which declare what it uses.
#include <torch/nn/utils/clip_grad.h>

#include "../support.hpp"

namespace {

using namespace kten;

template <class T>
at::ScalarType scalar_type() {
  return sizeof(T) == 4 ? at::kFloat : at::kDouble;
}

// A kten tensor with the values of an ATen one (on the host, then to d).
template <class T>
Tensor from_aten(const at::Tensor& t, const Device& d) {
  const at::Tensor c = t.contiguous().to(at::kDouble);
  const std::vector<double> values(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  Shape shape(c.sizes().begin(), c.sizes().end());
  return tensor(values, shape).astype(dtype_of<T>()).to(d);
}

// Parameters "w" (1003 values: past the vector width, with a tail) and "b" (7x3), as libtorch's.
struct TwoParameters : nn::Module {
  nn::Parameter& w = *register_parameter("w", nn::Parameter{});
  nn::Parameter& b = *register_parameter("b", nn::Parameter{});
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "TwoParameters"; }
};

struct Pair {
  TwoParameters kten;
  std::vector<at::Tensor> torch;
};

template <class T>
std::unique_ptr<Pair> make_pair(const Device& d) {
  auto pair = std::make_unique<Pair>();
  at::manual_seed(11);
  for (auto shape : {std::vector<std::int64_t>{1003}, std::vector<std::int64_t>{7, 3}})
    pair->torch.push_back(at::randn(shape, at::TensorOptions().dtype(scalar_type<T>())).requires_grad_());
  pair->kten.w.value = from_aten<T>(pair->torch[0].detach(), d);
  pair->kten.b.value = from_aten<T>(pair->torch[1].detach(), d);
  pair->kten.w.track();
  pair->kten.b.track();
  pair->kten.to(d);
  return pair;
}

// The same gradients on both sides: normal, scaled per step, a few exact zeros.
template <class T>
void set_gradients(Pair& pair, int step) {
  at::manual_seed(100 + step);
  nn::Parameter* slots[] = {&pair.kten.w, &pair.kten.b};
  for (std::size_t i = 0; i < pair.torch.size(); ++i) {
    at::Tensor g = at::randn(pair.torch[i].sizes(), at::TensorOptions().dtype(scalar_type<T>())) * (1 + 0.5 * step);
    g.view(-1).index_put_({0}, 0.0);
    pair.torch[i].mutable_grad() = g;
    slots[i]->grad.copy_from(from_aten<T>(g, cpu()));
  }
}

template <class T>
void require_close(const Tensor& got, const at::Tensor& want, double rtol, double atol, const std::string& what) {
  const std::vector<T> k = got.to_vector<T>();
  const at::Tensor w = want.detach().contiguous().to(at::kDouble);
  const double* wp = w.data_ptr<double>();
  REQUIRE(static_cast<std::int64_t>(k.size()) == w.numel());
  for (std::size_t i = 0; i < k.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(k[i]) - wp[i]);
    if (!(diff <= atol + rtol * std::fabs(wp[i]))) {
      INFO(what << ", element " << i << ": kten " << k[i] << ", PyTorch " << wp[i]);
      REQUIRE(diff <= atol + rtol * std::fabs(wp[i]));
    }
  }
}

struct OptimizerCase {
  const char* name;
  double lr;
  std::function<std::unique_ptr<optim::Optimizer>()> kten;
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)> torch;
};

std::vector<OptimizerCase> optimizer_cases() {
  using torch::optim::AdamOptions;
  using torch::optim::AdamWOptions;
  using torch::optim::SGDOptions;
  const auto sgd = [](const char* name, double lr, optim::SGDOptions o) {
    return OptimizerCase{name, lr, [=] { return std::make_unique<optim::SGD>(lr, o); },
                         [=](std::vector<at::Tensor> p) {
                           return std::make_unique<torch::optim::SGD>(
                               p, SGDOptions(lr).momentum(o.momentum).dampening(o.dampening).weight_decay(o.weight_decay).nesterov(o.nesterov));
                         }};
  };
  const auto adam = [](const char* name, double lr, optim::AdamOptions o) {
    return OptimizerCase{name, lr, [=] { return std::make_unique<optim::Adam>(lr, o); },
                         [=](std::vector<at::Tensor> p) {
                           return std::make_unique<torch::optim::Adam>(
                               p, AdamOptions(lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weight_decay));
                         }};
  };
  const auto adamw = [](const char* name, double lr, double weight_decay, optim::AdamOptions o) {
    return OptimizerCase{name, lr, [=] { return std::make_unique<optim::AdamW>(lr, weight_decay, o); },
                         [=](std::vector<at::Tensor> p) {
                           return std::make_unique<torch::optim::AdamW>(
                               p, AdamWOptions(lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(weight_decay));
                         }};
  };
  return {
      sgd("SGD", 0.1, {}),
      sgd("SGD, weight decay", 0.1, {0, 0, 0.05}),
      sgd("SGD, momentum", 0.05, {0.9}),
      sgd("SGD, momentum, dampening, weight decay", 0.05, {0.9, 0.25, 0.01}),
      sgd("SGD, Nesterov", 0.05, {0.8, 0, 0, true}),
      sgd("SGD, Nesterov, weight decay", 0.05, {0.9, 0, 0.1, true}),
      adam("Adam", 1e-3, {}),
      adam("Adam, betas, eps, weight decay", 0.01, {0.8, 0.99, 1e-6, 0.1}),
      adam("Adam, beta1 0", 0.01, {0.0, 0.9}),
      adamw("AdamW", 1e-3, 1e-2, {}),
      adamw("AdamW, strong decay, betas, eps", 0.02, 0.3, {0.85, 0.95, 1e-7}),
  };
}

// A maker of one schedule S(optimizer, args...), as the schedule table below takes them.
template <class S, class... Args>
auto alone(Args... args) {
  return [=](optim::Optimizer& o) {
    std::vector<std::unique_ptr<optim::LRScheduler>> s;
    s.push_back(std::make_unique<S>(o, args...));
    return s;
  };
}

}  // namespace

TEMPLATE_TEST_CASE("SGD, Adam and AdamW update as torch::optim's over several steps, with set_lr", "[torch][optim]", float,
                   double) {
  using T = TestType;
  const Device d = test::device();
  // Each step's rounding differs (fused multiply-adds where PyTorch's vector code has them or not);
  // the differences stay at a few units in the last place over the steps.
  const double rtol = sizeof(T) == 4 ? 2e-6 : 1e-14, atol = sizeof(T) == 4 ? 1e-7 : 1e-16;
  for (const OptimizerCase& c : optimizer_cases()) {
    INFO(c.name);
    auto pair = make_pair<T>(d);
    auto mine = c.kten();
    auto theirs = c.torch(pair->torch);
    for (int step = 1; step <= 6; ++step) {
      INFO("step " << step);
      if (step == 4) {  // a new rate half-way, as a schedule would set
        mine->set_lr(c.lr * 0.3);
        theirs->param_groups()[0].options().set_lr(c.lr * 0.3);
      }
      set_gradients<T>(*pair, step);
      mine->step(pair->kten);
      theirs->step();
      require_close<T>(pair->kten.w.value, pair->torch[0], rtol, atol, "w");
      require_close<T>(pair->kten.b.value, pair->torch[1], rtol, atol, "b");
    }
  }
}

TEMPLATE_TEST_CASE("clip_grad_norm_ returns and applies torch::nn::utils::clip_grad_norm_'s norm", "[torch][clip]", float,
                   double) {
  using T = TestType;
  const Device d = test::device();
  const double rtol = sizeof(T) == 4 ? 2e-6 : 1e-14;
  for (const double norm_type : {2.0, std::numeric_limits<double>::infinity(), 1.0, 3.0}) {
    for (const double max_norm : {0.5, 30.0, 1e9}) {
      INFO("norm_type " << norm_type << ", max_norm " << max_norm);
      auto pair = make_pair<T>(d);
      set_gradients<T>(*pair, 1);
      const Tensor mine = nn::clip_grad_norm_(pair->kten, max_norm, norm_type);
      const double theirs = torch::nn::utils::clip_grad_norm_(pair->torch, max_norm, norm_type);
      CHECK(std::fabs(static_cast<double>(mine.item<T>()) - theirs) <= rtol * theirs);
      require_close<T>(pair->kten.w.grad, pair->torch[0].grad(), rtol, 0, "w.grad");
      require_close<T>(pair->kten.b.grad, pair->torch[1].grad(), rtol, 0, "b.grad");
    }
  }
}

TEST_CASE("StepLR's rates are torch::optim::StepLR's, one step earlier", "[torch][schedule]") {
  // libtorch's C++ StepLR takes no step at construction (Python's _initial_step), so its k-th
  // step() gives the rate Python's (and kten's) (k-1)-th gives: the same sequence, shifted by one.
  optim::SGD mine(0.1);
  optim::StepLR my_schedule(mine, 3, 0.3);
  at::Tensor p = at::zeros({1}).requires_grad_();
  torch::optim::SGD theirs({p}, torch::optim::SGDOptions(0.1));
  torch::optim::StepLR their_schedule(theirs, 3, 0.3);
  their_schedule.step();
  for (int k = 0; k < 12; ++k) {
    INFO("step " << k);
    CHECK(mine.lr() == theirs.param_groups()[0].options().get_lr());
    my_schedule.step();
    their_schedule.step();
  }
}

TEST_CASE("StepLR, CosineAnnealingLR, LinearLR and SequentialLR give Python PyTorch 1.13's rates exactly", "[torch][schedule]") {
  // Printed by Debian's python3-torch 1.13 (repr() of each float, so the doubles round-trip):
  //   import warnings, torch; warnings.simplefilter("ignore")
  //   from torch.optim.lr_scheduler import StepLR, CosineAnnealingLR, LinearLR, SequentialLR
  //   def run(lr, make, steps):
  //       opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr); s = make(opt)
  //       out = [opt.param_groups[0]['lr']]
  //       for _ in range(steps): opt.step(); s.step(); out.append(opt.param_groups[0]['lr'])
  //       return out
  //   print(", ".join(repr(x) for x in run(0.1, lambda o: StepLR(o, 3, 0.3), 10)))  # and so on
  struct Case {
    const char* name;
    double lr;
    std::function<std::vector<std::unique_ptr<optim::LRScheduler>>(optim::Optimizer&)> make;
    std::vector<double> python;
  };
  using Schedules = std::vector<std::unique_ptr<optim::LRScheduler>>;
  const std::vector<Case> cases = {
      {"StepLR(opt, 3, 0.3), lr 0.1", 0.1,
       alone<optim::StepLR>(3, 0.3),
       {0.1, 0.1, 0.1, 0.03, 0.03, 0.03, 0.009, 0.009, 0.009, 0.0026999999999999997, 0.0026999999999999997}},
      {"CosineAnnealingLR(opt, 7, 0.001), lr 0.05", 0.05,
       alone<optim::CosineAnnealingLR>(7, 0.001),
       {0.05, 0.04757373726360927, 0.040775500145538976, 0.030951762881929707, 0.020048237118070304,
        0.010224499854461031, 0.0034262627363907338, 0.001, 0.003426262736390731, 0.010224499854461024,
        0.020048237118070293, 0.03095176288192968, 0.04077550014553897, 0.04757373726360928, 0.05,
        0.04757373726360928, 0.04077550014553898, 0.030951762881929693, 0.020048237118070307, 0.010224499854461035,
        0.003426262736390736, 0.001, 0.003426262736390731, 0.010224499854461104, 0.02004823711807046,
        0.03095176288192996}},
      {"LinearLR(opt), lr 0.2", 0.2,
       alone<optim::LinearLR>(),
       {0.06666666666666667, 0.09333333333333334, 0.12000000000000001, 0.1466666666666667, 0.17333333333333337, 0.2,
        0.2, 0.2, 0.2}},
      {"LinearLR(opt, 0.1, 0.9, 4), lr 0.2", 0.2,
       alone<optim::LinearLR>(0.1, 0.9, 4),
       {0.020000000000000004, 0.06000000000000001, 0.1, 0.13999999999999999, 0.17999999999999997, 0.17999999999999997,
        0.17999999999999997, 0.17999999999999997, 0.17999999999999997}},
      {"SequentialLR([LinearLR(opt, 0.1, 1, 5), CosineAnnealingLR(opt, 20, 1e-4)], [5]), lr 0.003", 0.003,
       [](optim::Optimizer& o) {
         Schedules s;
         s.push_back(std::make_unique<optim::LinearLR>(o, 0.1, 1.0, 5));
         s.push_back(std::make_unique<optim::CosineAnnealingLR>(o, 20, 1e-4));
         s.push_back(std::make_unique<optim::SequentialLR>(o, std::vector<optim::LRScheduler*>{s[0].get(), s[1].get()},
                                                           std::vector<std::int64_t>{5}));
         return s;
       },
       {0.00030000000000000003, 0.00084, 0.00138, 0.0019199999999999998, 0.00246, 0.003, 0.00298214809386295,
        0.002929031948627973, 0.0028419594600731335, 0.002723074641843674, 0.0025753048327204937, 0.002402288615824086,
        0.0022082862246223427, 0.001998074641843674, 0.0017768299743083351, 0.0015500000000000002, 0.0013231700256916658,
        0.0011019253581563266, 0.0008917137753776574, 0.0006977113841759142, 0.0005246951672795063, 0.0003769253581563264,
        0.00025804053992686674, 0.00017096805137202742, 0.00011785190613705041, 0.0001, 0.00011785190613705023,
        0.00017096805137202704, 0.00025804053992686647, 0.0003769253581563259, 0.0005246951672795056}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    optim::SGD sgd(c.lr);
    const auto schedules = c.make(sgd);
    std::vector<double> got{sgd.lr()};
    for (std::size_t k = 1; k < c.python.size(); ++k) {
      schedules.back()->step();
      got.push_back(sgd.lr());
    }
    CHECK(got == c.python);
  }
}
