// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Optimisers, schedules and gradient clipping: update rules against float64 references of PyTorch
// 1.13's formulas (and a few steps worked by hand), the optimiser state's round trip and refusals,
// schedules' rates, clip_grad_norm_, and a whole training step without a host synchronisation.
// (The torch label checks the same rules against libtorch itself: tests/torch/optim.cpp.)
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <Kokkos_Core.hpp>
#include <catch2/catch_approx.hpp>
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "io/checkpoint.hpp"
#include "support.hpp"

using namespace kten;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

// Two parameters whose gradients the test sets: "a" (4 values) and "b" (2x3).
// The slots are the registered ones, which the tests reach into.
struct Params : nn::Module {
  nn::Parameter& a;
  nn::Parameter& b;
  Params(DType dtype, const Device& d)
      : a(*register_parameter("a", nn::Parameter{tensor(std::vector<double>{0.5, -1.25, 2.0, 0.0}).astype(dtype)})),
        b(*register_parameter(
            "b", nn::Parameter{tensor(std::vector<double>{1.0, -0.75, 0.25, -2.0, 1.5, 0.125}, {2, 3}).astype(dtype)})) {
    to(d);
  }
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "Params"; }
};

// Every element of both parameters (or of both gradients), a then b, in double.
template <class T>
std::vector<double> elements(const Tensor& a, const Tensor& b) {
  std::vector<double> out = test::host_doubles<T>(a);
  const std::vector<double> rest = test::host_doubles<T>(b);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The gradients of step k: mixed signs and sizes, no zeros.
std::vector<double> gradients(int k) {
  std::vector<double> g(10);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(1.7 * static_cast<double>(i) + 0.9 * k) * (1 + 0.3 * k);
  return g;
}

void set_gradients(Params& m, const std::vector<double>& g) {
  const DType dtype = m.a.value.dtype();
  m.a.grad.copy_from(tensor(std::vector<double>(g.begin(), g.begin() + 4)).astype(dtype));
  m.b.grad.copy_from(tensor(std::vector<double>(g.begin() + 4, g.end()), {2, 3}).astype(dtype));
}

// torch.optim.SGD's rule (_single_tensor_sgd) in float64, element by element.
struct SgdReference {
  double lr;
  optim::SGDOptions o;
  std::vector<double> buffer = std::vector<double>(10);
  void step(std::vector<double>& p, const std::vector<double>& g, int k) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buffer[i] = k == 1 ? d : o.momentum * buffer[i] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buffer[i] : buffer[i];
      }
      p[i] -= lr * d;
    }
  }
};

// torch.optim.Adam's and AdamW's rule (_single_tensor_adam(w)) in float64.
struct AdamReference {
  double lr;
  optim::AdamOptions o;
  bool decoupled;
  std::vector<double> m = std::vector<double>(10), v = std::vector<double>(10);
  void step(std::vector<double>& p, const std::vector<double>& g, int k) {
    const double bias_correction1 = 1 - std::pow(o.beta1, k), bias_correction2 = 1 - std::pow(o.beta2, k);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double grad = g[i];
      if (decoupled) p[i] *= 1 - lr * o.weight_decay;
      else grad += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * grad;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * grad * grad;
      p[i] -= lr / bias_correction1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bias_correction2) + o.eps);
    }
  }
};

// Four steps of `optimizer` on Params against `reference`, on the device under test.
template <class T, class Reference>
void check_steps(optim::Optimizer& optimizer, Reference reference) {
  Params m(dtype_of<T>(), test::device());
  std::vector<double> p = elements<T>(m.a.value, m.b.value);
  for (int k = 1; k <= 4; ++k) {
    INFO("step " << k);
    const std::vector<double> g = gradients(k);
    set_gradients(m, g);
    optimizer.step(m);
    reference.step(p, g, k);
    CHECK(m.a.value.device() == test::device());
    test::require_allclose(elements<T>(m.a.value, m.b.value), p, test::tolerance<T>(), test::tolerance<T>());
  }
}

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return "";
}

// The sync debug mode for a scope.
struct SyncMode {
  SyncDebug previous;
  explicit SyncMode(SyncDebug mode) : previous(set_sync_debug_mode(mode)) {}
  ~SyncMode() { set_sync_debug_mode(previous); }
};

// The kernels launched while alive (Kokkos Tools' callbacks), by label.
std::mutex launched_mutex;
std::vector<std::string> launched;
void on_launch(const char* label, std::uint32_t, std::uint64_t*) {
  std::lock_guard<std::mutex> lock(launched_mutex);
  launched.emplace_back(label);
}
struct KernelLog {
  KernelLog() {
    launched.clear();
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_launch);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_launch);
  }
  ~KernelLog() {
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  }
};

}  // namespace

// --- Update rules ---

TEMPLATE_TEST_CASE("SGD follows torch.optim.SGD: momentum, dampening, Nesterov, weight decay", "[optim]", float, double) {
  const std::vector<std::pair<const char*, optim::SGDOptions>> cases = {
      {"plain", {}},
      {"weight decay", {0, 0, 0.05}},
      {"momentum", {0.9}},
      {"momentum and dampening", {0.9, 0.3}},
      {"Nesterov", {0.8, 0, 0, true}},
      {"Nesterov and weight decay", {0.7, 0, 0.1, true}},
  };
  for (const auto& [name, options] : cases) {
    INFO(name);
    optim::SGD sgd(0.1, options);
    check_steps<TestType>(sgd, SgdReference{0.1, options});
  }
}

TEMPLATE_TEST_CASE("Adam and AdamW follow torch.optim.Adam and AdamW", "[optim]", float, double) {
  SECTION("Adam, defaults") {
    optim::Adam adam(0.01);
    check_steps<TestType>(adam, AdamReference{0.01, {}, false});
  }
  SECTION("Adam, betas, eps and L2 weight decay") {
    const optim::AdamOptions o{0.8, 0.99, 1e-6, 0.1};
    optim::Adam adam(0.05, o);
    check_steps<TestType>(adam, AdamReference{0.05, o, false});
  }
  SECTION("Adam, beta1 0") {
    const optim::AdamOptions o{0, 0.9};
    optim::Adam adam(0.02, o);
    check_steps<TestType>(adam, AdamReference{0.02, o, false});
  }
  SECTION("AdamW, defaults (weight decay 1e-2)") {
    optim::AdamW adamw(0.01);
    check_steps<TestType>(adamw, AdamReference{0.01, {0.9, 0.999, 1e-8, 1e-2}, true});
  }
  SECTION("AdamW, strong decay and other betas") {
    optim::AdamW adamw(0.05, 0.5, {0.85, 0.95, 1e-7});
    check_steps<TestType>(adamw, AdamReference{0.05, {0.85, 0.95, 1e-7, 0.5}, true});
  }
}

