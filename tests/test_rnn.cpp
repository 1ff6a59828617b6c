// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// nn::LSTM and nn::GRU (issue 52): PyTorch's parameter names and shapes, states, batch_first,
// unbatched inputs, dropout between layers and the refusals. Values and gradients against
// at::lstm / at::gru and finite differences are the layer rows' (tests/ops/layer_rows.cpp).
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;

namespace {

std::vector<std::string> names(nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.name + " " + [&] {
    std::string s;
    for (auto e : p.slot->value.shape()) s += std::to_string(e) + ",";
    return s;
  }());
  return out;
}

nn::RNNOptions options(std::int64_t layers, bool bidirectional, bool batch_first = false, std::uint64_t seed = 5) {
  nn::RNNOptions o;
  o.num_layers = layers;
  o.bidirectional = bidirectional;
  o.batch_first = batch_first;
  o.seed = seed;
  return o;
}

// Every weight 0 and every bias `bias`, so each gate is sigmoid or tanh of a known constant.
void set_all(nn::Module& m, double bias) {
  NoGradGuard no_grad;
  for (const auto& p : m.named_parameters())
    p.slot->value.copy_from(full(p.slot->value.shape(), p.name.rfind("bias", 0) == 0 ? bias : 0.0,
                                 p.slot->value.device(), p.slot->value.dtype()));
}

}  // namespace

TEST_CASE("LSTM and GRU have PyTorch's parameter names and shapes, layer by layer and direction by direction",
          "[nn][rnn]") {
  nn::LSTM lstm(3, 5, options(2, true));
  CHECK(names(lstm) == std::vector<std::string>{
                           "weight_ih_l0 20,3,", "weight_hh_l0 20,5,", "bias_ih_l0 20,", "bias_hh_l0 20,",
                           "weight_ih_l0_reverse 20,3,", "weight_hh_l0_reverse 20,5,", "bias_ih_l0_reverse 20,",
                           "bias_hh_l0_reverse 20,", "weight_ih_l1 20,10,", "weight_hh_l1 20,5,", "bias_ih_l1 20,",
                           "bias_hh_l1 20,", "weight_ih_l1_reverse 20,10,", "weight_hh_l1_reverse 20,5,",
                           "bias_ih_l1_reverse 20,", "bias_hh_l1_reverse 20,"});
  nn::RNNOptions no_bias;
  no_bias.bias = false;
  nn::GRU gru(4, 2, no_bias);
  CHECK(names(gru) == std::vector<std::string>{"weight_ih_l0 6,4,", "weight_hh_l0 6,2,"});
  // PyTorch's initialisation: uniform in [-1/sqrt(H), 1/sqrt(H)].
  const double bound = 1 / std::sqrt(5.0);
  for (const auto& p : lstm.named_parameters()) {
    CHECK(max(p.slot->value).item<double>() <= bound);
    CHECK(min(p.slot->value).item<double>() >= -bound);
  }
}

TEST_CASE("LSTM and GRU: shapes of outputs and states, batch_first, unbatched inputs", "[nn][rnn]") {
  const Device d = test::device();
  nn::LSTM lstm(3, 4, options(2, true));
  lstm.to(d);
  const Tensor x = randn({6, 2, 3}, d, 1);
  auto [y, hc] = lstm.forward_state(x);
  CHECK(y.shape() == Shape{6, 2, 8});
  CHECK(std::get<0>(hc).shape() == Shape{4, 2, 4});
  CHECK(std::get<1>(hc).shape() == Shape{4, 2, 4});
  // The last layer's forward direction ends at the last step, its reverse one at the first.
  test::require_allclose<double>(std::get<0>(hc).select(0, 2).astype(float64),
                                 test::host_doubles<double>(y.select(0, 5).narrow(1, 0, 4).astype(float64)), 0, 0);
  test::require_allclose<double>(std::get<0>(hc).select(0, 3).astype(float64),
                                 test::host_doubles<double>(y.select(0, 0).narrow(1, 4, 4).astype(float64)), 0, 0);
  // batch_first: the same layer (same seed) with batch and time swapped; states stay (layers x
  // directions, N, H).
  nn::LSTM first(3, 4, options(2, true, true));
  first.to(d);
  auto [yb, hcb] = first.forward_state(x.transpose(0, 1));
  CHECK(yb.shape() == Shape{2, 6, 8});
  test::require_allclose<double>(yb.transpose(0, 1).astype(float64), test::host_doubles<double>(y.astype(float64)), 0, 0);
  CHECK(std::get<1>(hcb).shape() == Shape{4, 2, 4});
  // Unbatched: (L, in) in, (L, directions H) out, states (layers x directions, H).
  nn::GRU gru(3, 4, options(1, false));
  gru.to(d);
  auto [yu, hu] = gru.forward_state(x.select(1, 0));
  CHECK(yu.shape() == Shape{6, 4});
  CHECK(hu.shape() == Shape{1, 4});
  auto [yf, hf] = gru.forward_state(x.narrow(1, 0, 1));
  test::require_allclose<double>(yu.astype(float64), test::host_doubles<double>(yf.select(1, 0).astype(float64)), 0, 0);
  CHECK(gru(x).shape() == Shape{6, 2, 4});
  // to(float64) makes a float64 layer: float64 inputs, the same values.
  nn::GRU wide(3, 4, options(1, false));
  wide.to(d);
  wide.to(float64);
  test::require_allclose<double>(wide(x.astype(float64)), test::host_doubles<double>(gru(x).astype(float64)), 1e-6, 1e-6);
  CHECK_THROWS_AS(wide(x), DTypeError);
}

