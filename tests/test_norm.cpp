// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Normalisation layers with state (issue 31): BatchNorm's running statistics against PyTorch 1.13's
// numbers (momentum, the cumulative average, num_batches_tracked, evaluation mode), its buffers in
// state_dict under PyTorch's names, untouched by optimisers and cast by to(float64); GroupNorm and
// InstanceNorm; the small layers; and the errors, naming the layer and the shapes. Values and
// gradients of every op and layer are in the op harness (tests/ops).
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

// Step `step`'s input, (2, 3, 2, 2) in float64: x = (0.37 (i + 1) + 1.3 c - 0.71 n + 0.05 step i^2
// - 0.4 step) mod 2.3 over i, c, n (the reference script's, with Python's modulo).
Tensor step_input(int step, const Device& d) {
  std::vector<double> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 4; ++i) {
        const double s = step, di = i;
        const double a = 0.37 * (di + 1) + 1.3 * c - 0.71 * n + 0.05 * s * di * di - 0.4 * s;
        double r = std::fmod(a, 2.3);
        if (r != 0 && r < 0) r += 2.3;
        v.push_back(r);
      }
  return tensor(v, {2, 3, 2, 2}, d);
}

// PyTorch 1.13 (float64), BatchNorm2d(3) with weight (1, 0.5, -2) and bias (0, 0.25, 1), after the
// three training steps of step_input(0..2):
//   bn = torch.nn.BatchNorm2d(3).double(); ...; for s in range(3): y = bn(x(s))
const std::vector<double> kRunningMean = {0.3051325, 0.3403200000000001, 0.33180750000000003};
const std::vector<double> kRunningVar = {0.8635387785714287, 0.8584155285714288, 0.8586512785714286};
const std::vector<double> kTrainY = {
    0.8888547497187199,   -1.822152236923377,  -0.8295977664041394, 0.4592416206880054,  0.05128542349485343,
    0.4070791414278774,   0.91427444146006,    -0.1682468705489264, -1.669840891174587,  3.8352958196417455,
    1.819753963769097,    -0.797442177438668,  -0.16295670411509916, 0.5333128498312322, 1.5258673203504698,
    -0.5925698331458135,  -0.4861901929571612, -0.13039647502413726, 0.3767988250080455, 1.035395707139388,
    0.46603182176508223,  -0.947855748772445,  3.9556266767087696,  1.3384305355010018};
// bn.eval(); bn(x(2))
const std::vector<double> kEvalY = {
    1.683969160956606,   -0.28531166604669567, 0.43568186077964965, 1.3718973359123672,  0.5358460971859758,
    0.7894853995523265,  1.1510563199469115,   0.37934525104503647, -2.967437062846097,  0.9823178322524077,
    -0.46376729327546184, -2.3415196204534396, 0.9199312444689862,  1.4257028229889601,  2.1466963498153055,
    0.6078594194247475,  0.1526888531857438,   0.4063281555520946,  0.7678990759466796,  1.2374016143694995,
    -1.4350184969882078, -2.449436420865965,   1.0686512725824298,  -0.80910105459555};

nn::BatchNormOptions float64_options() {
  nn::BatchNormOptions o;
  o.dtype = float64;
  return o;
}

std::vector<std::string> names_of(const nn::StateDict& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.first);
  return out;
}

}  // namespace

