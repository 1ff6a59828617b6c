// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Gradient clipping with kten's own operations: every value stays on the device.
#include <cmath>
#include <limits>

#include <kten/nn/utils.hpp>
#include <kten/ops.hpp>

#include "core/fail.hpp"
#include "ops/elementwise.hpp"

namespace kten::nn {

namespace {
// PyTorch's torch.norm(g, p) of one gradient: a 0-d tensor on its device.
Tensor p_norm(const Tensor& g, double p) {
  if (std::isinf(p)) return max(abs(g));
  if (p == 2) return norm(g);
  return pow(sum(pow(abs(g), p)), 1 / p);
}
}  // namespace

Tensor clip_grad_norm_(Module& module, double max_norm, double norm_type) {
  if (!(max_norm >= 0)) detail::fail("clip_grad_norm_", "max_norm must be >= 0, got ", max_norm);
  if (!(norm_type > 0))
    detail::fail("clip_grad_norm_", "norm_type must be a p > 0 or infinity, got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  bool mixed = false;
  for (const auto& [name, p] : module.named_parameters()) {
    const Tensor& g = p->grad;
    if (!p->value.defined() || !g.defined() || !is_floating(g.dtype()) || g.numel() == 0) continue;  // an empty one adds nothing
    mixed = mixed || (!grads.empty() && g.dtype() != grads[0].dtype());
    grads.push_back(g);
  }
  if (grads.empty()) return zeros({}, module.device());
  const DType dtype = mixed ? float64 : grads[0].dtype();
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(p_norm(g, norm_type).astype(dtype));
  const Tensor total = norms.size() == 1 && std::isinf(norm_type) ? norms[0] : p_norm(stack(norms), norm_type);
  // min(1, c) with clamp, which keeps a NaN coefficient NaN (std::min-like selects would drop it).
  const Tensor coefficient = clamp(max_norm / (total + 1e-6), -std::numeric_limits<double>::infinity(), 1.0);
  for (const Tensor& g : grads) detail::scale_in_place(g, coefficient.astype(g.dtype()));
  return total;
}

}  // namespace kten::nn
