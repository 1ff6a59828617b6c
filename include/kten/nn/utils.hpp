// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/utils.hpp
/// \brief Gradient clipping (torch.nn.utils.clip_grad_norm_), on the device.

#include <kten/nn/module.hpp>

namespace kten::nn {

/// \brief Scales the gradients of `module`'s float parameters in place so that their total norm
/// (all gradients together, as one vector) is at most `max_norm`: each is multiplied by
/// min(1, max_norm / (total + 1e-6)), PyTorch 1.13's formula, computed on the device (no host read:
/// the coefficient never leaves it). Returns the total norm before clipping, a 0-d tensor on the
/// parameters' device in their dtype (float64 when they mix float32 and float64; a float32 zero
/// when there is no gradient). `norm_type` is any p > 0 (2: Euclidean) or infinity (the largest
/// |g|). A NaN total makes every gradient NaN, as PyTorch without error_if_nonfinite. kten::Error
/// for a NaN or negative max_norm, or a norm_type that is NaN or <= 0.
Tensor clip_grad_norm_(Module& module, double max_norm, double norm_type = 2.0);

}  // namespace kten::nn
