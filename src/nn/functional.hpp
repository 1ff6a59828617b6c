// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the layers' own fused ops, each one kernel (and one autograd node) per call, used by
// the nn modules and by the ONNX importer's forms of the same layers.

#include <cstdint>
#include <utility>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief nn::LayerNorm's forward over the last axis of x (weight and bias of that extent and x's
/// dtype and device, checked by the caller), recorded for autograd as one node: y = (x - mean) /
/// sqrt(var + eps) * weight + bias, var biased, by the corrected two-pass algorithm.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

/// \brief One direction of one LSTM (`lstm`; `state` h and c) or GRU (`state` h) layer over x (L,
/// N, in), each state (N, H): the outputs (L, N, H) and the final state. Weights and biases in
/// PyTorch's gate order (i, f, g, o; r, z, n), a bias undefined when absent; the steps taken
/// backwards when `reverse`. nn::LSTM's and nn::GRU's recurrence, and ONNX's LSTM and GRU.
std::pair<Tensor, std::vector<Tensor>> recurrent_direction(bool lstm, const Tensor& x, std::vector<Tensor> state,
                                                           const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                                           const Tensor& b_hh, bool reverse);

}  // namespace kten::detail
