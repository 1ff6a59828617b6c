#pragma once
// Internal: the layers' and optimisers' own kernels, one fused kernel per call.

#include <cstdint>

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

/// \brief t *= factor in place, `factor` a 0-d tensor on t's device with t's dtype (read there: no
/// host synchronisation).
void scale_in_place(const Tensor& t, const Tensor& factor);

/// \brief x with each element multiplied by 0 (probability p) or 1 / (1 - p), recorded for
/// autograd (the gradient is g masked the same way): nn::Dropout's mask number `call` of `seed`.
/// Element i of the mask depends on (seed, call, i) alone: the Philox-4x32-10 block of counter
/// {low32(i), high32(i), 2, 0} and key seed + call * 0x9E3779B97F4A7C15 (low word first) keeps
/// the element when (word 0 >> 8) * 2^-24 >= p.
Tensor dropout(const Tensor& x, double p, std::uint64_t seed, std::uint64_t call);

/// \brief nn::LayerNorm's forward over the last axis of x (weight and bias of that extent and x's
/// dtype and device, checked by the caller), recorded for autograd as one node: y = (x - mean) /
/// sqrt(var + eps) * weight + bias, var biased, by the corrected two-pass algorithm.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

}  // namespace kten::detail