TEST_CASE("LSTM and GRU step as PyTorch's gates say, from the given initial states", "[nn][rnn]") {
  const Device d = test::device();
  // Weights 0, biases 0: LSTM's i, f, o are 1/2 and g is 0, so c halves each step and h = tanh(c) / 2.
  nn::LSTM lstm(2, 3, options(1, false));
  lstm.to(d);
  set_all(lstm, 0.0);
  const Tensor x = randn({2, 1, 2}, d, 2);
  const Tensor h0 = full({1, 1, 3}, 0.7, d), c0 = full({1, 1, 3}, 2.0, d);
  auto [y, hc] = lstm.forward_state(x, {h0, c0});
  const double c1 = 1.0, c2 = 0.5;
  test::require_allclose<double>(y.astype(float64), {std::tanh(c1) / 2, std::tanh(c1) / 2, std::tanh(c1) / 2,
                                                     std::tanh(c2) / 2, std::tanh(c2) / 2, std::tanh(c2) / 2},
                                 1e-6, 1e-7);
  test::require_allclose<double>(std::get<1>(hc).astype(float64), {c2, c2, c2}, 1e-6, 1e-7);
  // GRU, weights 0 and biases b: r = z = sigmoid(2b) (both biases count), n = tanh(b + r b),
  // h' = (1 - z) n + z h.
  nn::GRU gru(2, 1, options(1, false));
  gru.to(d);
  set_all(gru, 0.25);
  const double s = 1 / (1 + std::exp(-0.5)), n = std::tanh(0.25 + s * 0.25);
  auto [yg, h] = gru.forward_state(x, full({1, 1, 1}, -1.0, d));
  const double h1 = (1 - s) * n + s * -1.0, h2 = (1 - s) * n + s * h1;
  test::require_allclose<double>(yg.astype(float64), {h1, h2}, 1e-6, 1e-7);
  test::require_allclose<double>(h.astype(float64), {h2}, 1e-6, 1e-7);
}

TEST_CASE("LSTM: dropout acts between layers in training mode only", "[nn][rnn]") {
  const Device d = test::device();
  nn::RNNOptions o = options(2, false);
  o.dropout = 1.0;  // the second layer reads zeros in training mode
  nn::LSTM lstm(2, 3, o);
  lstm.to(d);
  const Tensor a = randn({3, 2, 2}, d, 3), b = randn({3, 2, 2}, d, 4);
  test::require_allclose<double>(lstm(a).astype(float64), test::host_doubles<double>(lstm(b).astype(float64)), 0, 0);
  lstm.eval();
  CHECK(max(abs(lstm(a) - lstm(b))).item<double>() > 0);
}

TEST_CASE("LSTM and GRU refuse wrong inputs and options with kten errors", "[nn][rnn]") {
  const Device d = test::device();
  nn::LSTM lstm(3, 4, options(1, false));
  lstm.to(d);
  CHECK_THROWS_AS(lstm(zeros({5, 2, 2}, d)), ShapeError);                      // input width
  CHECK_THROWS_AS(lstm(zeros({5}, d)), ShapeError);                            // rank
  CHECK_THROWS_AS(lstm(zeros({0, 2, 3}, d)), ShapeError);                      // no steps
  CHECK_THROWS_AS(lstm(zeros({5, 2, 3}, d, float64)), DTypeError);             // dtype
  CHECK_THROWS_AS(lstm.forward_state(zeros({5, 2, 3}, d), {zeros({1, 3, 4}, d), Tensor()}), ShapeError);
  CHECK_THROWS_WITH(lstm.forward_state(zeros({5, 2, 3}, d), {zeros({2, 2, 4}, d), Tensor()}),
                    Catch::Matchers::ContainsSubstring("has shape 2x2x4, expected 1x2x4"));
  nn::RNNOptions bad;
  bad.num_layers = 0;
  CHECK_THROWS_AS(nn::GRU(3, 4, bad), Error);
  bad.num_layers = 1;
  bad.dropout = 1.5;
  CHECK_THROWS_AS(nn::GRU(3, 4, bad), Error);
  CHECK_THROWS_AS(nn::GRU(0, 4), ShapeError);
}
