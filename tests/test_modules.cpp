// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Composition (DESIGN.md 1c): tensor handles that share their implementation, and a user's module
// built from today's layers with its own parameter and buffers, which trains, casts, moves,
// checkpoints and reloads with the handles its forward() holds seeing every change.
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

std::vector<std::string> names_of(const nn::StateDict& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.first);
  return out;
}

std::vector<std::string> names_of(const std::vector<nn::NamedParameter>& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.name);
  return out;
}

// Every value of a tensor of any float or int64 dtype, as doubles.
std::vector<double> values(const Tensor& t) {
  if (t.dtype() == float32) return test::host_doubles<float>(t);
  if (t.dtype() == float64) return test::host_doubles<double>(t);
  return test::host_doubles<std::int64_t>(t);
}

std::vector<std::vector<double>> values(const nn::StateDict& entries) {
  std::vector<std::vector<double>> out;
  for (const auto& entry : entries) out.push_back(values(entry.second));
  return out;
}

// A user's module, as DESIGN.md 1c and CONTRIBUTING.md write one: children registered from
// today's layers (the body a Sequential), a parameter of its own that forward() reads through the
// handle it holds, a float buffer (a running mean of the output, updated in training mode) and an
// int64 buffer (the count of training calls), both updated in forward().
class Net : public nn::Module {
 public:
  explicit Net(std::uint64_t seed) {
    body_ = register_module("body", nn::Sequential());
    body_->add(nn::Linear(3, 8, {true, float32, seed}));
    body_->add(nn::GELU());
    body_->add(nn::LayerNorm(8));
    head_ = register_module("head", nn::Linear(8, 2, {true, float32, seed + 1}));
    gain_ = register_parameter("gain", full({1}, 0.5));
    running_ = register_buffer("running_mean", zeros({2}));
    calls_ = register_buffer("calls", zeros({}, cpu(), int64));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor y = (*head_)((*body_)(x)) * gain_;
    if (is_training()) {
      NoGradGuard no_grad;  // state, not a step of the tape
      running_.copy_from(running_ * 0.9 + mean(y, 0).astype(running_.dtype()) * 0.1);
      calls_.copy_from((calls_.astype(float64) + 1.0).astype(int64));  // integers have no arithmetic: via float64
    }
    return y;
  }
  std::string name() const override { return "Net"; }

  const Tensor& gain() const { return gain_; }
  const Tensor& running() const { return running_; }
  const Tensor& calls() const { return calls_; }
  nn::Linear& head() { return *head_; }

 private:
  std::shared_ptr<nn::Sequential> body_;
  std::shared_ptr<nn::Linear> head_;
  Tensor gain_, running_, calls_;
};

const std::vector<std::string> kStateNames = {"gain",          "running_mean", "calls",       "body.0.weight",
                                              "body.0.bias",   "body.2.weight", "body.2.bias", "head.weight",
                                              "head.bias"};

// A fixed regression problem on `d`.
struct Problem {
  Tensor x, y;
  Problem(const Device& d, DType dtype = float32)
      : x(rand({16, 3}, d, 21).astype(dtype)), y(rand({16, 2}, d, 22).astype(dtype)) {}
};

double loss_of(Net& net, const Problem& p) { return values(nn::MSELoss()(net(p.x), p.y))[0]; }

}  // namespace

