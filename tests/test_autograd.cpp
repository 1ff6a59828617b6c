// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Autograd: what is recorded and when, gradient accumulation, broadcasting undone, views reaching
// their base, NoGradGuard, detach, the errors, modules that keep no activations. On cpu() and the
// emulated GPU (test::device()). Every registered op's gradient against central finite differences
// and against a reference is the op harness' (tests/ops: label ops, and torch with PyTorch).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/storage.hpp"  // live_block_bytes
#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;


TEST_CASE("the design's autograd walk-through: requires_grad_, backward, grad, detach, NoGradGuard", "[autograd]") {
  const Device d = test::device();
  auto X = rand({4, 3}, d, 1, float64);
  auto w = randn({3, 1}, d, 7, float64).requires_grad_();
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
  CHECK_FALSE(w.grad().defined());  // undefined before any backward
  const Tensor r = matmul(X, w) - 1.0;
  auto loss = mean(r * r);
  CHECK(loss.requires_grad());
  CHECK_FALSE(loss.is_leaf());
  CHECK(std::string(loss.grad_fn()) == "kten::mean");
  loss.backward();
  // d/dw mean((Xw - 1)^2) = 2/n X^T (Xw - 1)
  const Tensor want = matmul(X.transpose(), r.detach()) * (2.0 / 4.0);
  REQUIRE(w.grad().defined());
  CHECK(w.grad().device() == d);
  CHECK(w.grad().shape() == Shape{3, 1});
  test::require_allclose<double>(w.grad(), want.to_vector<double>());

  const Tensor plain = w.detach();
  CHECK_FALSE(plain.requires_grad());
  CHECK(plain.shares_storage_with(w));
  {
    NoGradGuard no_grad;
    CHECK_FALSE(is_grad_enabled());
    const Tensor y = matmul(X, w);
    CHECK_FALSE(y.requires_grad());  // nothing recorded
    CHECK(y.grad_fn() == nullptr);
    {
      NoGradGuard nested;
    }
    CHECK_FALSE(is_grad_enabled());  // nesting restores the outer state
  }
  CHECK(is_grad_enabled());
}

TEST_CASE("nothing is recorded when no input requires grad", "[autograd]") {
  const Device d = test::device();
  const Tensor a = rand({8}, d, 1), b = rand({8}, d, 2);
  const Tensor c = exp(a + b) * 2.0;
  CHECK_FALSE(c.requires_grad());
  CHECK(c.grad_fn() == nullptr);
  CHECK(c.is_leaf());
}

TEST_CASE("gradients accumulate until reset, and broadcasting is undone", "[autograd]") {
  const Device d = test::device();
  auto a = ones({3, 1}, d, float64).requires_grad_();
  auto b = full({4}, 2.0, d, float64).requires_grad_();
  sum(a * b).backward();  // (3, 4) result
  CHECK(a.grad().shape() == Shape{3, 1});
  CHECK(b.grad().shape() == Shape{4});
  CHECK(a.grad().to_vector<double>() == std::vector<double>{8, 8, 8});  // sum over b's 4 values of 2
  CHECK(b.grad().to_vector<double>() == std::vector<double>{3, 3, 3, 3});
  sum(a * b).backward();  // a second graph: accumulates
  CHECK(a.grad().to_vector<double>() == std::vector<double>{16, 16, 16});
  a.set_grad(Tensor());
  CHECK_FALSE(a.grad().defined());
  // The same tensor used twice: both paths add up.
  auto x = full({2}, 3.0, d, float64).requires_grad_();
  sum(x * x + x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{7, 7});
}

TEST_CASE("a view's gradient reaches its base", "[autograd]") {
  const Device d = test::device();
  auto base = arange(0.0, 12.0, 1.0, d, float64).reshape({3, 4}).detach().requires_grad_();
  const Tensor loss = sum(base.narrow(1, 1, 2) * 2.0) + sum(base.select(0, 2)) + sum(base.transpose(0, 1).select(0, 0));
  loss.backward();
  CHECK(base.grad().to_vector<double>() ==
        std::vector<double>{1, 2, 2, 0,    //
                            1, 2, 2, 0,    //
                            2, 3, 3, 1});  // narrow: x2 in columns 1-2; select(0, 2): row 2; the transposed select: column 0
  auto v = ones({3}, d, float64).requires_grad_();
  sum(v.unsqueeze(0).expand({4, 3}) * arange(0.0, 12.0, 1.0, d, float64).reshape({4, 3})).backward();
  CHECK(v.grad().to_vector<double>() == std::vector<double>{18, 22, 26});
}

TEST_CASE("backward's errors say what went wrong and what to do", "[autograd]") {
  const Device d = test::device();
  const Tensor plain = ones({2}, d);
  CHECK_THROWS_WITH(sum(plain).backward(), ContainsSubstring("does not require grad") && ContainsSubstring("requires_grad_()"));
  auto w = ones({2}, d).requires_grad_();
  CHECK_THROWS_WITH((w * 2.0).backward(), ContainsSubstring("one-element") && ContainsSubstring("backward(gradient)"));
  CHECK_THROWS_AS((w * 2.0).backward(ones({3}, d)), ShapeError);
  const Tensor loss = sum(exp(w));
  loss.backward();
  CHECK_THROWS_WITH(loss.backward(), ContainsSubstring("second time") && ContainsSubstring("retain_graph"));
  const Tensor kept = sum(exp(w));
  kept.backward(Tensor(ones({}, d)), /*retain_graph=*/true);
  kept.backward();  // allowed once more
  CHECK_THROWS_WITH((w * 2.0).requires_grad_(false), ContainsSubstring("detach()"));
  // An in-place copy autograd would have to go back through is refused, not silently cut.
  CHECK_THROWS_WITH(ones({2}, d).copy_from(w * 2.0), ContainsSubstring("not recorded by autograd"));
  {
    NoGradGuard no_grad;
    w.copy_from(zeros({2}, d));  // updating a parameter without recording is fine
  }
}