TEST_CASE("the first steps of SGD, Nesterov, Adam and AdamW, worked by hand", "[optim]") {
  // A gradient of 1 everywhere at every step; the first element of "a" starts at 0.5.
  const auto first_element_after = [](optim::Optimizer& optimizer, int steps) {
    Params m(float64, test::device());
    for (int k = 0; k < steps; ++k) {
      set_gradients(m, std::vector<double>(10, 1.0));
      optimizer.step(m);
    }
    return test::host_doubles<double>(m.a.value)[0];
  };
  optim::SGD momentum(0.1, {0.9});  // b = 1, p = 0.4; b = 0.9 + 1 = 1.9, p = 0.4 - 0.19
  CHECK(first_element_after(momentum, 2) == Approx(0.21).epsilon(1e-15));
  optim::SGD nesterov(0.1, {0.9, 0, 0, true});  // d = 1 + 0.9; then b = 1.9, d = 1 + 0.9 * 1.9 = 2.71
  CHECK(first_element_after(nesterov, 2) == Approx(0.5 - 0.19 - 0.271).epsilon(1e-15));
  // Adam with a constant gradient moves by lr / (1 + eps) each step: the bias corrections make
  // m / (1 - beta1^t) = 1 and sqrt(v / (1 - beta2^t)) = 1.
  optim::Adam adam(0.01);
  CHECK(first_element_after(adam, 3) == Approx(0.5 - 3 * 0.01 / (1 + 1e-8)).epsilon(1e-14));
  optim::AdamW adamw(0.01, 0.1);  // p (1 - lr wd) first: 0.5 * 0.999, then - 0.01 / (1 + 1e-8)
  CHECK(first_element_after(adamw, 1) == Approx(0.5 * 0.999 - 0.01 / (1 + 1e-8)).epsilon(1e-15));
}

TEST_CASE("optimisers refuse bad hyperparameters, saying which", "[optim]") {
  CHECK(optim::SGDOptions{0.9f}.momentum == Approx(0.9).epsilon(1e-7));  // an aggregate: the first field is momentum
  CHECK(optim::SGD(0.1, 0.25).weight_decay() == 0.25);
  CHECK(optim::SGD(0.1, optim::SGDOptions{0.9, 0.1}).options().dampening == 0.1);
  const auto sgd_error = [](optim::SGDOptions o) { return message_of<Error>([&] { optim::SGD(0.1, o); }); };
  CHECK_THAT(sgd_error({-0.5}), ContainsSubstring("momentum must be a finite number >= 0, got -0.5"));
  CHECK_THAT(sgd_error({qnan}), ContainsSubstring("momentum"));
  CHECK_THAT(sgd_error({0.9, inf}), ContainsSubstring("dampening"));
  CHECK_THAT(sgd_error({0, 0, 0, true}), ContainsSubstring("Nesterov momentum needs a momentum > 0 and dampening 0"));
  CHECK_THAT(sgd_error({0.9, 0.1, 0, true}), ContainsSubstring("Nesterov"));
  CHECK_NOTHROW(optim::SGD(0.1, {0.9, 0, 0, true}));

  const auto adam_error = [](double lr, optim::AdamOptions o) { return message_of<Error>([&] { optim::Adam(lr, o); }); };
  CHECK_THAT(adam_error(-1e-3, {}), ContainsSubstring("Adam: the learning rate must be a finite number >= 0"));
  CHECK_THAT(adam_error(qnan, {}), ContainsSubstring("learning rate"));
  CHECK_THAT(adam_error(1e-3, {1.0}), ContainsSubstring("beta1 must lie in [0, 1), got 1"));
  CHECK_THAT(adam_error(1e-3, {0.9, -0.1}), ContainsSubstring("beta2"));
  CHECK_THAT(adam_error(1e-3, {0.9, 0.999, -1}), ContainsSubstring("eps"));
  CHECK_THAT(adam_error(1e-3, {0.9, 0.999, 1e-8, inf}), ContainsSubstring("weight decay"));
  CHECK_THAT(message_of<Error>([] { optim::AdamW(1e-3, -0.1); }), ContainsSubstring("AdamW: the weight decay"));
  CHECK_THAT(message_of<Error>([] { optim::AdamW(1e-3, 0.1, {0.9, 0.999, 1e-8, 0.2}); }),
             ContainsSubstring("options.weight_decay is Adam's L2 penalty and must stay 0"));
  CHECK(optim::AdamW(1e-3).options().weight_decay == 1e-2);
  CHECK(optim::AdamW(1e-3).kind() == "AdamW");

  optim::Adam adam(1e-3);
  adam.set_lr(0.5);
  CHECK(adam.lr() == 0.5);
  CHECK_THROWS_AS(adam.set_lr(-1), Error);
  CHECK_THROWS_AS(adam.set_lr(qnan), Error);
  CHECK(adam.lr() == 0.5);
}

TEST_CASE("an optimiser step is one kernel per parameter, enqueued without a sync or a transfer", "[optim]") {
  const Device d = test::device();
  Params m(float32, d);
  set_gradients(m, gradients(1));
  optim::SGD plain(0.1), momentum(0.1, {0.9});
  optim::Adam adam(0.01);
  optim::AdamW adamw(0.01);
  const std::vector<std::pair<optim::Optimizer*, const char*>> cases = {
      {&plain, "kten::sgd"}, {&momentum, "kten::sgd"}, {&adam, "kten::adam"}, {&adamw, "kten::adam"}};
  for (const auto& [optimizer, label] : cases) {
    INFO(optimizer->kind() << " " << label);
    for (int k = 1; k <= 2; ++k) {  // the first step makes the state, the second uses it
      synchronize(d);
      reset_stats();
      std::vector<std::string> seen;
      {
        KernelLog log;
        optimizer->step(m);
        std::lock_guard<std::mutex> lock(launched_mutex);
        seen = launched;
      }
      CHECK(seen == std::vector<std::string>{label, label});
      CHECK(stats().host_syncs == 0);
      CHECK(stats().transfers() == 0);
    }
  }
}

TEST_CASE("an optimiser checks every parameter before it updates any", "[optim]") {
  const Device d = test::device();
  Params m(float32, d);
  set_gradients(m, gradients(1));
  optim::Adam adam(0.01);
  m.b.grad = zeros({3, 2}, d);  // a gradient of another shape: refused, "a" untouched
  const auto a0 = test::host_doubles<float>(m.a.value);
  CHECK_THAT(message_of<Error>([&] { adam.step(m); }), ContainsSubstring("parameter 'b' has no gradient of its shape"));
  CHECK(test::host_doubles<float>(m.a.value) == a0);
  CHECK(adam.state().scalars.size() == 7);  // lr, initial_lr, schedule_step, 4 hyperparameters: no step counts
  m.b.track();
  const Tensor b = m.b.value;
  m.b.value = zeros({3, 2}, d).transpose(0, 1);  // a strided view: the in-place update would need contiguous memory
  CHECK_THAT(message_of<Error>([&] { adam.step(m); }), ContainsSubstring("parameter 'b' or its gradient is a strided view"));
  CHECK(test::host_doubles<float>(m.a.value) == a0);
  m.b.value = b;
  m.b.track();
  adam.step(m);
  // The state was made for float32 parameters: the model cast to float64 is refused.
  m.to(float64);
  set_gradients(m, gradients(1));
  CHECK_THAT(message_of<ShapeError>([&] { adam.step(m); }), ContainsSubstring("an optimiser serves one model"));
}