TEST_CASE("copies of a tensor share its implementation; views and detach() do not", "[modules][tensor]") {
  const Device d = test::device();
  Tensor a = ones({2, 3}, d);
  Tensor b = a;
  b.requires_grad_();  // as libtorch: the flag is the tensor's, so every copy sees it
  CHECK(a.requires_grad());
  CHECK(a.impl() == b.impl());
  const Tensor view = a.transpose(0, 1), detached = a.detach();
  CHECK(view.impl() != a.impl());
  CHECK_FALSE(detached.requires_grad());

  (a * 2.0).sum().backward();
  REQUIRE(b.grad().defined());
  // set_data() through one handle: every copy sees the new data, dtype and device; requires_grad
  // stays, the gradient follows; views and detached handles keep the old data.
  const Tensor replacement = full({2, 3}, 3.0, cpu(), float64);
  b.set_data(replacement);
  CHECK(a.dtype() == float64);
  CHECK(a.device() == cpu());
  CHECK(a.requires_grad());
  CHECK(a.shares_storage_with(replacement));
  CHECK(values(a) == std::vector<double>(6, 3.0));
  CHECK(a.grad().dtype() == float64);
  CHECK(a.grad().device() == cpu());
  CHECK(values(a.grad()) == std::vector<double>(6, 2.0));
  CHECK(view.shape() == Shape{3, 2});
  CHECK(view.dtype() == float32);
  CHECK(view.device() == d);
  CHECK(values(view) == std::vector<double>(6, 1.0));
  CHECK(detached.dtype() == float32);

  b.set_data(a.to(d));  // and back to the device under test
  CHECK(a.device() == d);
  CHECK(a.grad().device() == d);
  a.set_data(zeros({4}, d, float64));  // another shape: the gradient no longer fits and goes
  CHECK(b.shape() == Shape{4});
  CHECK_FALSE(b.grad().defined());
  CHECK_THROWS_AS(b.set_data(zeros({4}, d, int64)), DTypeError);  // requires grad: float only
  CHECK(b.dtype() == float64);
  CHECK_THROWS_AS(Tensor().set_data(a), Error);
  CHECK_THROWS_AS(a.set_data(Tensor()), Error);
  // An undefined tensor's accessors still answer.
  const Tensor none;
  CHECK(none.shape().empty());
  CHECK(none.strides().empty());
  CHECK(none.numel() == 0);
  CHECK_FALSE(none.requires_grad());
  CHECK_THROWS_AS(none.device(), Error);
}

TEST_CASE("a module's own parameters, buffers and children come in PyTorch's order and names", "[modules]") {
  Net net(1);
  CHECK(names_of(net.state_dict()) == kStateNames);
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"gain", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "head.weight",
                                 "head.bias"});
  CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"running_mean", "calls"});
  CHECK(net.parameters().size() == 7);
  CHECK(net.buffers().size() == 2);
  const auto children = net.named_children();
  REQUIRE(children.size() == 2);
  CHECK(children[0].first == "body");
  CHECK(children[1].first == "head");
  CHECK(net.children()[1].get() == &net.head());
  // The handles the module holds are the registered ones.
  CHECK(net.named_parameters()[0].slot->value.impl() == net.gain().impl());
  CHECK(net.named_buffers()[1].second.impl() == net.calls().impl());
  CHECK(net.gain().requires_grad());
  CHECK(net.gain().is_leaf());
  CHECK_FALSE(net.calls().requires_grad());
  // train() and eval() reach every child.
  net.eval();
  CHECK_FALSE(net.head().is_training());
  net.train();
  CHECK(net.head().is_training());
}

