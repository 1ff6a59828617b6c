// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The layers beyond Linear (activations, LayerNorm, Dropout), training and evaluation modes,
// Linear's (out, in) weight, and the losses: values against float64 host references, gradients
// against finite differences, errors. On cpu() and the emulated GPU (test::device()); the label
// torch checks the same layers and losses against PyTorch.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

using V = std::vector<Tensor>;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// `layer` on the inputs' device with its parameters replaced by inputs 1, 2, ... (in
// named_parameters() order), so that check_gradients' leaves receive their gradients.
template <class Layer>
Tensor call_with(Layer layer, const V& x) {
  layer.to(x[0].device());
  const auto params = layer.named_parameters();
  REQUIRE(params.size() + 1 == x.size());
  for (std::size_t i = 0; i < params.size(); ++i) params[i].slot->value = x[i + 1];
  return layer(x[0]);
}

// Host values as float or double, for require_allclose<T>.
template <class T>
void check_values(const Tensor& t, const std::vector<double>& want) {
  test::require_allclose<T>(t, want);
}

void check_values(const Tensor& t, const std::vector<double>& want) {
  if (t.dtype() == float32) check_values<float>(t, want);
  else check_values<double>(t, want);
}

std::vector<double> map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double v : x) out.push_back(f(v));
  return out;
}

struct ActivationCase {
  std::string name;
  std::shared_ptr<nn::Module> layer;
  std::function<double(double)> reference;
};

double softplus_reference(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

std::vector<ActivationCase> activation_cases() {
  return {
      {"ReLU", std::make_shared<nn::ReLU>(), [](double x) { return x > 0 ? x : 0.0; }},
      {"Tanh", std::make_shared<nn::Tanh>(), [](double x) { return std::tanh(x); }},
      {"Sigmoid", std::make_shared<nn::Sigmoid>(), [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"GELU", std::make_shared<nn::GELU>(), [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"SiLU", std::make_shared<nn::SiLU>(), [](double x) { return x / (1 + std::exp(-x)); }},
      {"Softplus", std::make_shared<nn::Softplus>(), [](double x) { return softplus_reference(x, 1, 20); }},
      {"Softplus", std::make_shared<nn::Softplus>(2.0, 1.0), [](double x) { return softplus_reference(x, 2, 1); }},
  };
}

// The mask of Dropout(p, seed)'s call-th masked call over n elements, computed on the host with
// kten::philox4x32 from the stream the layer documents: element i is kept when word 0 of the block
// for counter {i, 0, 2, 0} (64-bit i over the first two words) and key seed + call * 0x9E3779B97F4A7C15
// gives (word >> 8) * 2^-24 >= p.
std::vector<bool> expected_keep(double p, std::uint64_t seed, std::uint64_t call, std::int64_t n) {
  const std::uint64_t key = seed + call * 0x9E3779B97F4A7C15ull;
  const std::uint32_t k[2] = {static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)};
  std::vector<bool> keep;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    const std::uint32_t counter[4] = {static_cast<std::uint32_t>(u), static_cast<std::uint32_t>(u >> 32), 2, 0};
    std::uint32_t word[4];
    philox4x32(counter, k, word);
    keep.push_back(static_cast<double>(word[0] >> 8) * 0x1.0p-24 >= p);
  }
  return keep;
}

// x with the dropped elements zeroed and the kept ones scaled by 1 / (1 - p).
std::vector<double> masked(const std::vector<double>& x, const std::vector<bool>& keep, double p) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = keep[i] ? x[i] / (1 - p) : 0.0;
  return out;
}

}  // namespace

// --- activations -------------------------------------------------------------------------------

TEST_CASE("the activation layers apply their function elementwise on the device, in both float dtypes", "[layers]") {
  const Device d = test::device();
  const std::vector<double> x{-30, -3.5, -1, -0.25, 0, 0.25, 0.5, 1, 3.5, 19, 21, 30};
  for (const auto& c : activation_cases()) {
    CAPTURE(c.name);
    CHECK(c.layer->name() == c.name);
    CHECK(c.layer->parameters().empty());
    c.layer->to(d);
    for (DType dtype : {float32, float64}) {
      CAPTURE(dtype);
      const Tensor in = tensor(x, {3, 4}, d).astype(dtype);
      const Tensor out = (*c.layer)(in);
      CHECK(out.device() == d);
      CHECK(out.dtype() == dtype);
      CHECK(out.shape() == Shape{3, 4});
      check_values(out, map(test::host_doubles<double>(in.astype(float64)), c.reference));
      // A strided input (a transposed view) gives the transposed result.
      check_values((*c.layer)(in.transpose()).contiguous(),
                   map(test::host_doubles<double>(in.transpose().contiguous().astype(float64)), c.reference));
      CHECK(std::isnan(test::host_doubles<double>((*c.layer)(tensor(std::vector<double>{kNaN}, d).astype(dtype)).astype(float64))[0]));
    }
  }
}

