// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention (issue 52): scaled_dot_product_attention's masks, causality, dropout and refusals;
// nn::MultiheadAttention's and nn::TransformerEncoderLayer's names, shapes, masks and layouts.
// Values and gradients against PyTorch's arithmetic are the harness rows' (tests/ops); the layers
// against torch.nn's own modules are the torch label's interchange test.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

std::vector<std::string> names(nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) {
    std::string s = p.name + " ";
    for (auto e : p.slot->value.shape()) s += std::to_string(e) + ",";
    out.push_back(s);
  }
  return out;
}

// softmax(q k^T scale + bias) v on the host, in double: (L, E), (S, E), (S, Ev), bias (L, S).
std::vector<double> reference(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                              const std::vector<double>& bias, std::int64_t l, std::int64_t s, std::int64_t e,
                              std::int64_t ev, double scale) {
  std::vector<double> out(static_cast<std::size_t>(l * ev), 0.0);
  for (std::int64_t i = 0; i < l; ++i) {
    std::vector<double> w(static_cast<std::size_t>(s));
    double m = -std::numeric_limits<double>::infinity(), total = 0;
    for (std::int64_t j = 0; j < s; ++j) {
      double dot = 0;
      for (std::int64_t a = 0; a < e; ++a) dot += q[i * e + a] * k[j * e + a];
      w[j] = dot * scale + (bias.empty() ? 0.0 : bias[i * s + j]);
      m = std::max(m, w[j]);
    }
    for (double& x : w) total += (x = std::exp(x - m));
    for (std::int64_t j = 0; j < s; ++j)
      for (std::int64_t a = 0; a < ev; ++a) out[i * ev + a] += w[j] / total * v[j * ev + a];
  }
  return out;
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: softmax(q k^T / sqrt(E) + mask) v, its masks and causality", "[attention]") {
  const Device d = test::device();
  const std::int64_t l = 3, s = 4, e = 2, ev = 3;
  const Tensor q = randn({l, e}, d, 1, float64), k = randn({s, e}, d, 2, float64), v = randn({s, ev}, d, 3, float64);
  const auto qh = test::host_doubles<double>(q), kh = test::host_doubles<double>(k), vh = test::host_doubles<double>(v);
  const double scale = 1 / std::sqrt(2.0);
  test::require_allclose<double>(scaled_dot_product_attention(q, k, v), reference(qh, kh, vh, {}, l, s, e, ev, scale));
  test::require_allclose<double>(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.25),
                                 reference(qh, kh, vh, {}, l, s, e, ev, 0.25));
  // A float mask is added; a boolean one is true where a query may attend.
  const Tensor add = randn({l, s}, d, 4, float64);
  test::require_allclose<double>(scaled_dot_product_attention(q, k, v, add),
                                 reference(qh, kh, vh, test::host_doubles<double>(add), l, s, e, ev, scale));
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> allowed{1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1};
  std::vector<double> bias;
  for (double a : allowed) bias.push_back(a != 0 ? 0.0 : -inf);
  const Tensor allow = ne(tensor(allowed, {l, s}).to(d), 0.0);
  test::require_allclose<double>(scaled_dot_product_attention(q, k, v, allow), reference(qh, kh, vh, bias, l, s, e, ev, scale));
  // is_causal: query i attends to keys 0..i (the top-left triangle when S > L).
  std::vector<double> causal;
  for (std::int64_t i = 0; i < l; ++i)
    for (std::int64_t j = 0; j < s; ++j) causal.push_back(j <= i ? 0.0 : -inf);
  test::require_allclose<double>(scaled_dot_product_attention(q, k, v, {}, 0.0, true),
                                 reference(qh, kh, vh, causal, l, s, e, ev, scale));
  // Batches broadcast as matmul's: one key and value set for two heads of queries.
  const Tensor q2 = randn({2, 2, l, e}, d, 5, float64);
  const Tensor y2 = scaled_dot_product_attention(q2, k, v);
  CHECK(y2.shape() == Shape{2, 2, l, ev});
  test::require_allclose<double>(y2.select(0, 1).select(0, 0),
                                 reference(test::host_doubles<double>(q2.select(0, 1).select(0, 0)), kh, vh, {}, l, s, e, ev, scale));
  // A query that may attend to no key is NaN, not a silent average.
  const Tensor none = zeros({l, s}, d, boolean);
  for (double x : test::host_doubles<double>(scaled_dot_product_attention(q, k, v, none))) CHECK(std::isnan(x));
}

