// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: dropout as one kernel and one autograd node, for nn::Dropout, the recurrent layers,
// attention and ONNX's Dropout.

#include <cstdint>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief x with each element multiplied by 0 (probability p) or 1 / (1 - p), recorded for
/// autograd (the gradient is g masked the same way): nn::Dropout's mask number `call` of `seed`.
/// Element i of the mask depends on (seed, call, i) alone: the Philox-4x32-10 block of counter
/// {low32(i), high32(i), 2, 0} and key seed + call * 0x9E3779B97F4A7C15 (low word first) keeps
/// the element when (word 0 >> 8) * 2^-24 >= p.
Tensor dropout(const Tensor& x, double p, std::uint64_t seed, std::uint64_t call);

}  // namespace kten::detail
