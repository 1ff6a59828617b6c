// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: attention's parts, shared by scaled_dot_product_attention, nn::MultiheadAttention and
// ONNX's Attention (attention.cpp).

#include <cstdint>
#include <utility>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief The additive bias of an attention mask: a float one (query's dtype and device, else a
/// kten::Error naming `op`) as it is; a boolean one 0 where attention is allowed and -inf where it
/// is blocked, blocked where the mask is true when `true_blocks` (nn::MultiheadAttention's masks),
/// where it is false otherwise (scaled_dot_product_attention's and ONNX's).
Tensor attention_bias(const char* op, const Tensor& mask, const Tensor& query, bool true_blocks);

/// \brief The (queries, keys) causal bias of query's dtype and device: 0 where key j <= query i +
/// `offset` (the keys a cache holds before the queries), -inf after.
Tensor causal_bias(std::int64_t queries, std::int64_t keys, std::int64_t offset, const Tensor& query);

/// \brief softmax(q k^T scale + bias) v and the attention weights (after dropout), q (..., L, E),
/// k (..., S, E), v (..., S, Ev), bias undefined or broadcast to (..., L, S); the weights dropped
/// with probability dropout_p (mask number `call` of `seed`, detail::dropout's). Checks the shapes,
/// dtypes and devices, naming `op`.
std::pair<Tensor, Tensor> attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& bias, double scale, double dropout_p, std::uint64_t seed,
                                    std::uint64_t call);

}  // namespace kten::detail