TEST_CASE("an optimiser refuses a second model whose parameters have the same names", "[optim][state]") {
  // A new user stepped one Adam for two U-Nets: keyed by name alone, both shared one set of moments
  // and step counts and both trained wrong. The state is bound to the parameters themselves.
  const Device d = test::device();
  for (const bool restored : {false, true}) {
    Params first(float32, d), second(float32, d);
    set_gradients(first, gradients(1));
    set_gradients(second, gradients(2));
    optim::Adam adam(0.01);
    if (restored) {  // the state loaded for `first` binds to it as a step would
      optim::Adam stepped(0.01);
      Params source(float32, d);
      set_gradients(source, gradients(1));
      stepped.step(source);
      adam.load_state(stepped.state(), first);
    } else {
      adam.step(first);
    }
    const auto before = elements<float>(second.a.value, second.b.value);
    INFO((restored ? "after load_state" : "after a step"));
    CHECK_THAT(message_of<Error>([&] { adam.step(second); }),
               ContainsSubstring("parameter 'a' is not the one this optimiser has state for") &&
                   ContainsSubstring("make one optimiser per model"));
    CHECK(elements<float>(second.a.value, second.b.value) == before);  // refused before any update
    adam.step(first);  // its own model still steps
    CHECK(adam.state().scalars.size() == 9);  // lr, initial_lr, schedule_step, 4 hyperparameters, a.step, b.step
  }
}

TEST_CASE("an optimiser refuses to step a model that moved away from its state", "[optim][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  Params m(float32, test::device());
  set_gradients(m, gradients(1));
  optim::Adam adam(0.01);
  adam.step(m);
  m.to(test::other_device());
  CHECK_THAT(message_of<DeviceMismatch>([&] { adam.step(m); }), ContainsSubstring("load_state(state(), model)"));
  adam.load_state(adam.state(), m);  // carries the state over: explicit copies
  CHECK(adam.state().tensors[0].second.device() == test::other_device());
  CHECK_NOTHROW(adam.step(m));
}

// --- State ---

namespace {

struct Setup {
  const char* name;
  // The optimiser; `fresh` ones get other hyperparameters, which load_state() must replace.
  std::function<std::unique_ptr<optim::Optimizer>(bool fresh)> optimizer;
  // Its schedules; the last is the one stepped.
  std::function<std::vector<std::unique_ptr<optim::LRScheduler>>(optim::Optimizer&)> schedules;
};

std::vector<Setup> setups() {
  using Schedules = std::vector<std::unique_ptr<optim::LRScheduler>>;
  return {
      {"SGD, Nesterov, weight decay, StepLR",
       [](bool fresh) { return std::make_unique<optim::SGD>(fresh ? 1.0 : 0.2, optim::SGDOptions{fresh ? 0.5 : 0.9, 0, 0.01, !fresh}); },
       [](optim::Optimizer& o) {
         Schedules s;
         s.push_back(std::make_unique<optim::StepLR>(o, 2, 0.5));
         return s;
       }},
      {"Adam, warm-up then cosine",
       [](bool fresh) { return std::make_unique<optim::Adam>(fresh ? 1.0 : 0.05, optim::AdamOptions{fresh ? 0.5 : 0.8, 0.99, 1e-7, 0.01}); },
       [](optim::Optimizer& o) {
         Schedules s;
         s.push_back(std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 3));
         s.push_back(std::make_unique<optim::CosineAnnealingLR>(o, 6, 0.001));
         s.push_back(std::make_unique<optim::SequentialLR>(o, std::vector<optim::LRScheduler*>{s[0].get(), s[1].get()},
                                                           std::vector<std::int64_t>{3}));
         return s;
       }},
      {"AdamW, cosine",
       [](bool fresh) { return std::make_unique<optim::AdamW>(fresh ? 1.0 : 0.05, fresh ? 0.0 : 0.1); },
       [](optim::Optimizer& o) {
         Schedules s;
         s.push_back(std::make_unique<optim::CosineAnnealingLR>(o, 4));
         return s;
       }},
  };
}

// One training step, with clipping and the schedule.
void train_step(nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler& schedule, const Tensor& X,
                const Tensor& Y) {
  optimizer.zero_grad(model);
  nn::MSELoss()(model(X), Y).backward();
  nn::clip_grad_norm_(model, 0.5);
  optimizer.step(model);
  schedule.step();
}

// A snapshot: the tensors copied, so later steps do not change it.
optim::OptimizerState snapshot(const optim::OptimizerState& s) {
  optim::OptimizerState out = s;
  for (auto& [name, t] : out.tensors) t = t.copyto(t.device());
  return out;
}

void require_same_state(const optim::OptimizerState& got, const optim::OptimizerState& want) {
  CHECK(got.kind == want.kind);
  REQUIRE(got.scalars.size() == want.scalars.size());
  for (std::size_t i = 0; i < got.scalars.size(); ++i) {
    INFO(want.scalars[i].first);
    CHECK(got.scalars[i].first == want.scalars[i].first);
    CHECK(std::isnan(got.scalars[i].second) == std::isnan(want.scalars[i].second));
    if (!std::isnan(want.scalars[i].second)) CHECK(got.scalars[i].second == want.scalars[i].second);
  }
  REQUIRE(got.tensors.size() == want.tensors.size());
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    INFO(want.tensors[i].first);
    CHECK(got.tensors[i].first == want.tensors[i].first);
    CHECK(got.tensors[i].second.to_vector<float>() == want.tensors[i].second.to_vector<float>());
  }
}

}  // namespace

TEST_CASE("state() names everything after the parameters and shares the optimiser's tensors", "[optim][state]") {
  const Device d = test::device();
  nn::Sequential model = test::small_mlp(d);
  const Tensor X = rand({8, 3}, d, 5), Y = rand({8, 1}, d, 6);
  optim::Adam adam(0.01, {0.8, 0.99, 1e-7, 0.01});
  optim::StepLR schedule(adam, 3, 0.5);
  for (int k = 0; k < 2; ++k) train_step(model, adam, schedule, X, Y);
  const optim::OptimizerState s = adam.state();
  CHECK(s.kind == "Adam");
  const std::vector<std::pair<std::string, double>> scalars = {
      {"lr", 0.01}, {"initial_lr", 0.01}, {"schedule_step", 2}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-7},
      {"weight_decay", 0.01}, {"0.bias.step", 2}, {"0.weight.step", 2}, {"2.bias.step", 2}, {"2.weight.step", 2}};
  CHECK(s.scalars == scalars);
  std::vector<std::string> names;
  for (const auto& [name, t] : s.tensors) {
    names.push_back(name);
    CHECK(t.device() == d);
  }
  CHECK(names == std::vector<std::string>{"0.bias.exp_avg", "0.bias.exp_avg_sq", "0.weight.exp_avg", "0.weight.exp_avg_sq",
                                          "2.bias.exp_avg", "2.bias.exp_avg_sq", "2.weight.exp_avg", "2.weight.exp_avg_sq"});
  CHECK(s.tensors[2].second.shape() == model.named_parameters()[0].slot->value.shape());
  const auto before = s.tensors[0].second.to_vector<float>();
  train_step(model, adam, schedule, X, Y);
  CHECK(s.tensors[0].second.to_vector<float>() != before);  // the live buffer

  optim::SGD plain(0.1);
  plain.step(model);
  CHECK(plain.state().tensors.empty());  // no momentum, no buffer; the step counts still
  CHECK(plain.state().scalars.back() == std::pair<std::string, double>{"2.weight.step", 1});
}