TEST_CASE("the activation layers' gradients match finite differences", "[layers][grad]") {
  for (const auto& c : activation_cases()) {
    const std::shared_ptr<nn::Module> layer = c.layer;
    test::check_gradients(c.name, [layer](const V& x) {
      layer->to(x[0].device());
      return (*layer)(x[0]);
    }, {randn({3, 4}, cpu(), 5, float64) * 2.0});
  }
}

TEST_CASE("an Activation made from any differentiable function is a layer", "[layers]") {
  const Device d = test::device();
  nn::Activation mish("Mish", [](const Tensor& x) { return x * tanh(softplus(x)); });
  CHECK(mish.name() == "Mish");
  mish.to(d);
  const std::vector<double> x{-2, -0.5, 0, 0.5, 2};
  check_values(mish(tensor(x, d)), map(x, [](double v) { return v * std::tanh(std::log1p(std::exp(v))); }));
  test::check_gradients("Mish", [mish](const V& in) mutable {
    mish.to(in[0].device());
    return mish(in[0]);
  }, {randn({2, 3}, cpu(), 3, float64)});
  try {
    nn::Activation empty("Empty", nullptr);
    FAIL("expected kten::Error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), ContainsSubstring("'Empty'") && ContainsSubstring("empty function"));
  }
}

// --- LayerNorm ---------------------------------------------------------------------------------

TEST_CASE("LayerNorm normalises the last axis with the biased variance, then scales and shifts", "[layers]") {
  const Device d = test::device();
  const std::int64_t features = 5;
  const std::vector<double> w{0.5, -1, 2, 1.5, 0.25}, b{0.1, 0.2, -0.3, 0, 1};
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    nn::LayerNorm ln(features, 1e-3, dtype);
    CHECK(ln.name() == "LayerNorm");
    CHECK(ln.features() == features);
    CHECK(ln.eps() == 1e-3);
    ln.to(d);
    const auto params = ln.named_parameters();
    REQUIRE(params.size() == 2);
    CHECK(params[0].name == "weight");
    CHECK(params[1].name == "bias");
    CHECK(ln.weight().shape() == Shape{features});
    CHECK(ln.weight().device() == d);
    CHECK(ln.weight().dtype() == dtype);
    CHECK(test::host_doubles<double>(ln.weight().astype(float64)) == std::vector<double>(5, 1.0));
    CHECK(test::host_doubles<double>(ln.bias().astype(float64)) == std::vector<double>(5, 0.0));
    params[0].slot->value.copy_from(tensor(w, {features}, d).astype(dtype));
    params[1].slot->value.copy_from(tensor(b, {features}, d).astype(dtype));

    const Tensor x = (randn({2, 3, features}, d, 3, float64) * 2.0 + 1.0).astype(dtype);
    const auto hx = test::host_doubles<double>(x.astype(float64));
    std::vector<double> want(hx.size());
    for (std::size_t row = 0; row < hx.size() / features; ++row) {
      double mean = 0, var = 0;
      for (std::int64_t j = 0; j < features; ++j) mean += hx[row * features + j] / features;
      for (std::int64_t j = 0; j < features; ++j) var += std::pow(hx[row * features + j] - mean, 2) / features;
      for (std::int64_t j = 0; j < features; ++j)
        want[row * features + j] = (hx[row * features + j] - mean) / std::sqrt(var + 1e-3) * w[j] + b[j];
    }
    const Tensor y = ln(x);
    CHECK(y.shape() == x.shape());
    CHECK(y.device() == d);
    check_values(y, want);
    // Strided: a transposed view whose last axis has the features.
    const Tensor columns = randn({features, 4}, d, 4, float64).astype(dtype);
    check_values(ln(columns.transpose()), test::host_doubles<double>(ln(columns.transpose().contiguous()).astype(float64)));
    // A constant row has variance 0: eps keeps it finite, and the result is the bias.
    check_values(ln(full({1, features}, 3.0, d, dtype)), b);
    // NaN stays in its row.
    const auto with_nan = test::host_doubles<double>(ln(tensor(std::vector<double>{kNaN, 1, 2, 3, 4, 1, 2, 3, 4, 5}, {2, features}, d).astype(dtype)).astype(float64));
    for (std::int64_t j = 0; j < features; ++j) {
      CHECK(std::isnan(with_nan[j]));
      CHECK(std::isfinite(with_nan[features + j]));
    }
  }
}

TEST_CASE("LayerNorm's gradients match finite differences, for the input, weight and bias", "[layers][grad]") {
  test::check_gradients("LayerNorm", [](const V& x) { return call_with(nn::LayerNorm(4, 1e-5, float64), x); },
                        {randn({3, 4}, cpu(), 1, float64), randn({4}, cpu(), 2, float64), randn({4}, cpu(), 3, float64)});
  test::check_gradients("LayerNorm (3-D, eps 0.5)", [](const V& x) { return call_with(nn::LayerNorm(3, 0.5, float64), x); },
                        {randn({2, 2, 3}, cpu(), 4, float64), randn({3}, cpu(), 5, float64), randn({3}, cpu(), 6, float64)});
}