TEST_CASE("BatchNorm2d's running statistics after three training steps are PyTorch's, and evaluation uses them", "[norm]") {
  const Device d = test::device();
  nn::BatchNorm2d bn(3, float64_options());
  bn.to(d);
  {
    NoGradGuard no_grad;
    bn.weight().copy_from(tensor(std::vector<double>{1.0, 0.5, -2.0}, d));
    bn.bias().copy_from(tensor(std::vector<double>{0.0, 0.25, 1.0}, d));
  }
  Tensor y;
  for (int step = 0; step < 3; ++step) y = bn(step_input(step, d));
  test::require_allclose<double>(bn.running_mean(), kRunningMean, 1e-13, 1e-14);
  test::require_allclose<double>(bn.running_var(), kRunningVar, 1e-13, 1e-14);
  REQUIRE(bn.num_batches_tracked().dtype() == int64);
  REQUIRE(bn.num_batches_tracked().shape() == Shape{});
  REQUIRE(bn.num_batches_tracked().item<std::int64_t>() == 3);
  test::require_allclose<double>(y, kTrainY, 1e-12, 1e-13);
  bn.eval();
  test::require_allclose<double>(bn(step_input(2, d)), kEvalY, 1e-12, 1e-13);
  // Evaluation changes nothing.
  test::require_allclose<double>(bn.running_mean(), kRunningMean, 1e-13, 1e-14);
  REQUIRE(bn.num_batches_tracked().item<std::int64_t>() == 3);
}

TEST_CASE("BatchNorm without momentum keeps the cumulative average, as PyTorch's momentum=None", "[norm]") {
  const Device d = test::device();
  nn::BatchNormOptions o = float64_options();
  o.momentum = std::nullopt;
  nn::BatchNorm1d bn(3, o);
  bn.to(d);
  for (int step = 0; step < 3; ++step) bn(step_input(step, d).reshape({2, 3, 4}));
  // torch.nn.BatchNorm1d(3, momentum=None).double(), the same three inputs as (2, 3, 4)
  test::require_allclose<double>(bn.running_mean(), {1.1116666666666666, 1.2616666666666672, 1.2200000000000002}, 1e-13, 1e-14);
  test::require_allclose<double>(bn.running_var(), {0.4924333333333333, 0.4781952380952381, 0.47490952380952384}, 1e-13, 1e-14);
}

TEST_CASE("batch_norm updates the running statistics it is given with the momentum, off the tape", "[norm]") {
  const Device d = test::device();
  const Tensor x = step_input(0, d).requires_grad_();
  const Tensor mean = full({3}, 1.0, d, float64), var = full({3}, 2.0, d, float64);
  const Tensor y = batch_norm(x, mean, var, {}, {}, true, 0.25, 1e-5);
  // Channel c's batch mean and unbiased variance, from the host.
  const std::vector<double> v = x.detach().to_vector<double>();
  std::vector<double> want_mean, want_var;
  for (int c = 0; c < 3; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) sum += v[static_cast<std::size_t>(n * 12 + c * 4 + i)];
    const double m = sum / 8;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) sq += std::pow(v[static_cast<std::size_t>(n * 12 + c * 4 + i)] - m, 2);
    want_mean.push_back(0.75 * 1.0 + 0.25 * m);
    want_var.push_back(0.75 * 2.0 + 0.25 * sq / 7);
  }
  test::require_allclose<double>(mean, want_mean);
  test::require_allclose<double>(var, want_var);
  REQUIRE_FALSE(mean.requires_grad());
  y.sum().backward();  // the statistics are not on the tape
  REQUIRE(x.grad().defined());
}

TEST_CASE("instance_norm updates running statistics with the batch's average of each channel's", "[norm]") {
  const Device d = test::device();
  const Tensor x = step_input(1, d).reshape({2, 3, 4});
  const Tensor mean = zeros({3}, d, float64), var = ones({3}, d, float64);
  instance_norm(x, mean, var, {}, {}, true, 0.5, 1e-5);
  const Tensor per_sample_mean = kten::mean(x, {2});  // (2, 3)
  test::require_allclose<double>(mean, test::host_doubles<double>(kten::mean(per_sample_mean, 0) * 0.5));
  test::require_allclose<double>(var, test::host_doubles<double>(kten::mean(kten::var(x, {2}), 0) * 0.5 + 0.5));
}