TEST_CASE("state() and load_state() into fresh objects continue training bit for bit", "[optim][state][schedule]") {
  const Device d = test::device();
  const Tensor X = rand({8, 3}, d, 5), Y = rand({8, 1}, d, 6);
  for (const Setup& setup : setups()) {
    for (const bool schedule_first : {true, false}) {
      INFO(setup.name << (schedule_first ? ", schedule made before load_state" : ", schedule made after load_state"));
      nn::Sequential model = test::small_mlp(d);
      auto optimizer = setup.optimizer(false);
      auto schedules = setup.schedules(*optimizer);
      for (int k = 0; k < 4; ++k) train_step(model, *optimizer, *schedules.back(), X, Y);
      const optim::OptimizerState saved = snapshot(optimizer->state());
      std::vector<Tensor> saved_parameters;
      for (const Tensor& p : model.parameters()) saved_parameters.push_back(p.detach().copyto(d));
      std::vector<double> rates;
      for (int k = 0; k < 5; ++k) {
        train_step(model, *optimizer, *schedules.back(), X, Y);
        rates.push_back(optimizer->lr());
      }

      nn::Sequential restored = test::small_mlp(d);
      for (std::size_t i = 0; i < saved_parameters.size(); ++i) restored.parameters()[i].copy_from(saved_parameters[i]);
      auto fresh = setup.optimizer(true);
      std::vector<std::unique_ptr<optim::LRScheduler>> fresh_schedules;
      if (schedule_first) fresh_schedules = setup.schedules(*fresh);
      fresh->load_state(saved, restored);
      if (!schedule_first) fresh_schedules = setup.schedules(*fresh);
      CHECK(fresh->lr() == saved.scalars[0].second);
      std::vector<double> fresh_rates;
      for (int k = 0; k < 5; ++k) {
        train_step(restored, *fresh, *fresh_schedules.back(), X, Y);
        fresh_rates.push_back(fresh->lr());
      }
      CHECK(fresh_rates == rates);
      for (std::size_t i = 0; i < saved_parameters.size(); ++i)
        CHECK(restored.parameters()[i].to_vector<float>() == model.parameters()[i].to_vector<float>());
      require_same_state(fresh->state(), optimizer->state());
    }
  }
}

TEST_CASE("load_state() refuses a malformed or mismatching state and changes nothing", "[optim][state]") {
  const Device d = test::device();
  const Tensor X = rand({8, 3}, d, 5), Y = rand({8, 1}, d, 6);
  nn::Sequential model = test::small_mlp(d);
  optim::Adam target(0.01);
  optim::StepLR schedule(target, 2);
  for (int k = 0; k < 3; ++k) train_step(model, target, schedule, X, Y);
  const optim::OptimizerState before = snapshot(target.state());

  nn::Sequential other_model = test::small_mlp(d);
  optim::Adam source(0.02, {0.8});
  optim::StepLR other_schedule(source, 5);
  train_step(other_model, source, other_schedule, X, Y);
  const optim::OptimizerState good = source.state();

  using Edit = std::function<void(optim::OptimizerState&)>;
  const auto scalar = [](optim::OptimizerState& s, const std::string& name) -> double& {
    for (auto& [n, v] : s.scalars)
      if (n == name) return v;
    FAIL("no scalar " << name);
    return s.scalars[0].second;
  };
  const auto erase_scalar = [](optim::OptimizerState& s, const std::string& name) {
    s.scalars.erase(std::remove_if(s.scalars.begin(), s.scalars.end(), [&](const auto& e) { return e.first == name; }),
                    s.scalars.end());
  };
  const auto tensor_named = [](optim::OptimizerState& s, const std::string& name) -> Tensor& {
    for (auto& [n, t] : s.tensors)
      if (n == name) return t;
    FAIL("no tensor " << name);
    return s.tensors[0].second;
  };
  const std::vector<std::tuple<const char*, Edit, const char*>> cases = {
      {"another kind", [](auto& s) { s.kind = "SGD"; }, "the state is of an optimiser of kind 'SGD', not Adam"},
      {"no lr", [&](auto& s) { erase_scalar(s, "lr"); }, "the state has no 'lr'"},
      {"no beta2", [&](auto& s) { erase_scalar(s, "beta2"); }, "the state has no 'beta2'"},
      {"a scalar twice", [](auto& s) { s.scalars.emplace_back("eps", 1e-8); }, "the state names 'eps' twice"},
      {"an unknown scalar", [](auto& s) { s.scalars.emplace_back("momentum", 0.9); }, "'momentum' is unknown to Adam"},
      {"a negative lr", [&](auto& s) { scalar(s, "lr") = -1; }, "the learning rate must be a finite number >= 0"},
      {"a NaN initial_lr", [&](auto& s) { scalar(s, "initial_lr") = qnan; }, "initial_lr must be a finite number"},
      {"beta1 of 1", [&](auto& s) { scalar(s, "beta1") = 1; }, "beta1 must lie in [0, 1)"},
      {"a fractional schedule step", [&](auto& s) { scalar(s, "schedule_step") = 0.5; }, "'schedule_step' must be an integer >= -1"},
      {"a step count of 0", [&](auto& s) { scalar(s, "0.weight.step") = 0; }, "'0.weight.step' must be an integer >= 1"},
      {"a huge step count", [&](auto& s) { scalar(s, "0.weight.step") = 1e300; }, "'0.weight.step' must be an integer"},
      {"a step count of no parameter", [](auto& s) { s.scalars.emplace_back("4.weight.step", 1); },
       "'4.weight.step' names no parameter of the model (Sequential)"},
      {"a buffer without its step count", [&](auto& s) { erase_scalar(s, "2.bias.step"); },
       "'2.bias.exp_avg' has no '2.bias.step' beside it"},
      {"a missing buffer", [](auto& s) { s.tensors.erase(s.tensors.begin() + 3); },
       "parameter '0.weight' has a step count but no '0.weight.exp_avg_sq'"},
      {"a buffer twice", [](auto& s) { s.tensors.push_back(s.tensors[0]); }, "names '0.bias.exp_avg' twice"},
      {"an unknown buffer", [](auto& s) { s.tensors.emplace_back("0.weight.momentum_buffer", s.tensors[0].second); },
       "'0.weight.momentum_buffer' is no buffer of Adam"},
      {"a buffer of no parameter", [](auto& s) { s.tensors.emplace_back("5.bias.exp_avg", s.tensors[0].second); },
       "'5.bias.exp_avg' names no parameter"},
      {"a buffer of another shape", [&](auto& s) { tensor_named(s, "0.weight.exp_avg") = zeros({12}, d); },
       "'0.weight.exp_avg' has shape 12 and dtype float32, but parameter '0.weight' has shape"},
      {"a buffer of another dtype", [&](auto& s) { Tensor& t = tensor_named(s, "2.bias.exp_avg"); t = t.astype(float64); },
       "and dtype float64, but parameter '2.bias' has shape 1 and dtype float32"},
      {"an undefined buffer", [&](auto& s) { tensor_named(s, "2.bias.exp_avg") = Tensor(); }, "'2.bias.exp_avg' is undefined"},
  };
  for (const auto& [name, edit, message] : cases) {
    INFO(name);
    optim::OptimizerState bad = good;
    edit(bad);
    CHECK_THAT(message_of<FormatError>([&] { target.load_state(bad, model); }), ContainsSubstring(message));
    require_same_state(target.state(), before);
  }
  // SGD's own scalars.
  optim::SGD sgd(0.1, {0.9});
  sgd.step(model);
  const optim::OptimizerState sgd_before = snapshot(sgd.state());
  for (const auto& [nesterov, momentum, message] : {std::tuple{2.0, 0.9, "'nesterov' must be 0 or 1, got 2"},
                                                    std::tuple{1.0, 0.0, "Nesterov momentum needs a momentum > 0"}}) {
    optim::OptimizerState bad = sgd.state();
    scalar(bad, "nesterov") = nesterov;
    scalar(bad, "momentum") = momentum;
    CHECK_THAT(message_of<FormatError>([&] { sgd.load_state(bad, model); }), ContainsSubstring(message));
    require_same_state(sgd.state(), sgd_before);
  }
  // A lazy layer that has not seen an input has no parameter to restore into yet.
  nn::Sequential lazy;
  lazy.add(nn::Linear(4, {true, float32, 7}));
  lazy.add(nn::ReLU());
  lazy.add(nn::Linear(1, {true, float32, 8}));
  lazy.to(d);
  CHECK_THAT(message_of<FormatError>([&] { target.load_state(good, lazy); }), ContainsSubstring("load the model's parameters first"));
  require_same_state(target.state(), before);
  // The good state loads; an SGD state without momentum buffers too (they are made at the next step).
  CHECK_NOTHROW(target.load_state(good, model));
  require_same_state(target.state(), good);
  optim::SGD fresh(0.1);
  optim::OptimizerState no_buffers = sgd.state();
  no_buffers.tensors.clear();
  CHECK_NOTHROW(fresh.load_state(no_buffers, model));
  CHECK(fresh.options().momentum == 0.9);
}