TEST_CASE("a user's module trains, casts, moves, checkpoints and reloads; its handles see every change",
          "[modules]") {
  const Device d = test::device();
  test::Scratch scratch;
  Net net(1);
  net.to(d);
  const Tensor gain = net.gain();  // a copy of the handle, as a caller might keep
  CHECK(gain.device() == d);
  CHECK(net.calls().device() == d);
  CHECK(net.head().weight().device() == d);

  // Training: the loss goes down, Adam steps the parameters (the handle forward() holds sees it),
  // the buffers change only through forward().
  const Problem p(d);
  optim::Adam adam(0.05);
  const double before = loss_of(net, p);  // one training-mode call: calls = 1
  for (int step = 0; step < 20; ++step) {
    adam.zero_grad(net);
    nn::MSELoss()(net(p.x), p.y).backward();
    const auto buffers = values(net.named_buffers());
    adam.step(net);
    nn::clip_grad_norm_(net, 0.5);
    CHECK(values(net.named_buffers()) == buffers);  // neither the step nor clipping touches a buffer
  }
  const double after = loss_of(net, p);
  CHECK(after < before);
  CHECK(values(net.calls()) == std::vector<double>{22});
  CHECK(values(gain) != std::vector<double>{0.5});
  CHECK(values(gain) == values(net.state_dict()[0].second));
  CHECK(net.calls().dtype() == int64);

  // A checkpoint reloads into a fresh model and optimiser, buffers included.
  save_checkpoint(scratch / "run.ckpt", net, adam, 20);
  Net fresh(2);
  optim::Adam fresh_adam(0.05);
  CHECK(load_checkpoint(scratch / "run.ckpt", fresh, fresh_adam, d) == 20);
  CHECK(values(fresh.state_dict()) == values(net.state_dict()));
  CHECK(values(fresh.calls()) == std::vector<double>{22});
  CHECK(fresh.gain().device() == d);
  const auto state = adam.state(), fresh_state = fresh_adam.state();
  CHECK(fresh_state.scalars == state.scalars);
  REQUIRE(fresh_state.tensors.size() == state.tensors.size());
  for (std::size_t i = 0; i < state.tensors.size(); ++i) {
    CHECK(fresh_state.tensors[i].first == state.tensors[i].first);
    CHECK(values(fresh_state.tensors[i].second) == values(state.tensors[i].second));
  }

  // load_state_dict: in place, buffers included, into handles taken before.
  Net other(3);
  other.to(d);
  const Tensor other_gain = other.gain(), other_calls = other.calls();
  other.load_state_dict(net.state_dict());
  CHECK(values(other_gain) == values(net.gain()));
  CHECK(values(other_calls) == std::vector<double>{22});

  // to(float64): every float parameter, gradient and buffer, in place; the int64 buffer stays.
  net.to(float64);
  CHECK(gain.dtype() == float64);
  CHECK(gain.grad().dtype() == float64);
  CHECK(net.running().dtype() == float64);
  CHECK(net.calls().dtype() == int64);
  CHECK(net.head().weight().dtype() == float64);
  const Problem p64(d, float64);
  const Tensor out = net(p64.x);
  CHECK(out.dtype() == float64);
  CHECK_THROWS_AS(net(p.x), DTypeError);  // float32 inputs no longer fit
  CHECK_THROWS_AS(net.to(int64), DTypeError);

  // Moves: cpu() and back, the handles following.
  net.to(cpu());
  CHECK(gain.device() == cpu());
  CHECK(net.calls().device() == cpu());
  CHECK(net.head().bias().device() == cpu());
  net.to(d);
  CHECK(gain.device() == d);
  CHECK(gain.grad().device() == d);
  CHECK(net.running().device() == d);
  if (num_gpus() > 0) {  // and to the other device (an emulated GPU in a host-only build's cpu run)
    net.to(test::other_device());
    CHECK(gain.device() == test::other_device());
    CHECK(net.calls().device() == test::other_device());
    net.to(d);
  }

  // save() and load(): the parameters and buffers, into a fresh model of the same dtype, in place.
  net.save(scratch / "net.kten");
  Net loaded(4);
  loaded.to(float64);
  const Tensor loaded_gain = loaded.gain(), loaded_running = loaded.running();
  loaded.load(scratch / "net.kten", d);
  CHECK(values(loaded.state_dict()) == values(net.state_dict()));
  CHECK(values(loaded_gain) == values(net.gain()));
  CHECK(values(loaded_running) == values(net.running()));
  CHECK(loaded_gain.device() == d);
  CHECK(values(loaded.calls()) == values(net.calls()));
  test::require_allclose<double>(loaded(p64.x), values(net(p64.x)));
  // A float32 model refuses the float64 file, unchanged.
  Net float32_model(5);
  const auto unchanged = values(float32_model.state_dict());
  CHECK_THROWS_AS(float32_model.load(scratch / "net.kten", d), FormatError);
  CHECK(values(float32_model.state_dict()) == unchanged);
}

TEST_CASE("optimisers and clip_grad_norm_ step parameters only: float and int64 buffers are never touched",
          "[modules][optim]") {
  const Device d = test::device();
  struct Stateful : nn::Module {
    Tensor w, scale, count;
    Stateful() {
      w = register_parameter("w", tensor({1.0f, -2.0f, 3.0f}));
      scale = register_buffer("scale", tensor({2.0f, 2.0f, 2.0f}));
      count = register_buffer("count", tensor(std::vector<std::int64_t>{7}));
    }
    Tensor forward(const Tensor& x) override { return x * w * scale; }
    std::string name() const override { return "Stateful"; }
  };
  Stateful m;
  m.to(d);
  const Tensor x = ones({3}, d);
  optim::Adam adam(0.1);
  optim::SGD sgd(0.1, optim::SGDOptions{0.9});
  for (optim::Optimizer* o : {static_cast<optim::Optimizer*>(&adam), static_cast<optim::Optimizer*>(&sgd)}) {
    CAPTURE(o->kind());
    const auto w0 = values(m.w);
    o->zero_grad(m);
    m(x).sum().backward();
    CHECK(nn::clip_grad_norm_(m, 0.1).item<double>() > 0.1);
    o->step(m);
    CHECK(values(m.w) != w0);
    CHECK(values(m.scale) == std::vector<double>{2, 2, 2});
    CHECK(values(m.count) == std::vector<double>{7});
    CHECK(m.count.dtype() == int64);
  }
  // A parameter registered without requires_grad is frozen: no gradient, no step.
  struct Frozen : nn::Module {
    Tensor w;
    Frozen() { w = register_parameter("w", tensor({1.0f, 2.0f}), /*requires_grad=*/false); }
    Tensor forward(const Tensor& x) override { return x * w; }
    std::string name() const override { return "Frozen"; }
  };
  Frozen f;
  CHECK_FALSE(f.w.requires_grad());
  optim::SGD decay(0.1, 0.5);  // weight decay would change it, were it stepped
  decay.step(f);
  CHECK(values(f.w) == std::vector<double>{1, 2});
}

