// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Attention, softmax(Q K^T scale + bias) V, as kten's differentiable ops: two batched GEMMs around a
// row softmax, so autograd derives the backward and every device runs it (the GEMMs bound it; the
// (L, S) scores make one round trip through memory). The bias carries the masks.
// scaled_dot_product_attention, nn::MultiheadAttention (src/nn/attention.cpp) and ONNX's Attention
// (opset 23) all go through here.
#include <cmath>
#include <limits>

#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "attention.hpp"
#include "core/checks.hpp"
#include "dropout.hpp"
#include "elementwise.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

Shape batch_axes(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }
}  // namespace

Tensor attention_bias(const char* op, const Tensor& mask, const Tensor& query, bool true_blocks) {
  check_defined(mask, op);
  check_same_device(op, mask.device(), query.device());
  if (mask.dtype() == boolean) {
    const Tensor blocked = full({}, -kInf, query.device(), query.dtype());
    return true_blocks ? where(mask, blocked, 0.0) : where(mask, 0.0, blocked);
  }
  if (mask.dtype() != query.dtype())
    fail<DTypeError>(op, "a mask is boolean or of the query's dtype (", query.dtype(), "), not ", mask.dtype());
  return mask;
}

Tensor causal_bias(std::int64_t queries, std::int64_t keys, std::int64_t offset, const Tensor& query) {
  const Tensor after = arange(0, static_cast<double>(keys), 1, query.device(), float64).reshape({1, keys}) -
                       arange(0, static_cast<double>(queries), 1, query.device(), float64).reshape({queries, 1});
  return where(le(after, static_cast<double>(offset)), 0.0, full({}, -kInf, query.device(), query.dtype()));
}

std::pair<Tensor, Tensor> attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& bias, double scale, double dropout_p, std::uint64_t seed,
                                    std::uint64_t call) {
  check_compatible(op, q, k);
  check_compatible(op, q, v);
  if (!is_floating(q.dtype())) fail<DTypeError>(op, "query, key and value are float32 or float64, not ", q.dtype());
  if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 || q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    fail<ShapeError>(op, "expects query (..., L, E), key (..., S, E) and value (..., S, Ev), got ", q.shape(), ", ",
                     k.shape(), " and ", v.shape());
  Shape scores = broadcast_shapes(op, batch_axes(q), broadcast_shapes(op, batch_axes(k), batch_axes(v)).shape).shape;
  scores.push_back(q.size(-2));
  scores.push_back(k.size(-2));
  if (bias.defined() && broadcast_shapes(op, bias.shape(), scores).shape != scores)
    fail<ShapeError>(op, "the mask ", bias.shape(), " does not broadcast to the scores ", scores);
  if (!(dropout_p >= 0 && dropout_p <= 1)) fail(op, "dropout_p must lie in [0, 1], got ", dropout_p);
  // The scale on Q (L x E), not on the scores (L x S), as PyTorch's MultiheadAttention.
  Tensor s = matmul(q * scale, k.transpose(-2, -1));
  if (bias.defined()) s = s + bias;
  Tensor weights = softmax(s, -1);
  if (dropout_p == 1) weights = weights * 0.0;  // zeros that keep a NaN row NaN, as dropout's multiply
  else if (dropout_p > 0) weights = dropout(weights, dropout_p, seed, call);
  return {matmul(weights, v), weights};
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale,
                                    std::optional<std::uint64_t> seed) {
  constexpr const char* op = "kten::scaled_dot_product_attention";
  detail::check_defined(query, op);
  detail::check_defined(key, op);
  if (!is_floating(query.dtype()))
    detail::fail<DTypeError>(op, "query, key and value are float32 or float64, not ", query.dtype());
  if (query.ndim() < 2 || key.ndim() < 2)
    detail::fail<ShapeError>(op, "query and key must be (..., L, E) and (..., S, E), got ", query.shape(), " and ", key.shape());
  if (is_causal && attn_mask.defined())
    detail::fail(op, "give attn_mask or is_causal, not both (PyTorch's rule): fold the causal mask into attn_mask");
  const Tensor bias = attn_mask.defined() ? detail::attention_bias(op, attn_mask, query, false)
                      : is_causal         ? detail::causal_bias(query.size(-2), key.size(-2), 0, query)
                                          : Tensor();
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  const std::uint64_t mask_seed = dropout_p > 0 && dropout_p < 1 ? (seed ? *seed : nn::next_seed()) : 0;
  return detail::attention(op, query, key, value, bias, s, dropout_p, mask_seed, 0).first;
}

}  // namespace kten