TEST_CASE("load_state() puts the buffers on the parameters' device", "[optim][state][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  Params here(float32, test::device()), there(float32, test::other_device());
  set_gradients(here, gradients(1));
  set_gradients(there, gradients(1));
  optim::Adam a(0.01), b(0.01);
  a.step(here);
  reset_stats();
  b.load_state(a.state(), there);
  CHECK(stats().transfers() == 2 * 2);  // two buffers of two parameters, each an explicit copy
  for (const auto& [name, t] : b.state().tensors) CHECK(t.device() == test::other_device());
  there.a.value.copy_from(here.a.value.detach());  // the parameters as the state found them
  there.b.value.copy_from(here.b.value.detach());
  b.step(there);
  a.step(here);
  test::require_allclose(there.a.value.to(cpu()).to_vector<float>(), test::host_doubles<float>(here.a.value));
}

// --- Schedules ---

namespace {
// The rates of `steps` schedule steps, starting with the rate after construction.
std::vector<double> rates(optim::Optimizer& o, optim::LRScheduler& s, int steps) {
  std::vector<double> out{o.lr()};
  for (int k = 0; k < steps; ++k) {
    s.step();
    out.push_back(o.lr());
  }
  return out;
}
}  // namespace

TEST_CASE("StepLR multiplies by gamma every step_size steps", "[schedule]") {
  optim::SGD sgd(1.0);
  optim::StepLR schedule(sgd, 2, 0.5);
  CHECK(sgd.schedule_step() == 0);
  CHECK(rates(sgd, schedule, 6) == std::vector<double>{1, 1, 0.5, 0.5, 0.25, 0.25, 0.125});
  CHECK(schedule.last_epoch() == 6);
  CHECK(schedule.closed_form_lr(5) == 0.25);
  CHECK_THAT(message_of<Error>([&] { optim::StepLR(sgd, 0); }), ContainsSubstring("StepLR: the step size must be >= 1, got 0"));
  CHECK_THAT(message_of<Error>([&] { optim::StepLR(sgd, 1, -1); }), ContainsSubstring("gamma"));
}

TEST_CASE("CosineAnnealingLR follows half a cosine down to eta_min and back", "[schedule]") {
  optim::Adam adam(0.1);
  CHECK(adam.schedule_step() == -1);
  optim::CosineAnnealingLR schedule(adam, 4, 0.02);
  CHECK(adam.initial_lr() == 0.1);
  const std::vector<double> got = rates(adam, schedule, 10);
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("step " << k);
    const double closed = 0.02 + (0.1 - 0.02) * (1 + std::cos(M_PI * static_cast<double>(k) / 4)) / 2;
    CHECK(got[k] == Approx(closed).epsilon(1e-14).margin(1e-16));
    CHECK(schedule.closed_form_lr(static_cast<std::int64_t>(k)) == Approx(closed).epsilon(1e-15));
  }
  CHECK(got[4] == Approx(0.02).epsilon(1e-14));  // the minimum at t_max
  CHECK(got[8] == Approx(0.1).epsilon(1e-14));   // back up after another t_max
  // The recursive form follows a rate set by hand, as PyTorch's does.
  adam.set_lr(0.05);
  schedule.step();
  CHECK(adam.lr() == Approx((1 + std::cos(M_PI * 11 / 4)) / (1 + std::cos(M_PI * 10 / 4)) * (0.05 - 0.02) + 0.02));
  CHECK_THROWS_AS(optim::CosineAnnealingLR(adam, 0), Error);
  CHECK_THROWS_AS(optim::CosineAnnealingLR(adam, 10, -0.1), Error);
}

TEST_CASE("LinearLR warms up from start_factor to end_factor over total_iters steps", "[schedule]") {
  optim::SGD sgd(0.3);
  optim::LinearLR schedule(sgd);  // PyTorch's defaults: 1/3 to 1 over 5 steps
  const std::vector<double> got = rates(sgd, schedule, 7);
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("step " << k);
    const double closed = 0.3 * (1.0 / 3 + (1 - 1.0 / 3) * static_cast<double>(std::min<std::size_t>(k, 5)) / 5);
    CHECK(got[k] == Approx(closed).epsilon(1e-15));
    CHECK(schedule.closed_form_lr(static_cast<std::int64_t>(k)) == Approx(closed).epsilon(1e-15));
  }
  CHECK(got[0] == 0.3 * (1.0 / 3));  // the first rate is set at construction
  CHECK(got[6] == got[5]);
  CHECK_THAT(message_of<Error>([&] { optim::LinearLR(sgd, 0.0); }), ContainsSubstring("start factor must lie in (0, 1]"));
  CHECK_THAT(message_of<Error>([&] { optim::LinearLR(sgd, 0.5, 1.5); }), ContainsSubstring("end factor"));
  CHECK_THAT(message_of<Error>([&] { optim::LinearLR(sgd, 0.5, 1, 0); }), ContainsSubstring("total_iters must be >= 1"));
}