TEST_CASE("BatchNorm's buffers are in state_dict under PyTorch's names, not parameters", "[norm]") {
  nn::Sequential net;
  net.add(nn::BatchNorm2d(4));
  net.add(nn::GroupNorm(2, 4));
  net.add(nn::InstanceNorm2d(4));
  REQUIRE(names_of(net.state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "0.running_mean", "0.running_var",
                                                                  "0.num_batches_tracked", "1.weight", "1.bias"});
  REQUIRE(net.parameters().size() == 4);
  REQUIRE(names_of(net.named_buffers()) == std::vector<std::string>{"0.running_mean", "0.running_var", "0.num_batches_tracked"});
  nn::BatchNormOptions o;
  o.affine = false;
  o.track_running_stats = false;
  nn::BatchNorm1d bare(4, o);
  REQUIRE(bare.state_dict().empty());
  REQUIRE_FALSE(bare.running_mean().defined());
}

TEST_CASE("Adam steps BatchNorm's weight and bias and leaves its buffers alone", "[norm]") {
  const Device d = test::device();
  nn::BatchNorm2d bn(3);
  bn.to(d);
  bn.eval();  // forward reads the running statistics and changes nothing
  optim::Adam adam(0.1);
  const Tensor x = step_input(0, d).astype(float32);
  (bn(x) * bn(x)).sum().backward();
  adam.step(bn);
  REQUIRE(bn.running_mean().to_vector<float>() == std::vector<float>{0, 0, 0});
  REQUIRE(bn.running_var().to_vector<float>() == std::vector<float>{1, 1, 1});
  REQUIRE(bn.num_batches_tracked().item<std::int64_t>() == 0);
  REQUIRE(bn.weight().to_vector<float>() != std::vector<float>{1, 1, 1});
}

TEST_CASE("to(float64) casts BatchNorm's parameters and running statistics, not num_batches_tracked", "[norm]") {
  const Device d = test::device();
  nn::BatchNorm1d bn(3);
  bn.to(d);
  bn(step_input(0, d).astype(float32).reshape({2, 3, 4}));
  const std::vector<float> mean = bn.running_mean().to_vector<float>();
  bn.to(float64);
  REQUIRE(bn.weight().dtype() == float64);
  REQUIRE(bn.running_mean().dtype() == float64);
  REQUIRE(bn.running_var().dtype() == float64);
  REQUIRE(bn.num_batches_tracked().dtype() == int64);
  REQUIRE(bn.num_batches_tracked().item<std::int64_t>() == 1);
  test::require_allclose<double>(bn.running_mean(), std::vector<double>(mean.begin(), mean.end()), 0, 0);
  bn(step_input(1, d).reshape({2, 3, 4}));  // trains on in float64
  REQUIRE(bn.num_batches_tracked().item<std::int64_t>() == 2);
}

TEST_CASE("Without running statistics BatchNorm uses the batch's in evaluation mode too", "[norm]") {
  const Device d = test::device();
  nn::BatchNormOptions o = float64_options();
  o.track_running_stats = false;
  nn::BatchNorm2d bn(3, o);
  bn.to(d);
  const Tensor x = step_input(2, d);
  const std::vector<double> train = test::host_doubles<double>(bn(x));
  bn.eval();
  test::require_allclose<double>(bn(x), train);
}

TEST_CASE("GroupNorm and InstanceNorm normalise their groups in both modes; InstanceNorm takes one sample", "[norm]") {
  const Device d = test::device();
  const Tensor x = step_input(0, d);  // (2, 3, 2, 2)
  nn::InstanceNorm2d inorm(3, 1e-5, false, float64);
  inorm.to(d);
  const Tensor y = inorm(x);
  // Every (sample, channel) has mean 0 and biased variance 1 / (1 + eps / var).
  const std::vector<double> means = test::host_doubles<double>(kten::mean(y, {2, 3}));
  for (double m : means) REQUIRE(std::fabs(m) < 1e-14);
  inorm.eval();
  test::require_allclose<double>(inorm(x), test::host_doubles<double>(y));
  test::require_allclose<double>(inorm(x.select(0, 1)), test::host_doubles<double>(y.select(0, 1)));
  nn::GroupNorm gnorm(3, 3, 1e-5, true, float64);
  gnorm.to(d);
  test::require_allclose<double>(gnorm(x), test::host_doubles<double>(y));  // a group per channel
}