TEST_CASE("LayerNorm, softmax, log_softmax and logsumexp over rows longer than the host's lanes match float64 references",
          "[layers][grad]") {
  // Rows of 1000 (the host folds a row in 32 float or 16 double lanes, then a tail; a GPU's team
  // splits it among its threads), one nearly constant row included.
  const Device d = test::device();
  const std::int64_t rows = 3, n = 1000;
  Tensor x64 = randn({rows, n}, d, 7, float64) * 3.0 + 1.0;
  x64.narrow(0, 2, 1).copy_from(full({1, n}, 5.0, d, float64) + randn({1, n}, d, 8, float64) * 1e-4);
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    const Tensor x = x64.astype(dtype);
    const auto hx = test::host_doubles<double>(x.astype(float64));  // what the kernels read
    std::vector<double> norm(hx.size()), soft(hx.size()), log_soft(hx.size()), log_sum(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* row = hx.data() + r * n;
      double mean = 0, var = 0, top = row[0], sum_exp = 0;
      for (std::int64_t j = 0; j < n; ++j) mean += row[j] / n;
      for (std::int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean) / n;
      for (std::int64_t j = 0; j < n; ++j) top = std::max(top, row[j]);
      for (std::int64_t j = 0; j < n; ++j) sum_exp += std::exp(row[j] - top);
      log_sum[r] = top + std::log(sum_exp);
      for (std::int64_t j = 0; j < n; ++j) {
        norm[r * n + j] = (row[j] - mean) / std::sqrt(var + 1e-5);
        soft[r * n + j] = std::exp(row[j] - top) / sum_exp;
        log_soft[r * n + j] = row[j] - top - std::log(sum_exp);
      }
    }
    nn::LayerNorm ln(n, 1e-5, dtype);
    ln.to(d);
    check_values(ln(x), norm);
    check_values(softmax(x, 1), soft);
    check_values(log_softmax(x, -1), log_soft);
    check_values(logsumexp(x, 1), log_sum);
  }
  // float32 on a nearly constant row with a small eps (rstd ~ 7000): the weight's gradient uses the
  // centring of the forward (mean and its correction apart; mean + correction rounds to the mean).
  {
    const Tensor flat = (full({1, n}, 5.0, d, float64) + randn({1, n}, d, 12, float64) * 1e-4).astype(float32);
    const Tensor g = randn({1, n}, d, 13, float32);
    std::vector<double> dw[2];
    for (DType dtype : {float32, float64}) {
      nn::LayerNorm ln(n, 1e-8, dtype);
      ln.to(d);
      ln(flat.astype(dtype)).backward(g.astype(dtype));
      dw[dtype == float64] = test::host_doubles<double>(ln.weight().grad().astype(float64));
    }
    double largest = 0, off = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      largest = std::max(largest, std::abs(dw[1][j]));
      off = std::max(off, std::abs(dw[0][j] - dw[1][j]));
    }
    CHECK(off <= 2e-4 * largest);
  }
  const auto rows_of = [](std::int64_t r, std::int64_t len) { return randn({r, len}, cpu(), 9, float64); };
  test::check_gradients("LayerNorm, rows of 100", [](const V& v) { return call_with(nn::LayerNorm(100, 1e-5, float64), v); },
                        {rows_of(2, 100), randn({100}, cpu(), 10, float64), randn({100}, cpu(), 11, float64)});
  test::check_gradients("softmax, rows of 100", [](const V& v) { return softmax(v[0], 1); }, {rows_of(2, 100)});
  test::check_gradients("log_softmax, rows of 100", [](const V& v) { return log_softmax(v[0], 1); }, {rows_of(2, 100)});
  test::check_gradients("logsumexp, rows of 100", [](const V& v) { return logsumexp(v[0], 1); }, {rows_of(2, 100)});
}