TEST_CASE("SequentialLR runs a warm-up, then a cosine from the milestone", "[schedule]") {
  for (const bool cosine_first : {false, true}) {
    INFO((cosine_first ? "cosine made first" : "warm-up made first"));
    optim::Adam adam(0.4);
    std::unique_ptr<optim::LinearLR> warmup;
    std::unique_ptr<optim::CosineAnnealingLR> cosine;
    if (cosine_first) cosine = std::make_unique<optim::CosineAnnealingLR>(adam, 4);
    warmup = std::make_unique<optim::LinearLR>(adam, 0.25, 1.0, 2);
    if (!cosine_first) cosine = std::make_unique<optim::CosineAnnealingLR>(adam, 4);
    optim::SequentialLR schedule(adam, {warmup.get(), cosine.get()}, {2});
    const std::vector<double> got = rates(adam, schedule, 8);
    // Warm-up at 0 and 1 (0.1, 0.25), then the cosine from its start at the milestone (step 2).
    const std::vector<double> want = {0.1, 0.25, 0.4, 0.2 * (1 + std::cos(M_PI / 4)), 0.2, 0.2 * (1 + std::cos(3 * M_PI / 4)),
                                      0.0, 0.2 * (1 + std::cos(5 * M_PI / 4)), 0.2 * (1 + std::cos(6 * M_PI / 4))};
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      INFO("step " << k);
      CHECK(got[k] == Approx(want[k]).epsilon(1e-14).margin(1e-16));
    }
    CHECK(adam.initial_lr() == 0.4);
  }
  optim::SGD sgd(1.0), other(1.0);
  optim::StepLR a(sgd, 2), b(other, 2);
  CHECK_THAT(message_of<Error>([&] { optim::SequentialLR(sgd, {&a, &b}, {3}); }), ContainsSubstring("schedule 1 drives another optimiser"));
  CHECK_THAT(message_of<Error>([&] { optim::SequentialLR(sgd, {&a, &a}, {}); }), ContainsSubstring("one milestone fewer than schedules"));
  CHECK_THAT(message_of<Error>([&] { optim::SequentialLR(sgd, {&a, &a, &a}, {3, 3}); }), ContainsSubstring("milestones must increase"));
  CHECK_THAT(message_of<Error>([&] { optim::SequentialLR(sgd, {&a, nullptr}, {3}); }), ContainsSubstring("schedule 1 is null"));
}

TEST_CASE("a schedule made on an optimiser whose schedule is under way changes nothing", "[schedule][state]") {
  optim::SGD sgd(1.0);
  optim::StepLR schedule(sgd, 1, 0.5);
  schedule.step();
  schedule.step();
  CHECK(sgd.lr() == 0.25);
  optim::StepLR again(sgd, 1, 0.5);  // as after load_state(): attaches where the schedule is
  CHECK(sgd.lr() == 0.25);
  CHECK(again.last_epoch() == 2);
  again.step();
  CHECK(sgd.lr() == 0.125);
}

// --- clip_grad_norm_ ---

TEMPLATE_TEST_CASE("clip_grad_norm_ scales every gradient by max_norm / total norm, on the device", "[clip]", float, double) {
  using T = TestType;
  const Device d = test::device();
  Params m(dtype_of<T>(), d);
  const std::vector<double> g = gradients(1);
  double l2 = 0, largest = 0, l1 = 0;
  for (double x : g) {
    l2 += x * x;
    largest = std::max(largest, std::fabs(x));
    l1 += std::fabs(x);
  }
  l2 = std::sqrt(l2);
  for (const auto& [norm_type, total] : {std::pair{2.0, l2}, std::pair{inf, largest}, std::pair{1.0, l1}}) {
    INFO("norm_type " << norm_type);
    for (const double max_norm : {0.5, 1e6}) {
      INFO("max_norm " << max_norm);
      set_gradients(m, g);
      const std::vector<double> before = elements<T>(m.a.grad, m.b.grad);
      const Tensor norm = nn::clip_grad_norm_(m, max_norm, norm_type);
      CHECK(norm.shape() == Shape{});
      CHECK(norm.device() == d);
      CHECK(norm.dtype() == dtype_of<T>());
      test::require_allclose<T>(norm, {total});
      const double scale = std::min(1.0, max_norm / (total + 1e-6));
      std::vector<double> want = g;
      for (double& x : want) x *= scale;
      if (scale == 1) CHECK(elements<T>(m.a.grad, m.b.grad) == before);  // below max_norm: unchanged, bit for bit
      test::require_allclose(elements<T>(m.a.grad, m.b.grad), want, test::tolerance<T>(), test::tolerance<T>());
    }
  }
}

TEST_CASE("clip_grad_norm_ lets NaN through, mixes dtypes in float64, and refuses bad arguments", "[clip]") {
  const Device d = test::device();
  Params m(float32, d);
  std::vector<double> g = gradients(1);
  g[5] = qnan;  // in "b": every gradient becomes NaN, "a" included (PyTorch without error_if_nonfinite)
  set_gradients(m, g);
  CHECK(std::isnan(nn::clip_grad_norm_(m, 1.0).item<float>()));
  for (double x : elements<float>(m.a.grad, m.b.grad)) CHECK(std::isnan(x));
  g[5] = inf;  // an infinite norm: the coefficient 0 times inf is NaN there, 0 elsewhere, as PyTorch
  set_gradients(m, g);
  CHECK(nn::clip_grad_norm_(m, 1.0).item<float>() == std::numeric_limits<float>::infinity());
  const std::vector<double> clipped = elements<float>(m.a.grad, m.b.grad);
  CHECK(std::isnan(clipped[5]));
  CHECK(clipped[0] == 0.0);

  // float32 and float64 parameters: the total in float64.
  Params mixed(float32, d);
  mixed.b.value = mixed.b.value.astype(float64);
  mixed.b.grad = Tensor();
  mixed.b.track();
  const std::vector<double> g1 = gradients(1);
  mixed.a.grad.copy_from(tensor(std::vector<double>(g1.begin(), g1.begin() + 4)).astype(float32));
  mixed.b.grad.copy_from(tensor(std::vector<double>(g1.begin() + 4, g1.end()), {2, 3}));
  const Tensor total = nn::clip_grad_norm_(mixed, 0.5);
  CHECK(total.dtype() == float64);
  double l2 = 0;
  for (double x : g1) l2 += x * x;
  test::require_allclose<double>(total, {std::sqrt(l2)}, 1e-6, 1e-6);  // "a"'s float32 norm, widened

  // No gradient at all: a float32 zero, as PyTorch's torch.tensor(0.).
  nn::Sequential empty;
  empty.to(d);
  const Tensor zero = nn::clip_grad_norm_(empty, 1.0);
  CHECK(zero.dtype() == float32);
  CHECK(zero.device() == d);
  CHECK(zero.item<float>() == 0.f);

  CHECK_THAT(message_of<Error>([&] { nn::clip_grad_norm_(m, -1.0); }), ContainsSubstring("max_norm must be >= 0, got -1"));
  CHECK_THROWS_AS(nn::clip_grad_norm_(m, qnan), Error);
  CHECK_THAT(message_of<Error>([&] { nn::clip_grad_norm_(m, 1.0, 0.0); }), ContainsSubstring("norm_type must be a p > 0 or infinity"));
  CHECK_THROWS_AS(nn::clip_grad_norm_(m, 1.0, qnan), Error);
}