TEST_CASE("Normalisation layers refuse inputs that do not fit, naming the layer and the shapes", "[norm][errors]") {
  const Device d = test::device();
  nn::BatchNorm2d bn(3);
  bn.to(d);
  CHECK_THROWS_WITH(bn(zeros({2, 4, 2, 2}, d)), ContainsSubstring("BatchNorm2d") && ContainsSubstring("3 channels") &&
                                                    ContainsSubstring("2x4x2x2"));
  CHECK_THROWS_AS(bn(zeros({2, 4, 2, 2}, d)), ShapeError);
  CHECK_THROWS_WITH(bn(zeros({2, 3, 4}, d)), ContainsSubstring("BatchNorm2d") && ContainsSubstring("rank 4") &&
                                                 ContainsSubstring("2x3x4"));
  CHECK_THROWS_AS(bn(zeros({1, 3, 1, 1}, d)), ShapeError);  // one value per channel in training
  CHECK_THROWS_WITH(bn(zeros({1, 3, 1, 1}, d)), ContainsSubstring("more than 1 value per channel") && ContainsSubstring("1x3x1x1"));
  bn.eval();
  CHECK(bn(zeros({1, 3, 1, 1}, d)).shape() == Shape{1, 3, 1, 1});  // evaluation takes one
  CHECK_THROWS_AS(bn(zeros({2, 3, 2, 2}, d, float64)), DTypeError);
  nn::BatchNorm1d bn1(3);
  bn1.to(d);
  CHECK_THROWS_AS(bn1(zeros({2, 3, 2, 2}, d)), ShapeError);
  CHECK_THROWS_AS(bn1(zeros({3}, d)), ShapeError);
  CHECK_THROWS_AS(nn::GroupNorm(4, 6), ShapeError);
  CHECK_THROWS_WITH(nn::GroupNorm(4, 6), ContainsSubstring("GroupNorm") && ContainsSubstring("4 groups"));
  nn::GroupNorm gn(2, 6);
  gn.to(d);
  CHECK_THROWS_WITH(gn(zeros({2, 4, 3}, d)), ContainsSubstring("GroupNorm") && ContainsSubstring("2x4x3"));
  nn::InstanceNorm1d in(3);
  in.to(d);
  CHECK_THROWS_WITH(in(zeros({2, 5, 3}, d)), ContainsSubstring("InstanceNorm1d") && ContainsSubstring("2x5x3"));
  CHECK_THROWS_AS(in(zeros({2, 3, 3, 3}, d)), ShapeError);
  CHECK_THROWS_WITH(in(zeros({2, 3, 1}, d)), ContainsSubstring("more than 1 spatial element"));
  CHECK_THROWS_AS(nn::BatchNorm2d(0), ShapeError);
  // The functional forms name the op.
  CHECK_THROWS_WITH(group_norm(zeros({2, 6, 3}, d), 4), ContainsSubstring("group_norm") && ContainsSubstring("2x6x3"));
  CHECK_THROWS_WITH(batch_norm(zeros({2, 3, 3}, d), ones({4}, d), ones({3}, d)),
                    ContainsSubstring("batch_norm") && ContainsSubstring("running_mean"));
  CHECK_THROWS_WITH(batch_norm(zeros({2, 3, 3}, d), {}, {}), ContainsSubstring("running_var"));
  CHECK_THROWS_AS(batch_norm(zeros({3}, d), {}, {}, {}, {}, true), ShapeError);
  CHECK_THROWS_AS(instance_norm(zeros({2, 3}, d)), ShapeError);
}