TEST_CASE("LayerNorm's gradients over many rows match a float64 reference, with and without the weight's", "[layers][grad]") {
  // 150 rows: the weight's and bias' gradients sum chunks of 64 rows (two whole, one partial; on
  // the host the same pass also writes dx), then the chunks' sums.
  const Device d = test::device();
  const std::int64_t rows = 150, n = 40;
  const double eps = 1e-5;
  const Tensor x = randn({rows, n}, d, 21, float64) * 2.0 + 0.5, g = randn({rows, n}, d, 22, float64);
  const auto hx = test::host_doubles<double>(x), hg = test::host_doubles<double>(g);
  nn::LayerNorm ln(n, eps, float64);
  ln.to(d);
  ln.weight().copy_from(randn({n}, d, 23, float64));
  const auto hw = test::host_doubles<double>(ln.weight());
  std::vector<double> dx(rows * n), dw(n, 0.0), db(n, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = hx.data() + r * n;
    const double* gr = hg.data() + r * n;
    double mean = 0, var = 0, mean_gw = 0, mean_gw_xhat = 0;
    for (std::int64_t j = 0; j < n; ++j) mean += xr[j] / n;
    for (std::int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean) / n;
    const double rstd = 1 / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < n; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      mean_gw += gr[j] * hw[j] / n;
      mean_gw_xhat += gr[j] * hw[j] * xhat / n;
      dw[j] += gr[j] * xhat;
      db[j] += gr[j];
    }
    for (std::int64_t j = 0; j < n; ++j)
      dx[r * n + j] = rstd * (gr[j] * hw[j] - mean_gw - (xr[j] - mean) * rstd * mean_gw_xhat);
  }
  for (bool params : {true, false}) {
    CAPTURE(params);
    for (auto& p : ln.named_parameters()) p.slot->value.requires_grad_(params);
    ln.zero_grad();
    Tensor xg = x.detach();
    xg.requires_grad_();
    ln(xg).backward(g);
    check_values(xg.grad(), dx);
    if (params) {
      check_values(ln.weight().grad(), dw);
      check_values(ln.bias().grad(), db);
    }
  }
}

TEST_CASE("LayerNorm refuses inputs and settings that do not fit", "[layers]") {
  const Device d = test::device();
  nn::LayerNorm ln(4);
  ln.to(d);
  try {
    ln(ones({2, 3}, d));
    FAIL("expected ShapeError");
  } catch (const ShapeError& e) {
    CHECK_THAT(e.what(), ContainsSubstring("4 features") && ContainsSubstring("2x3"));
  }
  CHECK_THROWS_AS(ln(ones({}, d)), ShapeError);
  CHECK_THROWS_AS(ln(ones({2, 4}, d, float64)), DTypeError);
  CHECK_THROWS_AS(nn::LayerNorm(0), ShapeError);
  CHECK_THROWS_AS(nn::LayerNorm(4, -1e-5), Error);
  CHECK_THROWS_AS(nn::LayerNorm(4, kNaN), Error);
  CHECK_THROWS_AS(nn::LayerNorm(4, 1e-5, int64), DTypeError);
}

// --- modes -------------------------------------------------------------------------------------

TEST_CASE("a module starts in training mode; eval() and train() switch it, and Sequential passes them on", "[layers]") {
  const Device d = test::device();
  nn::Sequential inner;
  inner.add(nn::Dropout(0.5, 3));
  nn::Sequential net;
  net.add(nn::Linear(4, 8, {true, float32, 1}));
  net.add(nn::Dropout(0.5, 2));
  net.add(inner);
  net.to(d);
  CHECK(net.is_training());
  CHECK(net[1].is_training());
  net.eval();
  CHECK_FALSE(net.is_training());
  for (std::size_t i = 0; i < net.size(); ++i) CHECK_FALSE(net[i].is_training());
  CHECK_FALSE(dynamic_cast<nn::Sequential&>(net[2])[0].is_training());  // nested containers too
  const nn::Dropout& late = net.add(nn::Dropout(0.2, 4));
  CHECK_FALSE(late.is_training());  // a layer added takes the container's mode
  // Evaluation: dropout is off, so two calls agree.
  const Tensor X = rand({3, 4}, d, 5);
  CHECK(net(X).to_vector<float>() == net(X).to_vector<float>());
  net.train();
  for (std::size_t i = 0; i < net.size(); ++i) CHECK(net[i].is_training());
  CHECK(net(X).to_vector<float>() != net(X).to_vector<float>());  // a new mask each call
  net.train(false);
  CHECK_FALSE(net[3].is_training());
}

// --- Dropout -----------------------------------------------------------------------------------

TEST_CASE("Dropout draws the documented mask, the same on every device for a seed, and a new one each call", "[layers]") {
  const Device d = test::device();
  const double p = 0.3;
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    nn::Dropout drop(p, 42);
    CHECK(drop.p() == p);
    CHECK(drop.seed() == 42);
    drop.to(d);
    const Tensor x = (uniform({37, 29}, 1.0, 2.0, d, 7, float64)).astype(dtype);
    const auto hx = test::host_doubles<double>(x.astype(float64));
    const Tensor first = drop(x), second = drop(x);
    CHECK(first.device() == d);
    CHECK(first.dtype() == dtype);
    CHECK(drop.calls() == 2);
    check_values(first, masked(hx, expected_keep(p, 42, 0, 37 * 29), p));
    check_values(second, masked(hx, expected_keep(p, 42, 1, 37 * 29), p));
    CHECK(test::host_doubles<double>(first.astype(float64)) != test::host_doubles<double>(second.astype(float64)));
    // Another layer with the seed replays the sequence; one with another seed does not.
    nn::Dropout same(p, 42), other(p, 43);
    same.to(d);
    other.to(d);
    CHECK(test::host_doubles<double>(same(x).astype(float64)) == test::host_doubles<double>(first.astype(float64)));
    CHECK(test::host_doubles<double>(other(x).astype(float64)) != test::host_doubles<double>(first.astype(float64)));
    // A strided input is masked by its elements' logical (row-major) positions.
    nn::Dropout strided(p, 42);
    strided.to(d);
    check_values(strided(x.transpose()).contiguous(),
                 masked(test::host_doubles<double>(x.transpose().contiguous().astype(float64)), expected_keep(p, 42, 0, 37 * 29), p));
  }
}

