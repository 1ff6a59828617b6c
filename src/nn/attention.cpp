// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// nn::MultiheadAttention and nn::TransformerEncoderLayer as PyTorch computes them, written with
// kten's differentiable ops (GEMMs for the projections, ops/attention.cpp's attention per head), so
// that autograd derives the backward and every device runs them.
#include <cmath>
#include <string>
#include <utility>

#include <kten/nn/attention.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "core/checks.hpp"
#include "ops/attention.hpp"
#include "ops/linalg.hpp"

namespace kten::nn {

namespace {

constexpr const char* kMha = "MultiheadAttention";

// Part k's own seed from a layer's seed (SplitMix64's finaliser over seed and k): a sum seed + k C
// would collide with dropout's keys (seed + call C) and with a child's own sub-seeds, giving two
// children the same initial weights or two dropouts the same masks.
std::uint64_t stream(std::uint64_t seed, std::uint64_t k) {
  std::uint64_t z = seed ^ (0x9E3779B97F4A7C15ull * (k + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// x (..., in) through a Linear layer, which takes (batch, features).
Tensor linear_on_last_axis(Linear& layer, const Tensor& x) {
  Shape out = x.shape();
  out.back() = layer.out_features();
  return layer(x.reshape({-1, x.size(-1)})).reshape(out);
}

// (L, N, E) (or batch_first's (N, L, E), or unbatched (L, E)) as (N, L, E).
Tensor batch_major(const Tensor& x, bool batched, bool batch_first) {
  return !batched ? x.unsqueeze(0) : batch_first ? x : x.transpose(0, 1);
}
Tensor from_batch_major(const Tensor& x, bool batched, bool batch_first) {
  return !batched ? x.squeeze(0) : batch_first ? x : x.transpose(0, 1);
}

}  // namespace

MultiheadAttention::MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options)
    : embed_dim_(embed_dim), num_heads_(num_heads), options_(options) {
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0)
    detail::fail<ShapeError>(kMha, "embed_dim ", embed_dim, " must be a positive multiple of num_heads ", num_heads);
  if (!(options.dropout >= 0 && options.dropout <= 1))
    detail::fail(kMha, "dropout must lie in [0, 1], got ", options.dropout);
  if (!is_floating(options.dtype))
    detail::fail<DTypeError>(kMha, "the parameters are float32 or float64, not ", options.dtype);
  if (!options_.seed) options_.seed = next_seed();
  const std::uint64_t seed = *options_.seed;
  // PyTorch's _reset_parameters: Xavier-uniform projections, zero biases.
  const double bound = std::sqrt(6.0 / static_cast<double>(4 * embed_dim));
  const Shape w{3 * embed_dim, embed_dim};
  in_proj_weight_ = register_parameter(
      "in_proj_weight", Parameter{uniform(w, -bound, bound, device(), stream(seed, 0), options.dtype), {}, w, options.dtype});
  if (options.bias)
    in_proj_bias_ = register_parameter("in_proj_bias", Parameter{zeros({3 * embed_dim}, device(), options.dtype), {},
                                                                 {3 * embed_dim}, options.dtype});
  out_proj_ = register_module("out_proj", Linear(embed_dim, embed_dim, {options.bias, options.dtype, stream(seed, 1)}));
  if (options.bias) {
    NoGradGuard no_grad;
    out_proj_->bias().copy_from(zeros({embed_dim}, device(), options.dtype));
  }
}

const Tensor& MultiheadAttention::in_proj_bias() const {
  static const Tensor none;
  return in_proj_bias_ ? in_proj_bias_->value : none;
}

Tensor MultiheadAttention::forward(const Tensor& x) { return std::get<0>(forward(x, x, x, {}, false)); }

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const Tensor& key_padding_mask, bool need_weights,
                                                       const Tensor& attn_mask, bool average_attn_weights) {
  for (const Tensor* t : {&query, &key, &value}) {
    detail::check_defined(*t, kMha);
    detail::check_same_device(kMha, t->device(), device());
  }
  const DType dtype = in_proj_weight_->value.dtype();  // to(float64) changes it
  for (const Tensor* t : {&query, &key, &value})
    if (t->dtype() != dtype)
      detail::fail<DTypeError>(kMha, "the inputs are ", t->dtype(), " but the parameters are ", dtype,
                               "; convert with .astype(...)");
  const bool batched = query.ndim() == 3;
  const char* layout = options_.batch_first ? "(N, L, E)" : "(L, N, E)";
  if ((query.ndim() != 2 && query.ndim() != 3) || key.ndim() != query.ndim() || value.ndim() != query.ndim() ||
      query.size(-1) != embed_dim_ || key.size(-1) != embed_dim_ || value.size(-1) != embed_dim_)
    detail::fail<ShapeError>(kMha, "expects query, key and value ", layout, " or unbatched (L, E) with E = ", embed_dim_,
                             ", got ", query.shape(), ", ", key.shape(), " and ", value.shape());
  const Tensor q = batch_major(query, batched, options_.batch_first);
  const Tensor k = batch_major(key, batched, options_.batch_first);
  const Tensor v = batch_major(value, batched, options_.batch_first);
  const std::int64_t n = q.size(0), l = q.size(1), s = k.size(1), h = num_heads_, d = embed_dim_ / num_heads_;
  if (k.size(0) != n || v.size(0) != n || v.size(1) != s)
    detail::fail<ShapeError>(kMha, "query ", query.shape(), ", key ", key.shape(), " and value ", value.shape(),
                             " must share the batch, and key and value the length");
  // Each projection by its block of in_proj_weight, as (N, heads, steps, d).
  const auto project = [&](const Tensor& x, std::int64_t block) {
    const Tensor w = in_proj_weight_->value.narrow(0, block * embed_dim_, embed_dim_);
    const Tensor b = in_proj_bias_ ? in_proj_bias_->value.narrow(0, block * embed_dim_, embed_dim_) : Tensor();
    const std::int64_t steps = x.size(1);
    return detail::linear(x.reshape({n * steps, embed_dim_}), w, b.defined() ? &b : nullptr)
        .reshape({n, steps, h, d})
        .transpose(1, 2);
  };
  Tensor bias;
  if (attn_mask.defined()) {
    const bool per_head = attn_mask.ndim() == 3;
    const Shape want = per_head ? Shape{batched ? n * h : h, l, s} : Shape{l, s};
    if (attn_mask.shape() != want)
      detail::fail<ShapeError>(kMha, "attn_mask must be (L, S) or (", batched ? "N x num_heads" : "num_heads",
                               ", L, S) = ", want, ", got ", attn_mask.shape());
    bias = detail::attention_bias(kMha, attn_mask, q, true);
    if (per_head) bias = bias.reshape({n, h, l, s});
  }
  if (key_padding_mask.defined()) {
    const Shape want = batched ? Shape{n, s} : Shape{s};
    if (key_padding_mask.shape() != want)
      detail::fail<ShapeError>(kMha, "key_padding_mask must be ", want, ", got ", key_padding_mask.shape());
    const Tensor padding = detail::attention_bias(kMha, key_padding_mask, q, true).reshape({n, 1, 1, s});
    bias = bias.defined() ? bias + padding : padding;
  }
  const double p = is_training() ? options_.dropout : 0.0;
  auto [heads, weights] = detail::attention(kMha, project(q, 0), project(k, 1), project(v, 2), bias,
                                            1.0 / std::sqrt(static_cast<double>(d)), p, stream(*options_.seed, 2),
                                            p > 0 ? dropout_calls_++ : 0);
  const Tensor joined = heads.transpose(1, 2).reshape({n * l, embed_dim_});
  const Tensor out = (*out_proj_)(joined).reshape({n, l, embed_dim_});
  Tensor w;
  if (need_weights) {
    w = average_attn_weights ? mean(weights, 1) : weights;
    if (!batched) w = w.squeeze(0);
  }
  return {from_batch_major(out, batched, options_.batch_first), w};
}

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                                                 TransformerEncoderLayerOptions options)
    : options_(std::move(options)) {
  constexpr const char* op = "TransformerEncoderLayer";
  if (options_.activation != "relu" && options_.activation != "gelu")
    detail::fail(op, "activation must be \"relu\" or \"gelu\", got \"", options_.activation, "\"");
  if (!(options_.dropout >= 0 && options_.dropout < 1))
    detail::fail(op, "dropout must lie in [0, 1), got ", options_.dropout);
  if (!options_.seed) options_.seed = next_seed();
  const std::uint64_t seed = *options_.seed;
  const DType dtype = options_.dtype;
  MultiheadAttentionOptions attention;
  attention.dropout = options_.dropout;
  attention.batch_first = options_.batch_first;
  attention.dtype = dtype;
  attention.seed = stream(seed, 0);
  // PyTorch's registration order, so named_parameters() and state_dict() list what PyTorch's do.
  self_attn_ = register_module("self_attn", MultiheadAttention(d_model, nhead, attention));
  linear1_ = register_module("linear1", Linear(d_model, options_.dim_feedforward, {true, dtype, stream(seed, 1)}));
  dropout_ = register_module("dropout", Dropout(options_.dropout, stream(seed, 2)));
  linear2_ = register_module("linear2", Linear(options_.dim_feedforward, d_model, {true, dtype, stream(seed, 3)}));
  norm1_ = register_module("norm1", LayerNorm(d_model, options_.layer_norm_eps, dtype));
  norm2_ = register_module("norm2", LayerNorm(d_model, options_.layer_norm_eps, dtype));
  dropout1_ = register_module("dropout1", Dropout(options_.dropout, stream(seed, 4)));
  dropout2_ = register_module("dropout2", Dropout(options_.dropout, stream(seed, 5)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, Tensor()); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  constexpr const char* op = "TransformerEncoderLayer";
  detail::check_defined(src, op);
  Tensor mask = src_mask;
  if (is_causal) {
    if (src.ndim() < 2) detail::fail<ShapeError>(op, "expects src (L, N, E), (N, L, E) or (L, E), got ", src.shape());
    const std::int64_t steps = src.ndim() == 3 && options_.batch_first ? src.size(1) : src.size(0);
    const Tensor causal = detail::causal_bias(steps, steps, 0, src);
    // The mask's own shape first: broadcast against (L, L), a (1, L) one would pass unchecked.
    if (mask.defined() && (mask.ndim() < 2 || mask.ndim() > 3 || mask.size(-1) != steps || mask.size(-2) != steps))
      detail::fail<ShapeError>(op, "src_mask must be (L, L) or (N x nhead, L, L) with L = ", steps, ", got ", mask.shape());
    mask = mask.defined() ? detail::attention_bias(op, mask, src, true) + causal : causal;
  }
  const auto sa = [&](const Tensor& x) {
    return (*dropout1_)(std::get<0>(self_attn_->forward(x, x, x, src_key_padding_mask, false, mask)));
  };
  const auto ff = [&](const Tensor& x) {
    const Tensor hidden = linear_on_last_axis(*linear1_, x);
    const Tensor active = options_.activation == "gelu" ? gelu(hidden) : relu(hidden);
    return (*dropout2_)(linear_on_last_axis(*linear2_, (*dropout_)(active)));
  };
  Tensor x = src;
  if (options_.norm_first) {
    x = x + sa((*norm1_)(x));
    return x + ff((*norm2_)(x));
  }
  x = (*norm1_)(x + sa(x));
  return (*norm2_)(x + ff(x));
}

}  // namespace kten::nn