TEST_CASE("a NoGradGuard keeps a module from recording", "[autograd]") {
  const Device d = test::device();
  auto net = test::small_mlp(d);
  const Tensor X = rand({5, 3}, d, 3);
  {
    NoGradGuard no_grad;
    const Tensor y = net(X);
    CHECK_FALSE(y.requires_grad());
  }
  const Tensor y = net(X);
  CHECK(y.requires_grad());
  CHECK(std::string(y.grad_fn()) == "kten::linear");
  CHECK(net.parameters()[0].requires_grad());
}

TEST_CASE("a module keeps no activations: a call's input and output are freed when the caller drops them",
          "[autograd][nn]") {
  const Device d = test::device();
  auto net = test::small_mlp(d);
  // Recorded (grad mode on, the parameters require grad); the input itself does not require grad.
  Tensor x = rand({1 << 16, 3}, d, 6);
  const std::weak_ptr<detail::Storage> x_storage = x.storage();
  std::weak_ptr<detail::TensorImpl> y_impl;
  std::weak_ptr<detail::Storage> y_storage;
  {
    const Tensor y = net(x);
    CHECK(y.requires_grad());
    y_impl = y.impl();
    y_storage = y.storage();
  }
  x = Tensor();
  // The tape hung from y only: with y and x gone, nothing (neither the module nor its children)
  // holds either one's memory.
  CHECK(y_impl.expired());
  CHECK(y_storage.expired());
  CHECK(x_storage.expired());
}

TEST_CASE("after training steps a 20-layer model's device memory is its parameters, gradients and optimiser state",
          "[autograd][nn]") {
  const Device d = test::device();
  const auto model = [&] {
    nn::Sequential m;
    for (std::uint64_t i = 0; i < 20; ++i) {
      m.add(nn::Linear(64, 64, {true, float32, 30 + i}));
      m.add(nn::ReLU());
    }
    m.to(d);
    return m;
  };
  nn::MSELoss mse;
  const auto train = [&](nn::Sequential& m, optim::Adam& adam) {
    for (std::uint64_t step = 0; step < 2; ++step) {
      adam.zero_grad(m);
      mse(m(rand({128, 64}, d, step)), zeros({128, 64}, d)).backward();
      adam.step(m);
    }
  };
  {  // whatever the first steps on this device make once (and keep) is made here, not counted below
    auto warm = model();
    optim::Adam adam(1e-3);
    train(warm, adam);
  }
  const std::size_t before = detail::live_block_bytes();
  auto net = model();
  optim::Adam adam(1e-3);
  train(net, adam);
  // The blocks still held, each counted once: the layers' activations and the tape's saved tensors
  // are gone with the loss, so nothing else may remain.
  std::set<const detail::Storage*> held;
  std::size_t expected = 0;
  const auto count = [&](const Tensor& t) {
    REQUIRE(t.defined());
    if (held.insert(t.storage().get()).second) expected += t.storage()->cache_block;
  };
  const auto parameters = net.named_parameters();
  for (const auto& p : parameters) {
    count(p.slot->value);
    count(p.slot->grad);
  }
  const auto state = adam.state();
  for (const auto& [name, t] : state.tensors) count(t);
  CHECK(held.size() == 40 * 4);  // weight and bias: value, gradient, exp_avg, exp_avg_sq
  CHECK(detail::live_block_bytes() - before == expected);
}

TEST_CASE("loss.backward() and output.backward(d(loss)/d(output)) give the same gradients", "[autograd][nn]") {
  const Device d = test::device();
  const Tensor X = rand({6, 3}, d, 4), Y = rand({6, 1}, d, 5);
  nn::MSELoss mse;
  auto a = test::small_mlp(d), b = test::small_mlp(d);
  a.zero_grad();
  Tensor xa = X.detach(), xb = X.detach();
  xa.requires_grad_();
  xb.requires_grad_();
  mse(a(xa), Y).backward();
  b.zero_grad();
  const Tensor prediction = b(xb);
  prediction.backward(mse.backward(prediction, Y));
  CHECK(xb.grad().shape() == X.shape());
  test::require_allclose<float>(xb.grad(), test::host_doubles<float>(xa.grad()));
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].name);
    // Parameter::grad is value.grad(): one storage.
    CHECK(pa[i].slot->grad.shares_storage_with(pa[i].slot->value.grad()));
    test::require_allclose<float>(pb[i].slot->grad, test::host_doubles<float>(pa[i].slot->grad));
  }
}

TEST_CASE("int64 and boolean tensors have no gradient", "[autograd][dtypes]") {
  const Device d = test::device();
  auto labels = tensor(std::vector<std::int64_t>{0, 2, 1}, d);
  CHECK_THROWS_AS(labels.requires_grad_(), DTypeError);
  auto w = rand({3}, d, 1).requires_grad_();
  CHECK_FALSE(gt(w, 0.5).requires_grad());     // comparisons are not differentiable
  CHECK_FALSE(argmax(w, 0).requires_grad());   // nor is argmax
  CHECK_FALSE(w.astype(int64).requires_grad());
  CHECK(w.astype(float64).requires_grad());
}

TEST_CASE("backward across devices returns the gradient to the leaf's device", "[autograd][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  auto w = ones({3}, d, float64).requires_grad_();
  sum(w.to(other) * 2.0).backward();
  CHECK(w.grad().device() == d);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 2, 2});
}