TEST_CASE("Dropout's masks are bit-identical on cpu() and a GPU", "[layers][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  nn::Dropout here(0.5, 9), there(0.5, 9);
  here.to(d);
  there.to(other);
  const Tensor x = rand({1000}, d, 1);
  for (int call = 0; call < 3; ++call) CHECK(here(x).to_vector<float>() == there(x.to(other)).to_vector<float>());
}

TEST_CASE("Dropout keeps a fraction 1 - p, scaled by 1 / (1 - p), so the mean is kept", "[layers]") {
  const Device d = test::device();
  const std::int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    nn::Dropout drop(p, 11);
    drop.to(d);
    const auto y = drop(ones({n}, d, float64)).to_vector<double>();
    std::int64_t kept = 0, other = 0;  // elements scaled by 1 / (1 - p), and any other value
    for (double v : y) {
      if (v == 1 / (1 - p)) ++kept;
      else if (v != 0) ++other;
    }
    CHECK(other == 0);
    // Five standard deviations of a binomial fraction: never off by chance.
    CHECK(std::fabs(static_cast<double>(kept) / n - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
  }
}

TEST_CASE("Dropout is the identity in evaluation mode and for p = 0; a dropped NaN stays NaN", "[layers]") {
  const Device d = test::device();
  const Tensor x = rand({4, 5}, d, 2);
  nn::Dropout drop(0.5, 1);
  drop.to(d);
  drop.eval();
  CHECK(drop(x).shares_storage_with(x));
  CHECK(drop.calls() == 0);
  drop.train();
  CHECK_FALSE(drop(x).shares_storage_with(x));
  nn::Dropout none(0.0, 1);
  none.to(d);
  CHECK(none(x).shares_storage_with(x));
  for (double v : test::host_doubles<double>(drop(full({64}, kNaN, d, float64)))) CHECK(std::isnan(v));
}

TEST_CASE("Dropout's gradient goes through the same mask", "[layers][grad]") {
  const Device d = test::device();
  nn::Dropout drop(0.25, 5);
  drop.to(d);
  const Tensor x = rand({6, 7}, d, 3, float64).requires_grad_();
  const Tensor w = randn({6, 7}, d, 4, float64);
  sum(drop(x) * w).backward();
  check_values(x.grad(), masked(test::host_doubles<double>(w), expected_keep(0.25, 5, 0, 42), 0.25));
  test::check_gradients("Dropout", [](const V& in) {
    nn::Dropout fresh(0.4, 8);  // the same mask at every evaluation: call 0 of seed 8
    fresh.to(in[0].device());
    return fresh(in[0]);
  }, {randn({3, 5}, cpu(), 6, float64)});
}

TEST_CASE("Dropout refuses a probability that is not in 0 <= p < 1, and a non-float input", "[layers]") {
  for (double p : {1.0, -0.1, 1.5, kNaN}) {
    CAPTURE(p);
    try {
      nn::Dropout drop(p);
      FAIL("expected kten::Error");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), ContainsSubstring("[0, 1)"));
    }
  }
  const Device d = test::device();
  nn::Dropout drop(0.5, 1);
  drop.to(d);
  CHECK_THROWS_AS(drop(tensor(std::vector<std::int64_t>{1, 2, 3}, d)), DTypeError);
  const std::uint64_t before = nn::next_seed();
  nn::Dropout unseeded(0.5);
  CHECK(unseeded.seed() == before + 1);  // next_seed(), like Linear
}

// --- Linear's layout ---------------------------------------------------------------------------