TEST_CASE("LeakyReLU, Flatten, Unflatten and Identity", "[norm][layers]") {
  const Device d = test::device();
  const Tensor x = tensor(std::vector<double>{-2, -0.5, 0, 1, 3, -1}, {1, 2, 3}, d);
  const auto on_device = [&](auto layer) {  // a layer on the device under test
    layer.to(d);
    return layer;
  };
  test::require_allclose<double>(on_device(nn::LeakyReLU(0.1))(x), {-0.2, -0.05, 0, 1, 3, -0.1});
  test::require_allclose<double>(leaky_relu(x), {-0.02, -0.005, 0, 1, 3, -0.01});
  CHECK(on_device(nn::Flatten())(x).shape() == Shape{1, 6});
  CHECK(on_device(nn::Flatten(0, 1))(x).shape() == Shape{2, 3});
  CHECK(on_device(nn::Flatten())(zeros({}, d)).shape() == Shape{1});
  CHECK_THROWS_AS(on_device(nn::Flatten(2, 1))(x), ShapeError);
  CHECK_THROWS_AS(on_device(nn::Flatten(1, 5))(x), ShapeError);
  CHECK(on_device(nn::Unflatten(2, {3, 1}))(x).shape() == Shape{1, 2, 3, 1});
  CHECK(on_device(nn::Unflatten(-1, {-1, 1}))(x).shape() == Shape{1, 2, 3, 1});
  CHECK_THROWS_WITH(on_device(nn::Unflatten(2, {2, 2}))(x), ContainsSubstring("Unflatten") && ContainsSubstring("1x2x3"));
  CHECK_THROWS_AS(nn::Unflatten(1, {-1, -1}), ShapeError);
  CHECK_THROWS_AS(on_device(nn::Unflatten(2, {-1, 2}))(x), ShapeError);
  test::require_allclose<double>(on_device(nn::Identity())(x), test::host_doubles<double>(x));
}

namespace {

// A float64 reference of a normalisation over sets of an (N, C, S) input: batch norm (a set per
// channel) when groups is 0, else group norm with `groups` groups; y, and dx, dw, db for the
// upstream gradient g.
struct NormReference {
  std::vector<double> y, dx, dw, db, mean, unbiased_var;  // the last two per set
};
NormReference norm_reference(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& w,
                             const std::vector<double>& b, std::int64_t n, std::int64_t c, std::int64_t s, std::int64_t groups,
                             double eps) {
  const std::int64_t sets = groups == 0 ? c : n * groups;
  const auto set_of = [&](std::int64_t e) {
    const std::int64_t ch = (e / s) % c, sample = e / (c * s);
    return groups == 0 ? ch : sample * groups + ch / (c / groups);
  };
  std::vector<double> sum(sets), count(sets), var(sets), sum_gw(sets), sum_gw_xhat(sets);
  for (std::size_t e = 0; e < x.size(); ++e) sum[set_of(e)] += x[e], count[set_of(e)] += 1;
  for (std::size_t e = 0; e < x.size(); ++e) {
    const double d = x[e] - sum[set_of(e)] / count[set_of(e)];
    var[set_of(e)] += d * d / count[set_of(e)];
  }
  NormReference r{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(c), std::vector<double>(c), {}, {}};
  const auto xhat = [&](std::size_t e) { return (x[e] - sum[set_of(e)] / count[set_of(e)]) / std::sqrt(var[set_of(e)] + eps); };
  for (std::size_t e = 0; e < x.size(); ++e) {
    const std::int64_t ch = (e / s) % c;
    r.y[e] = xhat(e) * w[ch] + b[ch];
    sum_gw[set_of(e)] += g[e] * w[ch];
    sum_gw_xhat[set_of(e)] += g[e] * w[ch] * xhat(e);
    r.dw[ch] += g[e] * xhat(e);
    r.db[ch] += g[e];
  }
  for (std::size_t e = 0; e < x.size(); ++e) {
    const std::int64_t k = set_of(e), ch = (e / s) % c;
    r.dx[e] = (g[e] * w[ch] - sum_gw[k] / count[k] - xhat(e) * sum_gw_xhat[k] / count[k]) / std::sqrt(var[k] + eps);
  }
  for (std::int64_t k = 0; k < sets; ++k) {
    r.mean.push_back(sum[k] / count[k]);
    r.unbiased_var.push_back(var[k] * count[k] / (count[k] - 1));
  }
  return r;
}

}  // namespace