TEST_CASE("scaled_dot_product_attention: gradients of q, k, v and a float mask by finite differences", "[attention][grad]") {
  test::check_gradients("sdpa", [](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); },
                        {randn({2, 3, 2}), randn({2, 4, 2}, cpu(), 1), randn({2, 4, 3}, cpu(), 2), randn({3, 4}, cpu(), 3)});
  test::check_gradients("sdpa causal", [](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); },
                        {randn({3, 2}), randn({3, 2}, cpu(), 1), randn({3, 2}, cpu(), 2)});
}

TEST_CASE("scaled_dot_product_attention: dropout on the weights, seeded, and the refusals", "[attention]") {
  const Device d = test::device();
  const Tensor q = randn({1, 64, 8}, d, 1), k = randn({1, 64, 8}, d, 2), v = ones({1, 64, 1}, d);
  // With v all ones the output is the row sums of the kept, rescaled weights: 1 on average.
  const Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.5, false, std::nullopt, 7);
  test::require_allclose<float>(y, test::host_doubles<float>(scaled_dot_product_attention(q, k, v, {}, 0.5, false, std::nullopt, 7)), 0, 0);
  CHECK(std::abs(mean(y).item<double>() - 1.0) < 0.15);
  CHECK(mean(abs(y - scaled_dot_product_attention(q, k, v, {}, 0.5, false, std::nullopt, 8))).item<double>() > 0.05);
  for (double x : test::host_doubles<float>(scaled_dot_product_attention(q, k, v, {}, 1.0))) CHECK(x == 0.0);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, ones({64, 64}, d, boolean), 0.0, true),
                    ContainsSubstring("attn_mask or is_causal, not both"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, randn({1, 64, 7}, d), v), ShapeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, ones({1, 63, 1}, d)), ShapeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, zeros({3, 64}, d)), ContainsSubstring("cannot be broadcast"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, zeros({64, 64}, d, float64)), DTypeError);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k.astype(float64), v), DTypeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, 1.5), ContainsSubstring("dropout_p"));
  CHECK_THROWS_AS(scaled_dot_product_attention(randn({8}, d), k, v), ShapeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q.astype(int64), k, v, {}, 0.0, true), ContainsSubstring("scaled_dot_product_attention"));
}

TEST_CASE("MultiheadAttention has PyTorch's parameters, initialisation, shapes and weights", "[attention][nn]") {
  const Device d = test::device();
  nn::MultiheadAttentionOptions o;
  o.seed = 3;
  nn::MultiheadAttention mha(8, 2, o);
  CHECK(names(mha) == std::vector<std::string>{"in_proj_weight 24,8,", "in_proj_bias 24,", "out_proj.weight 8,8,",
                                               "out_proj.bias 8,"});
  CHECK(max(abs(mha.in_proj_bias())).item<float>() == 0.0f);
  CHECK(max(abs(mha.out_proj().bias())).item<float>() == 0.0f);
  CHECK(max(abs(mha.in_proj_weight())).item<float>() <= std::sqrt(6.0f / 32));
  mha.to(d);
  const Tensor x = randn({5, 3, 8}, d, 1), kv = randn({4, 3, 8}, d, 2);
  auto [y, w] = mha.forward(x, kv, kv);
  CHECK(y.shape() == Shape{5, 3, 8});
  CHECK(w.shape() == Shape{3, 5, 4});
  test::require_allclose<float>(sum(w, 2), std::vector<double>(15, 1.0), 1e-5, 1e-5);
  auto [y_heads, w_heads] = mha.forward(x, kv, kv, {}, true, {}, false);
  CHECK(w_heads.shape() == Shape{3, 2, 5, 4});
  test::require_allclose<float>(mean(w_heads, 1), test::host_doubles<float>(w));
  CHECK_FALSE(std::get<1>(mha.forward(x, kv, kv, {}, false)).defined());
  // The Module call is self-attention; unbatched inputs drop N.
  test::require_allclose<float>(mha(x), test::host_doubles<float>(std::get<0>(mha.forward(x, x, x))), 0, 0);
  auto [y1, w1] = mha.forward(x.select(1, 2), kv.select(1, 2), kv.select(1, 2));
  CHECK(w1.shape() == Shape{5, 4});
  test::require_allclose<float>(y1, test::host_doubles<float>(y.select(1, 2)), 1e-5, 1e-6);
  // batch_first takes (N, L, E) and gives the same numbers.
  o.batch_first = true;
  nn::MultiheadAttention first(8, 2, o);
  first.to(d);
  test::require_allclose<float>(std::get<0>(first.forward(x.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1))),
                                test::host_doubles<float>(y.transpose(0, 1)), 1e-5, 1e-6);
}