TEST_CASE("Linear's weight is (out, in), as PyTorch's, and forward reads it in place", "[layers]") {
  const Device d = test::device();
  nn::Linear layer(4, 3, {true, float64, 7});
  layer.to(d);
  CHECK(layer.weight().shape() == Shape{3, 4});
  const auto params = layer.named_parameters();
  CHECK(params[0].name == "weight");
  CHECK(params[0].slot->value.shape() == Shape{3, 4});
  CHECK(params[0].slot->expected == Shape{3, 4});
  nn::Linear lazy(3);
  CHECK(lazy.named_parameters()[0].slot->expected == Shape{3, -1});
  lazy.to(d);
  lazy(ones({2, 5}, d));
  CHECK(lazy.weight().shape() == Shape{3, 5});
  CHECK(lazy.in_features() == 5);

  // Forward and backward read the (out, in) weight through transposed views: no copy.
  const Tensor X = randn({5, 4}, d, 3, float64);
  reset_stats();
  const Tensor y = layer(X);
  sum(y * y).backward();
  CHECK(stats().contiguous_copies == 0);
  const auto hx = test::host_doubles<double>(X), hw = test::host_doubles<double>(layer.weight()),
             hb = test::host_doubles<double>(layer.bias());
  std::vector<double> want(15);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      want[i * 3 + j] = hb[j];
      for (int k = 0; k < 4; ++k) want[i * 3 + j] += hx[i * 4 + k] * hw[j * 4 + k];
    }
  check_values(y, want);
}

TEST_CASE("Linear's gradients for the input, (out, in) weight and bias match finite differences", "[layers][grad]") {
  test::check_gradients("Linear", [](const V& x) { return call_with(nn::Linear(4, 3, {true, float64, 1}), x); },
                        {randn({5, 4}, cpu(), 1, float64), randn({3, 4}, cpu(), 2, float64), randn({3}, cpu(), 3, float64)});
  test::check_gradients("Linear without bias", [](const V& x) { return call_with(nn::Linear(2, 3, {false, float64, 1}), x); },
                        {randn({1, 2}, cpu(), 4, float64), randn({3, 2}, cpu(), 5, float64)});
}

// --- losses ------------------------------------------------------------------------------------

namespace {

// The mean of f(prediction_i, target_i) on the host.
double host_mean(const std::vector<double>& p, const std::vector<double>& t, const std::function<double(double, double)>& f) {
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i) s += f(p[i], t[i]);
  return s / static_cast<double>(p.size());
}

double huber(double p, double t, double delta) {
  const double a = std::fabs(p - t);
  return a < delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
}

double bce(double x, double y) { return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x))); }

struct LossCase {
  std::string name;
  std::shared_ptr<nn::Loss> loss;
  std::function<double(double, double)> reference;
};

// The elementwise losses; targets of BCEWithLogitsLoss are probabilities.
std::vector<LossCase> elementwise_losses() {
  return {
      {"MSELoss", std::make_shared<nn::MSELoss>(), [](double p, double t) { return (p - t) * (p - t); }},
      {"L1Loss", std::make_shared<nn::L1Loss>(), [](double p, double t) { return std::fabs(p - t); }},
      {"HuberLoss", std::make_shared<nn::HuberLoss>(), [](double p, double t) { return huber(p, t, 1.0); }},
      {"HuberLoss(0.3)", std::make_shared<nn::HuberLoss>(0.3), [](double p, double t) { return huber(p, t, 0.3); }},
      {"BCEWithLogitsLoss", std::make_shared<nn::BCEWithLogitsLoss>(), bce},
  };
}

// -log_softmax(row)[target] averaged over the rows, on the host.
double host_cross_entropy(const std::vector<double>& logits, const std::vector<std::int64_t>& target, std::int64_t classes) {
  double total = 0;
  for (std::size_t r = 0; r < target.size(); ++r) {
    double top = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t c = 0; c < classes; ++c) top = std::max(top, logits[r * classes + c]);
    for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(logits[r * classes + c] - top);
    total += top + std::log(sum) - logits[r * classes + target[r]];
  }
  return total / static_cast<double>(target.size());
}

}  // namespace

TEST_CASE("the elementwise losses are PyTorch's means, 0-d tensors with history on the device", "[losses]") {
  const Device d = test::device();
  for (const auto& c : elementwise_losses()) {
    CAPTURE(c.name);
    for (DType dtype : {float32, float64}) {
      CAPTURE(dtype);
      for (std::int64_t n : {1, 7, 1000}) {
        CAPTURE(n);
        const Tensor p = (randn({n, 1}, d, 5, float64) * 2.0).astype(dtype);
        const Tensor t = c.name == "BCEWithLogitsLoss" ? rand({n, 1}, d, 6, dtype) : (randn({n, 1}, d, 6, float64) * 2.0).astype(dtype);
        const Tensor value = (*c.loss)(p, t);
        CHECK(value.ndim() == 0);
        CHECK(value.device() == d);
        CHECK(value.dtype() == dtype);
        CHECK_FALSE(value.requires_grad());  // nothing requires grad: nothing recorded
        check_values(value, {host_mean(test::host_doubles<double>(p.astype(float64)), test::host_doubles<double>(t.astype(float64)), c.reference)});
        Tensor leaf = p.detach();
        leaf.requires_grad_();
        const Tensor recorded = (*c.loss)(leaf, t);
        CHECK(recorded.requires_grad());
        CHECK(recorded.grad_fn() != nullptr);
      }
    }
    // NaN propagates; shapes must match exactly.
    CHECK(std::isnan((*c.loss)(tensor(std::vector<double>{1.0, kNaN}, d), tensor(std::vector<double>{0.5, 0.5}, d)).item<double>()));
    CHECK_THROWS_AS((*c.loss)(ones({4, 1}, d), ones({4}, d)), ShapeError);
    CHECK_THROWS_AS((*c.loss)(ones({4}, d), ones({4}, d, float64)), DTypeError);
  }
}