// A GPU cuts sets of more than 2048 elements into pieces (src/ops/norm.cpp): these shapes give
// sets of several pieces, whole blocks per piece and pieces per block, for batch, group and
// instance norm; an offset of 100 checks that combining the pieces' moments loses no accuracy.
TEST_CASE("Normalisation of large sets (pieces on a GPU) matches a float64 reference, values and gradients", "[norm][gpu-path]") {
  const Device d = test::device();
  struct Case {
    const char* what;
    Shape shape;
    std::int64_t groups;  // 0: batch norm
    bool instance;
  };
  const Case cases[] = {{"batch norm, 2 pieces a block", {2, 3, 48, 48}, 0, false},
                        {"batch norm, whole blocks a piece", {45, 2, 100}, 0, false},
                        {"batch norm 1d, a strided piece", {5000, 2}, 0, false},
                        {"group norm, 2 pieces a block", {2, 4, 48, 48}, 2, false},
                        {"instance norm, 3 pieces", {1, 2, 70, 70}, 0, true}};
  for (const Case& k : cases) {
    INFO(k.what);
    const std::int64_t n = k.shape[0], c = k.shape[1];
    std::int64_t s = 1;
    for (std::size_t a = 2; a < k.shape.size(); ++a) s *= k.shape[a];
    std::vector<double> xv(static_cast<std::size_t>(n * c * s)), gv(xv.size()), wv(c), bv(c);
    for (std::size_t e = 0; e < xv.size(); ++e) {
      xv[e] = 100 + std::sin(0.37 * static_cast<double>(e)) + 0.001 * static_cast<double>(e % 97);
      gv[e] = std::cos(0.11 * static_cast<double>(e));
    }
    for (std::int64_t ch = 0; ch < c; ++ch) wv[ch] = 0.5 + 0.25 * static_cast<double>(ch), bv[ch] = 0.1 * static_cast<double>(ch);
    const Tensor x = tensor(xv, k.shape, d).requires_grad_(), g = tensor(gv, k.shape, d);
    const Tensor w = tensor(wv, {c}, d).requires_grad_(), b = tensor(bv, {c}, d).requires_grad_();
    // batch norm with momentum 1: the running statistics become the batch's (variance unbiased)
    const Tensor running_mean = zeros({c}, d, float64), running_var = ones({c}, d, float64);
    const Tensor y = k.instance      ? instance_norm(x, {}, {}, w, b)
                     : k.groups == 0 ? batch_norm(x, running_mean, running_var, w, b, true, 1.0)
                                     : group_norm(x, k.groups, w, b);
    y.backward(g);
    const NormReference want = norm_reference(xv, gv, wv, bv, n, c, s, k.instance ? c : k.groups, 1e-5);
    test::require_allclose<double>(y, want.y, 1e-10, 1e-10);
    test::require_allclose<double>(x.grad(), want.dx, 1e-9, 1e-9);
    test::require_allclose<double>(w.grad(), want.dw, 1e-9, 1e-9);
    test::require_allclose<double>(b.grad(), want.db, 1e-9, 1e-9);
    if (k.groups == 0 && !k.instance) {
      test::require_allclose<double>(running_mean, want.mean, 1e-12, 1e-12);
      test::require_allclose<double>(running_var, want.unbiased_var, 1e-9, 1e-12);
    }
  }
  SECTION("a NaN in one piece makes its whole set NaN and leaves the other sets finite") {
    std::vector<double> xv(2 * 2 * 48 * 48, 1.0);
    for (std::size_t e = 0; e < xv.size(); ++e) xv[e] = std::sin(static_cast<double>(e));
    xv[2 * 48 * 48 + 2200] = std::nan("");  // sample 1, channel 0, the second piece of its block
    const std::vector<double> y = test::host_doubles<double>(batch_norm(tensor(xv, {2, 2, 48, 48}, d), {}, {}, {}, {}, true));
    for (std::size_t e = 0; e < y.size(); ++e) {
      INFO("element " << e);
      REQUIRE(std::isnan(y[e]) == ((e / (48 * 48)) % 2 == 0));
    }
  }
}
