// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the optimisers' own kernels, one fused kernel per step.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief One SGD step's hyperparameters (torch.optim.SGD's names), converted to the parameter's
/// dtype in the kernel as PyTorch converts its Python floats.
struct SgdStep {
  double lr;
  double momentum;      ///< \brief 0: no momentum buffer
  double dampening;
  double weight_decay;  ///< \brief 0: the parameter is not read into the gradient (inf * 0 would be NaN)
  bool nesterov;
  bool fresh;           ///< \brief the momentum buffer is new: it takes the gradient (PyTorch's clone)
};

/// \brief torch.optim.SGD's update of p in place: d = g + weight_decay p; with momentum, b = d
/// (fresh) or momentum b + (1 - dampening) d, then d = d + momentum b (Nesterov) or b; p -= lr d.
/// `momentum_buffer` is undefined when momentum is 0.
void sgd_update(const Tensor& p, const Tensor& g, const Tensor& momentum_buffer, const SgdStep& step);

/// \brief One Adam step's hyperparameters, bias corrections computed on the host in double as PyTorch.
struct AdamStep {
  double step_size;              ///< \brief lr / (1 - beta1^t)
  double bias_correction2_sqrt;  ///< \brief sqrt(1 - beta2^t)
  double beta1;
  double beta2;
  double eps;
  double weight_decay;  ///< \brief Adam's L2 penalty added to the gradient (0 for AdamW)
  double decay;         ///< \brief AdamW's factor 1 - lr * weight_decay on p first (1 for Adam)
  bool fresh;           ///< \brief exp_avg and exp_avg_sq are new: read as zeros
};

/// \brief torch.optim.Adam's / AdamW's update of p, exp_avg and exp_avg_sq in place, one kernel.
void adam_update(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& step);

}  // namespace kten::detail