TEST_CASE("the elementwise losses' gradients match finite differences, for prediction and target", "[losses][grad]") {
  // Differences prediction - target of 0.45 to 2.5 in size: away from the kinks of L1 (0) and
  // Huber (1 and 0.3), so no finite difference straddles one.
  const Tensor p = randn({3, 4}, cpu(), 1, float64) * 2.0;
  const Tensor gap = tensor(std::vector<double>{0.5, -0.5, 2.0, -2.0, 0.6, -0.7, 1.7, -1.6, 0.45, -2.5, 0.8, -0.8}, {3, 4});
  for (const auto& c : elementwise_losses()) {
    const std::shared_ptr<nn::Loss> loss = c.loss;
    const Tensor t = c.name == "BCEWithLogitsLoss" ? rand({3, 4}, cpu(), 2, float64) : p - gap;
    test::check_gradients(c.name, [loss](const V& x) { return (*loss)(x[0], x[1]); }, {p, t});
  }
}

TEST_CASE("Loss::backward gives d(loss)/d(prediction) for every loss, without touching the caller's graph", "[losses][grad]") {
  const Device d = test::device();
  std::vector<LossCase> cases = elementwise_losses();
  const Tensor logits = randn({5, 3}, d, 1, float64);
  const Tensor classes = tensor(std::vector<std::int64_t>{0, 2, 1, 1, 0}, d);
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const Tensor p = randn({4, 2}, d, 3, float64);
    const Tensor t = c.name == "BCEWithLogitsLoss" ? rand({4, 2}, d, 4, float64) : randn({4, 2}, d, 4, float64);
    Tensor leaf = p.detach();
    leaf.requires_grad_();
    (*c.loss)(leaf, t).backward();
    const Tensor by_backward = c.loss->backward(p, t);
    CHECK(by_backward.shape() == p.shape());
    CHECK(by_backward.device() == d);
    test::require_allclose<double>(by_backward, test::host_doubles<double>(leaf.grad()), 1e-12, 1e-15);
  }
  nn::CrossEntropyLoss ce;
  Tensor leaf = logits.detach();
  leaf.requires_grad_();
  ce(leaf, classes).backward();
  // Under a NoGradGuard, and with a prediction that has a graph of its own: that graph is untouched.
  Tensor source = logits.detach();
  source.requires_grad_();
  const Tensor computed = source * 1.0;
  Tensor grad;
  {
    NoGradGuard no_grad;
    grad = static_cast<const nn::Loss&>(ce).backward(computed, classes);
  }
  test::require_allclose<double>(grad, test::host_doubles<double>(leaf.grad()), 1e-12, 1e-15);
  CHECK_FALSE(source.grad().defined());
}

TEST_CASE("CrossEntropyLoss is the mean of -log_softmax at each row's class, stable for large scores", "[losses]") {
  const Device d = test::device();
  nn::CrossEntropyLoss ce;
  const std::vector<std::int64_t> target{0, 3, 1, 1, 2, 3};
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    const Tensor logits = (randn({6, 4}, d, 7, float64) * 3.0).astype(dtype);
    const Tensor value = ce(logits, tensor(target, d));
    CHECK(value.ndim() == 0);
    CHECK(value.device() == d);
    CHECK(value.dtype() == dtype);
    check_values(value, {host_cross_entropy(test::host_doubles<double>(logits.astype(float64)), target, 4)});
    // Scores far beyond exp's range: log_softmax keeps them finite.
    const Tensor huge = tensor(std::vector<double>{1000.0, -1000.0, 0.0, 500.0, 999.0, -3.0}, {2, 3}, d).astype(dtype);
    const std::vector<std::int64_t> huge_target{0, 1};
    check_values(ce(huge, tensor(huge_target, d)), {host_cross_entropy({1000, -1000, 0, 500, 999, -3}, huge_target, 3)});
    // One example: (C) scores and a 0-d class.
    const Tensor row = logits.select(0, 1);
    check_values(ce(row, tensor(std::vector<std::int64_t>{3}, d).reshape({})),
                 {host_cross_entropy(test::host_doubles<double>(row.astype(float64)), {3}, 4)});
  }
  const std::vector<double> with_nan{kNaN, 1, 2, 0, 1, 2};
  CHECK(std::isnan(ce(tensor(with_nan, {2, 3}, d), tensor(std::vector<std::int64_t>{1, 1}, d)).item<double>()));
}