namespace kten::ops {

namespace {

using kten::detail::fail;

// ONNX's Attention (opset 23): softmax(Q K^T scale + bias) V over (B, heads, S, D) inputs or (B, S,
// heads x D) ones with q_num_heads and kv_num_heads. The bias is attn_mask (a float one added; a
// boolean one true where attention is allowed, padded with "not allowed" up to the keys' length)
// plus, with is_causal, -inf where key j > query i + the past's length; softcap follows it (so a
// masked score becomes -softcap, as ONNX's reference computes). past_key and past_value go before
// K and V (the present_key and present_value outputs); fewer K/V heads than Q heads are repeated
// (grouped-query attention). The fourth output is the scores at qk_matmul_output_mode 0 (Q K^T
// scale), 1 (+ bias), 2 (softcapped) or 3 (the softmax).
void check_attention(const OnnxNode& n) {
  check_flag(n, "is_causal", 0);
  const std::int64_t mode = node_int(n, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) onnx_invalid(n, "qk_matmul_output_mode " + std::to_string(mode) + " (0 to 3)");
}

std::vector<Tensor> attention_op(OnnxCall& c) {
  Tensor q = c.at(0), k = c.at(1), v = c.at(2);
  const bool flat = q.ndim() == 3;
  if ((q.ndim() != 3 && q.ndim() != 4) || k.ndim() != q.ndim() || v.ndim() != q.ndim())
    fail<ShapeError>("onnx", c.where(), ": Q, K and V must all be 3-D or 4-D, not ", q.shape(), ", ", k.shape(), " and ", v.shape());
  const auto split_heads = [&](const Tensor& t, const char* attr) {  // (B, S, h D) -> (B, h, S, D)
    const std::int64_t h = c.attr_int(attr, 0);
    if (h <= 0 || t.size(2) % h != 0)
      fail<ShapeError>("onnx", c.where(), ": ", attr, " ", h, " does not divide the hidden size of ", t.shape());
    return t.reshape({t.size(0), t.size(1), h, t.size(2) / h}).permute({0, 2, 1, 3});
  };
  if (flat) {
    q = split_heads(q, "q_num_heads");
    k = split_heads(k, "kv_num_heads");
    v = split_heads(v, "kv_num_heads");
  }
  if (c.has(4) != c.has(5)) fail<ShapeError>("onnx", c.where(), ": past_key and past_value come together");
  const std::int64_t past = c.has(4) ? c.at(4).size(2) : 0;
  if (c.has(4)) {
    k = cat({c.at(4), k}, 2);
    v = cat({c.at(5), v}, 2);
  }
  const Tensor present_key = k, present_value = v;
  const std::int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2);
  if (k.size(1) != v.size(1) || k.size(1) == 0 || heads % k.size(1) != 0 || q.size(3) != k.size(3) || keys != v.size(2))
    fail<ShapeError>("onnx", c.where(), ": Q ", q.shape(), ", K ", k.shape(), " and V ", v.shape(), " do not make heads that match");
  if (k.size(1) != heads) {  // each K/V head serves heads / K's heads query heads in a row
    const std::int64_t group = heads / k.size(1);
    k = k.unsqueeze(2).expand({batch, k.size(1), group, keys, k.size(3)}).reshape({batch, heads, keys, k.size(3)});
    v = v.unsqueeze(2).expand({batch, v.size(1), group, keys, v.size(3)}).reshape({batch, heads, keys, v.size(3)});
  }
  const double scale = c.attr("scale") ? c.attr_real("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor qk = matmul(q, k.transpose(-2, -1)) * scale;
  Tensor scores = qk;
  if (c.has(3)) {
    Tensor mask = c.at(3);
    const bool allow = mask.dtype() == boolean;
    if (!allow && mask.dtype() != q.dtype())
      fail<DTypeError>("onnx", c.where(), ": attn_mask must be boolean or Q's dtype, not ", mask.dtype());
    if (mask.ndim() == 0 || mask.size(-1) > keys)
      fail<ShapeError>("onnx", c.where(), ": attn_mask ", mask.shape(), " is longer than the ", keys, " keys");
    if (mask.size(-1) < keys) {  // the keys past the mask are not attended to
      Shape pad = mask.shape();
      pad.back() = keys - mask.size(-1);
      mask = cat({mask, allow ? zeros(pad, mask.device(), boolean) : full(pad, -detail::kInf, mask.device(), mask.dtype())}, -1);
    }
    scores = scores + detail::attention_bias("onnx Attention", mask, q, false);
  }
  if (c.attr_int("is_causal", 0) != 0) scores = scores + detail::causal_bias(queries, keys, past, q);
  const Tensor biased = scores;
  if (const double cap = c.attr_real("softcap", 0.0); cap > 0) scores = tanh(scores / cap) * cap;
  const Tensor weights = registered("softmax", {scores}, OpAttrs::of_ints({-1}));
  Tensor y = matmul(weights, v);
  if (flat) y = y.permute({0, 2, 1, 3}).reshape({batch, queries, heads * v.size(3)});
  const std::int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
  return {y, present_key, present_value, mode == 0 ? qk : mode == 1 ? biased : mode == 2 ? scores : weights};
}

}  // namespace

// The registry's row of this family (registry.hpp): reals {dropout_p}, ints {is_causal}; made of
// kten's ops, which record themselves (their backwards are its gradient, their ONNX forms its
// export).
std::vector<OpDef> attention_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"scaled_dot_product_attention",
       "scaled_dot_product_attention(Tensor,Tensor,Tensor,Tensor,double,bool,optional<double>,optional<uint64_t>)", 3,
       {Domain::real}, DTypes::floating, true, [](X x, A a) {
         return scaled_dot_product_attention(x[0], x[1], x[2], {}, a.reals.empty() ? 0.0 : a.reals[0],
                                             !a.ints.empty() && a.ints[0] != 0);
       }},
  };
  set_onnx(rows, "scaled_dot_product_attention",
           {{"Attention", 23, kOnnxLastOpset, 3, 6, 4, true, attention_op, check_attention, 0}});
  return rows;
}

}  // namespace kten::ops
