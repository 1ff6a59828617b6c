// Optimisers: one update kernel per parameter, on the parameters' device.
#include <cmath>
#include <string>

#include <kten/optim.hpp>

#include "fail.hpp"
#include "nn/kernels.hpp"

namespace kten::optim {

namespace {
// A NaN or infinite rate would turn every parameter into NaN at the first step; like PyTorch,
// kten refuses a negative one too.
float checked_hyperparameter(float value, const char* what) {
  if (!(std::isfinite(value) && value >= 0.f))
    detail::fail("SGD", "the ", what, " must be a finite number >= 0, got ", std::to_string(value));
  return value;
}
}  // namespace

SGD::SGD(float lr, float weight_decay)
    : lr_(checked_hyperparameter(lr, "learning rate")), weight_decay_(checked_hyperparameter(weight_decay, "weight decay")) {}

void SGD::step(nn::Module& model) {
  for (auto& [name, p] : model.named_parameters())
    if (p->value.defined()) detail::sgd_update(p->value, p->grad, lr_, weight_decay_);
}

}  // namespace kten::optim