TEST_CASE("MultiheadAttention's masks block where true (boolean) or add (float), per key, query and head", "[attention][nn]") {
  const Device d = test::device();
  nn::MultiheadAttentionOptions o;
  o.seed = 4;
  nn::MultiheadAttention mha(4, 2, o);
  mha.to(d);
  const Tensor x = randn({3, 2, 4}, d, 1), kv = randn({5, 2, 4}, d, 2);
  // Key 4 of batch 1 padded: its value does not matter, its weight is 0.
  const Tensor pad = gt(tensor(std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {2, 5}).to(d), 0.5);
  auto [y, w] = mha.forward(x, kv, kv, pad);
  const Tensor kv2 = kv * 1.0;  // a copy
  kv2.select(0, 4).select(0, 1).copy_from(full({4}, 100.0, d));
  test::require_allclose<float>(std::get<0>(mha.forward(x, kv2, kv2, pad)), test::host_doubles<float>(y), 1e-5, 1e-6);
  test::require_allclose<float>(w.select(0, 1).select(1, 4), std::vector<double>(3, 0.0), 0, 0);
  // A float mask of 0 / -inf is the boolean one.
  const Tensor blocked = full({2, 5}, -std::numeric_limits<double>::infinity(), d);
  test::require_allclose<float>(std::get<0>(mha.forward(x, kv, kv, where(pad, blocked, 0.0))), test::host_doubles<float>(y), 1e-6, 1e-7);
  // attn_mask (L, S) and per head (N x heads, L, S).
  const Tensor causal = gt(arange(0, 5, 1, d).reshape({1, 5}) - arange(0, 3, 1, d).reshape({3, 1}), 0.0);
  auto [yc, wc] = mha.forward(x, kv, kv, {}, true, causal);
  test::require_allclose<float>(wc.select(0, 0).select(0, 0).narrow(0, 1, 4), std::vector<double>(4, 0.0), 0, 0);
  const Tensor per_head = causal.unsqueeze(0).expand({4, 3, 5});
  test::require_allclose<float>(std::get<0>(mha.forward(x, kv, kv, {}, true, per_head)), test::host_doubles<float>(yc), 1e-6, 1e-7);
  // A mask per (batch, head) pair, batch-major as PyTorch's (N x heads, L, S): each pair blocks its
  // own key, so a head or batch taken in the wrong order would put the zero weight elsewhere.
  std::vector<double> own_key(4 * 3 * 5, 0.0);
  for (int nh = 0; nh < 4; ++nh)
    for (int i = 0; i < 3; ++i) own_key[static_cast<std::size_t>((nh * 3 + i) * 5 + nh + 1)] = 1.0;
  const Tensor blocks = gt(tensor(own_key, {4, 3, 5}).to(d), 0.5);
  const Tensor w_pairs = std::get<1>(mha.forward(x, kv, kv, {}, true, blocks, false));  // (N, heads, L, S)
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 2; ++h) {
      const Tensor w_nh = w_pairs.select(0, n).select(0, h);
      for (int k = 1; k <= 4; ++k) {
        INFO("batch " << n << ", head " << h << ", key " << k);
        const double column = sum(w_nh.select(1, k)).item<double>();
        if (k == n * 2 + h + 1) CHECK(column == 0.0);
        else CHECK(column > 0.0);
      }
    }
  CHECK_THROWS_WITH(mha.forward(x, kv, kv, {}, true, causal.transpose(0, 1)), ContainsSubstring("attn_mask must be"));
  CHECK_THROWS_WITH(mha.forward(x, kv, kv, pad.transpose(0, 1)), ContainsSubstring("key_padding_mask must be"));
  CHECK_THROWS_AS(mha.forward(x, kv, kv, zeros({2, 5}, d, float64)), DTypeError);
  CHECK_THROWS_AS(mha.forward(x.astype(float64), kv, kv), DTypeError);
  CHECK_THROWS_AS(mha.forward(randn({3, 2, 5}, d), kv, kv), ShapeError);
  CHECK_THROWS_AS(mha.forward(x, kv, randn({4, 2, 4}, d)), ShapeError);
  CHECK_THROWS_AS(nn::MultiheadAttention(6, 4), ShapeError);
  nn::MultiheadAttentionOptions bad;
  bad.dtype = int64;
  CHECK_THROWS_AS(nn::MultiheadAttention(4, 2, bad), DTypeError);
}