TEST_CASE("an empty, dotted or repeated name is a kten::Error naming the module and the name", "[modules]") {
  struct Registering : nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
    std::string name() const override { return "Registering"; }
  };
  Registering m;
  m.register_parameter("w", ones({2}));
  m.register_buffer("b", zeros({2}));
  m.register_module("fc", nn::Linear(2, 2));
  const auto message = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    FAIL("expected a kten::Error");
    return std::string();
  };
  CHECK_THAT(message([&] { m.register_parameter("", ones({1})); }), ContainsSubstring("Registering") &&
                                                                       ContainsSubstring("name is empty"));
  CHECK_THAT(message([&] { m.register_buffer("a.b", ones({1})); }), ContainsSubstring("Registering") &&
                                                                       ContainsSubstring("'a.b' contains '.'"));
  CHECK_THAT(message([&] { m.register_module("x.y", nn::ReLU()); }), ContainsSubstring("'x.y'"));
  CHECK_THAT(message([&] { m.register_parameter("w", ones({1})); }),
             ContainsSubstring("'w' is already registered as a parameter of this Registering"));
  CHECK_THAT(message([&] { m.register_module("b", nn::ReLU()); }),
             ContainsSubstring("'b' is already registered as a buffer"));
  CHECK_THAT(message([&] { m.register_buffer("fc", ones({1})); }),
             ContainsSubstring("'fc' is already registered as a module"));
  CHECK_THAT(message([&] { m.register_parameter("u", Tensor()); }), ContainsSubstring("undefined"));
  CHECK_THROWS_AS(m.register_parameter("labels", zeros({2}, cpu(), int64)), DTypeError);
  CHECK_THROWS_AS(m.register_module("null", std::shared_ptr<nn::Linear>()), Error);
  // Nothing was registered by the refused calls.
  CHECK(names_of(m.state_dict()) == std::vector<std::string>{"w", "b", "fc.weight", "fc.bias"});
}

TEST_CASE("a module that overrides to(Device) keeps to(DType) with using Module::to", "[modules]") {
  struct Moving : nn::Module {
    int moves = 0;
    Tensor w;
    Moving() { w = register_parameter("w", ones({2})); }
    void to(const Device& device) override {
      ++moves;
      Module::to(device);
    }
    using Module::to;
    Tensor forward(const Tensor& x) override { return x * w; }
    std::string name() const override { return "Moving"; }
  };
  Moving m;
  m.to(test::device());
  m.to(float64);
  CHECK(m.moves == 1);
  CHECK(m.w.dtype() == float64);
  CHECK(m.w.device() == test::device());
  // A parent's to() reaches the override.
  nn::Sequential s;
  Moving& inner = s.add(Moving());
  s.to(cpu());
  CHECK(inner.moves == 2);  // add() moved it to the container's device, then to()
}

TEST_CASE("a model with buffers and its parameter file agree on every entry", "[modules][io]") {
  const Device d = test::device();
  test::Scratch scratch;
  // A model without buffers writes the file it wrote before buffers existed: a Sequential's
  // parameters only, which a model with buffers refuses (and the other way round), unchanged.
  nn::Sequential plain = test::small_mlp(d);
  plain.save(scratch / "plain.kten");
  Net net(1);
  const auto before = values(net.state_dict());
  CHECK_THROWS_WITH(net.load(scratch / "plain.kten", d), ContainsSubstring("the model has 9"));
  CHECK(values(net.state_dict()) == before);
  net.save(scratch / "net.kten");
  CHECK_THROWS_AS(plain.load(scratch / "net.kten", d), FormatError);
  // A buffer of another shape in a state dict is named, and nothing changes.
  nn::StateDict dict = net.state_dict();
  dict[1].second = zeros({3});
  CHECK_THROWS_WITH(net.load_state_dict(dict), ContainsSubstring("'running_mean' has shape 3"));
  CHECK(values(net.state_dict()) == before);
}
