// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/attention.hpp
/// \brief Attention layers: nn::MultiheadAttention and nn::TransformerEncoderLayer, PyTorch's
/// parameters, names, shapes and masks.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include <kten/nn/layers.hpp>
#include <kten/nn/module.hpp>

namespace kten::nn {

/// \brief torch.nn.MultiheadAttention's options after embed_dim and num_heads (PyTorch's defaults).
struct MultiheadAttentionOptions {
  double dropout = 0.0;               ///< \brief dropout on the attention weights, in training mode
  bool bias = true;                   ///< \brief learn in_proj_bias and out_proj.bias
  bool batch_first = false;           ///< \brief inputs and output (N, L, E) instead of (L, N, E)
  DType dtype = DType::float32;       ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;  ///< \brief initialisation and dropout seed; default: next_seed()
};

/// \brief torch.nn.MultiheadAttention: the query, key and value projected by in_proj_weight's three
/// (E, E) blocks (and in_proj_bias'), split into num_heads heads of E / num_heads features,
/// scaled_dot_product_attention per head, the heads joined and projected by out_proj.
///
/// Parameters (PyTorch's names, order and initialisation): "in_proj_weight" (3E, E), Xavier-uniform;
/// "in_proj_bias" (3E), zeros; the child "out_proj", a Linear(E, E) whose bias starts at zero.
/// Inputs are (L, N, E) ((N, L, E) with batch_first) or unbatched (L, E); key and value have S
/// steps. Masks as PyTorch's: key_padding_mask (N, S) (unbatched: (S)), attn_mask (L, S) or
/// (N x num_heads, L, S); a boolean mask is true where attention is blocked, a float one (the
/// parameters' dtype) is added to the scores. A query with every key blocked gets NaN.
class MultiheadAttention : public Module {
 public:
  /// \brief embed_dim features split into num_heads heads; kten::Error when num_heads does not
  /// divide embed_dim, for sizes below 1, dropout outside [0, 1] or an integer dtype.
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options = {});

  /// \brief Self-attention, forward(x, x, x)'s output (the Module call, which onnx::save traces).
  Tensor forward(const Tensor& x) override;
  /// \brief The attention output (L, N, E) and, with need_weights, the weights (N, L, S), averaged
  /// over the heads (or (N, num_heads, L, S) without average_attn_weights; unbatched: no N), after
  /// dropout, as PyTorch returns them; without need_weights the second is undefined.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true);
  std::string name() const override { return "MultiheadAttention"; }

  /// \brief Features of the inputs and the output.
  std::int64_t embed_dim() const { return embed_dim_; }
  /// \brief Heads, each of embed_dim / num_heads features.
  std::int64_t num_heads() const { return num_heads_; }
  /// \brief The options the layer was made with (its seed resolved).
  const MultiheadAttentionOptions& options() const { return options_; }
  /// \brief The (3E, E) projections of query, key and value, stacked.
  const Tensor& in_proj_weight() const { return in_proj_weight_->value; }
  /// \brief Their (3E) biases; undefined without bias.
  const Tensor& in_proj_bias() const;
  /// \brief The output projection (child "out_proj").
  Linear& out_proj() { return *out_proj_; }

 private:
  std::int64_t embed_dim_, num_heads_;
  MultiheadAttentionOptions options_;
  std::uint64_t dropout_calls_ = 0;
  std::shared_ptr<Parameter> in_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

/// \brief torch.nn.TransformerEncoderLayer's options after d_model and nhead (PyTorch's defaults).
struct TransformerEncoderLayerOptions {
  std::int64_t dim_feedforward = 2048;  ///< \brief width of the feed-forward block's hidden layer
  double dropout = 0.1;                 ///< \brief every dropout of the layer, in training mode
  std::string activation = "relu";      ///< \brief the feed-forward block's activation: "relu" or "gelu"
  double layer_norm_eps = 1e-5;         ///< \brief the LayerNorms' epsilon
  bool batch_first = false;             ///< \brief inputs and output (N, L, E) instead of (L, N, E)
  bool norm_first = false;              ///< \brief LayerNorm before each block (pre-norm), not after
  DType dtype = DType::float32;         ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;    ///< \brief initialisation and dropout seed; default: next_seed()
};

/// \brief torch.nn.TransformerEncoderLayer: self-attention then a feed-forward block, each with a
/// residual connection and a LayerNorm. Post-norm (PyTorch's default): x = norm1(x + sa(x)),
/// x = norm2(x + ff(x)); norm_first: x = x + sa(norm1(x)), x = x + ff(norm2(x)); sa(x) =
/// dropout1(self_attn(x, x, x)), ff(x) = dropout2(linear2(dropout(activation(linear1(x))))).
/// Children (PyTorch's names): self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
/// dropout2.
class TransformerEncoderLayer : public Module {
 public:
  /// \brief A layer of d_model features and nhead heads; kten::Error for an unknown activation and
  /// whatever MultiheadAttention, Linear, LayerNorm and Dropout refuse.
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerOptions options = {});

  /// \brief forward(src) without masks (the Module call).
  Tensor forward(const Tensor& src) override;
  /// \brief The layer on src (L, N, E) ((N, L, E) with batch_first; unbatched (L, E)) with
  /// MultiheadAttention's attn_mask and key_padding_mask; is_causal adds the causal mask (query i
  /// attends to keys 0..i) to src_mask, or is it without one (where PyTorch, for which is_causal is
  /// a hint about src_mask, wants the mask).
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  std::string name() const override { return "TransformerEncoderLayer"; }

  /// \brief The options the layer was made with (its seed resolved).
  const TransformerEncoderLayerOptions& options() const { return options_; }
  /// \brief The self-attention block (child "self_attn").
  MultiheadAttention& self_attn() { return *self_attn_; }

 private:
  TransformerEncoderLayerOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

}  // namespace kten::nn