TEST_CASE("MultiheadAttention without bias, in float64 after to(), with dropout in training mode only", "[attention][nn]") {
  const Device d = test::device();
  nn::MultiheadAttentionOptions o;
  o.bias = false;
  o.dropout = 0.5;
  o.seed = 5;
  nn::MultiheadAttention mha(4, 1, o);
  CHECK(names(mha) == std::vector<std::string>{"in_proj_weight 12,4,", "out_proj.weight 4,4,"});
  CHECK_FALSE(mha.in_proj_bias().defined());
  mha.to(d);
  mha.to(float64);
  const Tensor x = randn({6, 1, 4}, d, 1, float64);
  const Tensor a = std::get<1>(mha.forward(x, x, x)), b = std::get<1>(mha.forward(x, x, x));
  CHECK(max(abs(a - b)).item<double>() > 0);  // a new mask each call
  mha.eval();
  test::require_allclose<double>(std::get<1>(mha.forward(x, x, x)), test::host_doubles<double>(std::get<1>(mha.forward(x, x, x))), 0, 0);
  test::require_allclose<double>(sum(std::get<1>(mha.forward(x, x, x)), 2), std::vector<double>(6, 1.0));
}

TEST_CASE("TransformerEncoderLayer: PyTorch's children and names, post- and pre-norm, causal masks, training", "[attention][nn]") {
  const Device d = test::device();
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 16;
  o.seed = 6;
  nn::TransformerEncoderLayer enc(8, 2, o);
  CHECK(names(enc) == std::vector<std::string>{
                          "self_attn.in_proj_weight 24,8,", "self_attn.in_proj_bias 24,", "self_attn.out_proj.weight 8,8,",
                          "self_attn.out_proj.bias 8,", "linear1.weight 16,8,", "linear1.bias 16,", "linear2.weight 8,16,",
                          "linear2.bias 8,", "norm1.weight 8,", "norm1.bias 8,", "norm2.weight 8,", "norm2.bias 8,"});
  std::vector<std::string> children;
  for (const auto& [name, child] : enc.named_children()) children.push_back(name);
  CHECK(children == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"});
  enc.to(d);
  enc.eval();
  const Tensor x = randn({5, 2, 8}, d, 1);
  const Tensor y = enc(x);
  CHECK(y.shape() == Shape{5, 2, 8});
  // Post-norm: every output step is normalised (mean 0 over the features, LayerNorm's weight 1).
  test::require_allclose<float>(mean(y, -1), std::vector<double>(10, 0.0), 0, 1e-5);
  // is_causal: step i does not depend on later steps; src_mask with is_causal adds to it.
  const Tensor yc = enc.forward(x, {}, {}, true);
  const Tensor x2 = x * 1.0;  // a copy
  x2.select(0, 4).copy_from(randn({2, 8}, d, 9));
  test::require_allclose<float>(enc.forward(x2, {}, {}, true).narrow(0, 0, 4), test::host_doubles<float>(yc.narrow(0, 0, 4)), 1e-5, 1e-6);
  const Tensor causal = gt(arange(0, 5, 1, d).reshape({1, 5}) - arange(0, 5, 1, d).reshape({5, 1}), 0.0);
  test::require_allclose<float>(enc.forward(x, causal), test::host_doubles<float>(yc), 1e-5, 1e-6);
  test::require_allclose<float>(enc.forward(x, causal, {}, true), test::host_doubles<float>(yc), 1e-5, 1e-6);
  // A src_mask blocking key 0 for the later queries, which the causal mask allows: with is_causal
  // both apply.
  const Tensor later = gt(arange(0, 5, 1, d).reshape({5, 1}) * (1.0 - arange(0, 5, 1, d).reshape({1, 5}).clamp(0.0, 1.0)), 0.0);
  const Tensor both = gt(causal.astype(float32) + later.astype(float32), 0.0);
  const Tensor y_both = enc.forward(x, later, {}, true);
  test::require_allclose<float>(y_both, test::host_doubles<float>(enc.forward(x, both)), 1e-5, 1e-6);
  CHECK(max(abs(y_both - yc)).item<float>() > 1e-3);
  CHECK_THROWS_AS(enc.forward(x, zeros({1, 5}, d, boolean), {}, true), ShapeError);
  // Every part its own seed: no two children start alike or draw the same dropout masks.
  Tensor out_proj_weight, linear1_weight;
  for (const auto& p : enc.named_parameters()) {
    if (p.name == "self_attn.out_proj.weight") out_proj_weight = p.slot->value;
    if (p.name == "linear1.weight") linear1_weight = p.slot->value;
  }
  CHECK(max(abs(linear1_weight.narrow(0, 0, 8) - out_proj_weight)).item<float>() > 0.1);
  std::vector<std::uint64_t> dropout_seeds;
  for (const auto& [name, child] : enc.named_children())
    if (const auto* dropout = dynamic_cast<const nn::Dropout*>(child.get())) dropout_seeds.push_back(dropout->seed());
  REQUIRE(dropout_seeds.size() == 3);
  CHECK(dropout_seeds[0] != dropout_seeds[1]);
  CHECK(dropout_seeds[1] != dropout_seeds[2]);
  CHECK(dropout_seeds[0] != dropout_seeds[2]);
  // Pre-norm and gelu, batch_first: a different layer with the same parameters' shapes.
  o.norm_first = true;
  o.activation = "gelu";
  o.batch_first = true;
  nn::TransformerEncoderLayer pre(8, 2, o);
  pre.to(d);
  pre.load_state_dict(enc.state_dict());
  pre.eval();
  const Tensor yp = pre(x.transpose(0, 1));
  CHECK(yp.shape() == Shape{2, 5, 8});
  CHECK(max(abs(yp.transpose(0, 1) - y)).item<float>() > 1e-3);
  o.activation = "tanh";
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(8, 2, o), ContainsSubstring("activation"));
  // Training mode: dropout changes the output between calls, and gradients reach every parameter.
  enc.train();
  const Tensor t1 = enc(x), t2 = enc(x);
  CHECK(max(abs(t1 - t2)).item<float>() > 0);
  sum(t1 * t1).backward();
  for (const auto& p : enc.named_parameters()) {
    INFO(p.name);
    CHECK(max(abs(p.slot->value.grad())).item<float>() > 0);
  }
}