TEST_CASE("CrossEntropyLoss's gradient matches finite differences", "[losses][grad]") {
  const Tensor classes = tensor(std::vector<std::int64_t>{2, 0, 1, 2});
  test::check_gradients("CrossEntropyLoss", [classes](const V& x) { return nn::CrossEntropyLoss()(x[0], classes.to(x[0].device())); },
                        {randn({4, 3}, cpu(), 1, float64) * 2.0});
  const Tensor one = tensor(std::vector<std::int64_t>{1}).reshape({});
  test::check_gradients("CrossEntropyLoss (one example)", [one](const V& x) { return nn::CrossEntropyLoss()(x[0], one.to(x[0].device())); },
                        {randn({5}, cpu(), 2, float64)});
}

TEST_CASE("CrossEntropyLoss refuses classes out of range, other dtypes and shapes", "[losses]") {
  const Device d = test::device();
  nn::CrossEntropyLoss ce;
  const Tensor logits = randn({3, 4}, d, 1);
  for (std::int64_t bad : {4, -1}) {
    CAPTURE(bad);
    const Tensor target = tensor(std::vector<std::int64_t>{0, bad, 2}, d);
    if (d.is_cpu()) {
      try {
        ce(logits, target);
        FAIL("expected IndexError");
      } catch (const IndexError& e) {
        CHECK_THAT(e.what(), ContainsSubstring("class " + std::to_string(bad)) && ContainsSubstring("[0, 4)"));
      }
    } else {
      // On a GPU the check would read the targets on the host every step: the loss is NaN instead.
      reset_stats();
      const Tensor value = ce(logits, target);
      CHECK(stats().host_syncs == 0);
      CHECK(std::isnan(value.item<float>()));
    }
  }
  CHECK_THROWS_AS(ce(logits, tensor(std::vector<float>{0, 1, 2}, d)), DTypeError);  // float classes
  CHECK_THROWS_AS(ce(tensor(std::vector<std::int64_t>{0, 1, 2, 3}, {1, 4}, d), tensor(std::vector<std::int64_t>{0}, d)), DTypeError);
  CHECK_THROWS_AS(ce(logits, tensor(std::vector<std::int64_t>{0, 1}, d)), ShapeError);      // 2 targets for 3 rows
  CHECK_THROWS_AS(ce(logits, tensor(std::vector<std::int64_t>{0, 1, 2}, {3, 1}, d)), ShapeError);
  CHECK_THROWS_AS(ce(randn({2, 3, 4}, d, 1), tensor(std::vector<std::int64_t>{0, 1}, d)), ShapeError);
}

TEST_CASE("CrossEntropyLoss enqueues its forward and backward without a host synchronisation, on cpu() too", "[losses]") {
  const Device d = test::device();
  const Tensor logits = randn({8, 5}, d, 1).requires_grad_();
  const Tensor target = tensor(std::vector<std::int64_t>{0, 1, 2, 3, 4, 0, 1, 2}, d);
  const SyncDebug previous = set_sync_debug_mode(SyncDebug::Error);  // a GPU sync would throw
  reset_stats();
  try {
    nn::CrossEntropyLoss()(logits, target).backward();
  } catch (...) {
    set_sync_debug_mode(previous);
    throw;
  }
  set_sync_debug_mode(previous);
  // On cpu() the targets are checked where they are, on the host, with no device to wait for: a
  // step that is sync-free on a GPU counts no synchronisation on cpu() either.
  CHECK(stats().host_syncs == 0);
  CHECK(logits.grad().defined());
}

TEST_CASE("BCEWithLogitsLoss is stable for large logits and has PyTorch's gradient at 0", "[losses]") {
  const Device d = test::device();
  nn::BCEWithLogitsLoss loss;
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    const std::vector<double> x{1000, -1000, 50, -50}, y{0, 1, 1, 0.25};
    const Tensor value = loss(tensor(x, d).astype(dtype), tensor(y, d).astype(dtype));
    check_values(value, {host_mean(x, y, bce)});
    // At logit 0 the gradient is (sigmoid(0) - y) / n, not a subgradient of |x| or max(x, 0).
    Tensor zero = zeros({2}, d, dtype);
    zero.requires_grad_();
    loss(zero, tensor(std::vector<double>{0.0, 1.0}, d).astype(dtype)).backward();
    check_values(zero.grad(), {0.25, -0.25});
  }
}

TEST_CASE("HuberLoss refuses a delta that is not finite and positive", "[losses]") {
  for (double delta : {0.0, -1.0, kNaN, std::numeric_limits<double>::infinity()}) {
    CAPTURE(delta);
    try {
      nn::HuberLoss loss(delta);
      FAIL("expected kten::Error");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), ContainsSubstring("delta"));
    }
  }
  CHECK(nn::HuberLoss(0.5).delta() == 0.5);
}