// --- The whole step ---

TEST_CASE("a whole training step enqueues without one host synchronisation", "[optim][clip][schedule][sync]") {
  // zero_grad, forward through Linear/ReLU, MSELoss, backward, clip, Adam, schedule: on a GPU (an
  // emulated one in the emulated run) any implicit synchronisation throws under SyncDebug::Error;
  // on cpu() the counter says the same.
  const Device d = test::device();
  nn::Sequential model;
  model.add(nn::Linear(3, 16, {true, float32, 1}));
  model.add(nn::ReLU());
  model.add(nn::Linear(16, 1, {true, float32, 2}));
  model.to(d);
  const Tensor X = rand({32, 3}, d, 3), Y = rand({32, 1}, d, 4);
  optim::Adam adam(0.01);
  optim::LinearLR warmup(adam, 0.5, 1.0, 2);
  optim::CosineAnnealingLR cosine(adam, 10);
  optim::SequentialLR schedule(adam, {&warmup, &cosine}, {2});
  nn::MSELoss mse;
  Tensor first_loss, last_loss;
  synchronize(d);
  reset_stats();
  {
    SyncMode error(SyncDebug::Error);
    for (int k = 0; k < 4; ++k) {  // the first step makes Adam's state, the next ones use it
      adam.zero_grad(model);
      const Tensor loss = mse(model(X), Y);
      loss.backward();
      nn::clip_grad_norm_(model, 1.0);
      adam.step(model);
      schedule.step();
      (k == 0 ? first_loss : last_loss) = loss.detach();
    }
  }
  CHECK(stats().host_syncs == 0);
  CHECK(stats().transfers() == 0);
  CHECK(last_loss.item<float>() < first_loss.item<float>());  // and it trains
  CHECK(stats().host_syncs == 2);
}

TEST_CASE("the optimiser lines of DESIGN 1b compile and train", "[contract][optim]") {
  const Device d = test::device();
  auto X = kten::rand({4, 3}, d, 1);
  auto Y = kten::rand({4, 2}, d, 2);
  kten::nn::Sequential mlp;
  mlp.add(kten::nn::Linear(3, 16));
  mlp.add(kten::nn::ReLU());
  mlp.add(kten::nn::Linear(16, 2));
  mlp.to(d);
  kten::optim::Adam adam(1e-3f);                    // Adam(lr, AdamOptions{beta1, beta2, eps, weight_decay})
  kten::optim::AdamW adamw(1e-3f, 1e-2f);           // AdamW(lr, weight_decay)
  kten::optim::SGD sgdm(0.1f, kten::optim::SGDOptions{/*momentum=*/0.9f});  // SGD(lr, wd) stays
  kten::optim::CosineAnnealingLR schedule(adam, /*t_max=*/100);   // schedule.step(); also StepLR
  CHECK(adamw.options().weight_decay == Approx(1e-2).epsilon(1e-7));
  CHECK(sgdm.options().momentum == Approx(0.9).epsilon(1e-7));
  float first = 0;
  for (int k = 0; k < 3; ++k) {
    adam.zero_grad(mlp);
    auto l = kten::nn::MSELoss()(mlp(X), Y);   // a 0-d tensor with history
    l.backward();
    kten::nn::clip_grad_norm_(mlp, 1.0);       // the total norm as a 0-d tensor on the device: no host sync
    adam.step(mlp);                            // a whole training step enqueues without one host sync
    schedule.step();
    if (k == 0) first = l.item<float>();
    else CHECK(l.item<float>() < first);
  }
}

// --- Checkpoints ---

TEST_CASE("a checkpoint restored into fresh objects continues training bit for bit", "[checkpoint][state][schedule]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const Tensor X = rand({8, 3}, d, 5), Y = rand({8, 1}, d, 6);
  for (const Setup& setup : setups()) {
    INFO(setup.name);
    const std::string path = scratch / "run.ckpt";
    nn::Sequential model = test::small_mlp(d);
    auto optimizer = setup.optimizer(false);
    auto schedules = setup.schedules(*optimizer);
    for (int k = 0; k < 4; ++k) train_step(model, *optimizer, *schedules.back(), X, Y);
    reset_stats();
    save_checkpoint(path, model, *optimizer, 4);
    // One device-to-host copy per tensor (4 parameters, their buffers), none on cpu().
    const std::uint64_t tensors = 4 + optimizer->state().tensors.size();
    CHECK(stats().device_to_host == (d.is_gpu() ? tensors : 0));
    for (int k = 0; k < 5; ++k) train_step(model, *optimizer, *schedules.back(), X, Y);

    nn::Sequential restored = test::small_mlp(d);  // other initial values (the seeds are the same: they change below)
    for (const Tensor& p : restored.parameters()) p.copy_from(p.detach() + 1.0);
    auto fresh = setup.optimizer(true);  // other hyperparameters
    reset_stats();
    CHECK(load_checkpoint(path, restored, *fresh, d) == 4);
    CHECK(stats().host_to_device == (d.is_gpu() ? tensors : 0));
    // A model elsewhere moves to d, as with Module::load.
    nn::Sequential elsewhere = test::small_mlp(cpu());
    auto other = setup.optimizer(true);
    CHECK(load_checkpoint(path, elsewhere, *other, d) == 4);
    CHECK(elsewhere.device() == d);
    for (std::size_t i = 0; i < model.parameters().size(); ++i)
      CHECK(elsewhere.parameters()[i].to_vector<float>() == restored.parameters()[i].to_vector<float>());
    auto fresh_schedules = setup.schedules(*fresh);  // a schedule made after the load continues from its position
    for (int k = 0; k < 5; ++k) train_step(restored, *fresh, *fresh_schedules.back(), X, Y);
    CHECK(fresh->lr() == optimizer->lr());
    for (std::size_t i = 0; i < model.parameters().size(); ++i)
      CHECK(restored.parameters()[i].to_vector<float>() == model.parameters()[i].to_vector<float>());
    require_same_state(fresh->state(), optimizer->state());
  }
}

TEST_CASE("a checkpoint is a safetensors file with the model's PyTorch names", "[checkpoint]") {
  const Device d = test::device();
  const test::Scratch scratch;
  nn::Sequential model = test::small_mlp(d);
  optim::SGD sgd(0.1, {0.9});
  optim::StepLR schedule(sgd, 2);
  train_step(model, sgd, schedule, rand({8, 3}, d, 5), rand({8, 1}, d, 6));
  save_checkpoint(scratch / "run.ckpt", model, sgd, 1);
  std::vector<std::string> names;
  for (const auto& [name, t] : io::load_safetensors(scratch / "run.ckpt")) names.push_back(name);
  CHECK(names == std::vector<std::string>{"model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias",
                                          "optimizer.0.bias.momentum_buffer", "optimizer.0.weight.momentum_buffer",
                                          "optimizer.2.bias.momentum_buffer", "optimizer.2.weight.momentum_buffer"});
  const auto metadata = io::load_safetensors_metadata(scratch / "run.ckpt");
  CHECK(metadata.at("format") == "kten checkpoint");
  CHECK(metadata.at("step") == "1");
  CHECK(metadata.at("optimizer") == "SGD");
  CHECK(metadata.at("optimizer.momentum") == "0.9");
  CHECK(metadata.at("optimizer.lr") == "0.1");
  CHECK(metadata.at("optimizer.schedule_step") == "1");
  CHECK(metadata.at("checksum").size() == 16);
  CHECK_THAT(message_of<Error>([&] { save_checkpoint(scratch / "bad.ckpt", model, sgd, -1); }),
             ContainsSubstring("the step must be >= 0, got -1"));
}

TEST_CASE("load_checkpoint refuses a malformed or mismatching file and changes nothing", "[checkpoint][state]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const Tensor X = rand({8, 3}, d, 5), Y = rand({8, 1}, d, 6);
  const std::string good = scratch / "good.ckpt";
  {
    nn::Sequential source = test::small_mlp(d);
    optim::Adam adam(0.02);
    optim::StepLR schedule(adam, 5);
    for (int k = 0; k < 2; ++k) train_step(source, adam, schedule, X, Y);
    save_checkpoint(good, source, adam, 2);
  }
  // The file's parts, to write variants whose checksum is right (the checks behind it).
  const nn::StateDict tensors = io::load_safetensors(good);
  const std::map<std::string, std::string> metadata = io::load_safetensors_metadata(good);
  const auto rewrite = [&](const std::string& name, nn::StateDict t, std::map<std::string, std::string> m) {
    m["checksum"] = detail::checkpoint_checksum(t, m);
    io::save_safetensors(scratch / name, t, m);
    return scratch / name;
  };
  int variants = 0;
  const auto with = [&](const std::string& key, const std::string& value) {
    auto m = metadata;
    m[key] = value;
    return rewrite("variant-" + std::to_string(variants++) + ".ckpt", tensors, m);
  };
  const std::string bytes = test::read_bytes(good);
  const auto written = [&](const std::string& name, const std::string& content) {
    test::write_bytes(scratch / name, content);
    return scratch / name;
  };
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;  // a bit of the last tensor's data
  // The file's order: model.0.weight, model.0.bias, model.2.weight, model.2.bias, then the
  // optimiser's buffers by name, optimizer.0.bias.exp_avg first.
  nn::StateDict reshaped = tensors, retyped = tensors, renamed = tensors, misplaced = tensors, partial = tensors;
  reshaped[0].second = reshaped[0].second.reshape({2, 6});  // 4x3 in the model
  retyped[1].second = retyped[1].second.astype(float64);
  renamed[4].first = "optimizer.0.bias.exp_avg_sq_";
  misplaced[4].first = "optimizer.5.bias.exp_avg";
  partial.erase(partial.begin() + 2, partial.begin() + 4);

  const std::vector<std::tuple<const char*, std::string, const char*>> cases = {
      {"a missing file", scratch / "none.ckpt", "cannot open the file"},
      {"a truncated file", written("short.ckpt", bytes.substr(0, bytes.size() - 5)), "the file is truncated"},
      {"a flipped bit", written("flipped.ckpt", flipped), "checksum mismatch: the file is corrupted"},
      {"a plain safetensors file", [&] { io::save_safetensors(scratch / "plain.ckpt", tensors); return scratch / "plain.ckpt"; }(),
       "the file has no 'format' metadata entry: not a checkpoint of save_checkpoint()"},
      {"another format", with("format", "other"), "the file's format is \"other\", not \"kten checkpoint\""},
      {"a newer version", with("version", "2"), "checkpoint version \"2\"; this kten reads version 1"},
      {"an edited step", [&] { auto m = metadata; m["step"] = "3"; io::save_safetensors(scratch / "e.ckpt", tensors, m); return scratch / "e.ckpt"; }(),
       "checksum mismatch"},
      {"a step that is no number", with("step", "2x"), "the metadata entry 'step' is \"2x\", not a number"},
      {"a negative step", with("step", "-1"), "the step is -1, below 0"},
      {"an unknown entry", with("epoch", "3"), "the metadata entry 'epoch' is unknown to this kten"},
      {"an infinite learning rate", with("optimizer.lr", "inf"), "the metadata entry 'optimizer.lr' is inf, not finite"},
      {"another optimiser kind", with("optimizer", "SGD"), "the state is of an optimiser of kind 'SGD', not Adam"},
      {"a tensor of neither", [&] { auto t = tensors; t.emplace_back("extra", zeros({1})); return rewrite("x.ckpt", t, metadata); }(),
       "the tensor 'extra' belongs neither to the model nor to the optimiser"},
      {"a model weight of another shape", rewrite("r.ckpt", reshaped, metadata),
       "'0.weight' has shape 2x6 in the state dict but 4x3 in the model"},
      {"a model bias of another dtype", rewrite("t.ckpt", retyped, metadata),
       "the model's '0.bias' is float64 in the file but float32 in the model"},
      {"an optimiser buffer of another name", rewrite("n.ckpt", renamed, metadata),
       "the state's tensor '0.bias.exp_avg_sq_' is no buffer of Adam"},
      {"an optimiser buffer of another parameter", rewrite("p.ckpt", misplaced, metadata),
       "the state's '5.bias.exp_avg' names no parameter of the model (Sequential)"},
      {"a file without some of the model's parameters", rewrite("m.ckpt", partial, metadata),
       "the state dict does not fit the model (1 fault): missing"},
  };
  nn::Sequential model = test::small_mlp(d);
  optim::Adam adam(0.01);
  optim::StepLR schedule(adam, 2);
  train_step(model, adam, schedule, X, Y);
  const optim::OptimizerState before = snapshot(adam.state());
  std::vector<std::vector<float>> parameters;
  for (const Tensor& p : model.parameters()) parameters.push_back(p.to_vector<float>());
  for (const auto& [name, file, message] : cases) {
    INFO(name);
    const std::string path = file;  // a variable, not a binding: the lambda captures it (clang 14)
    CHECK_THAT(message_of<FormatError>([&] { load_checkpoint(path, model, adam, d); }), ContainsSubstring(message));
    require_same_state(adam.state(), before);
    for (std::size_t i = 0; i < parameters.size(); ++i) CHECK(model.parameters()[i].to_vector<float>() == parameters[i]);
    CHECK(model.device() == d);
  }
  // The good file loads into the same objects.
  CHECK(load_checkpoint(good, model, adam, d) == 2);
}
