// Optimisers: one update kernel per parameter, on the parameters' device.
#include <kten/optim.hpp>

#include "nn/kernels.hpp"

namespace kten::optim {

void SGD::step(nn::Module& model) {
  for (auto& [name, p] : model.named_parameters())
    if (p->value.defined()) detail::sgd_update(p->value, p->grad, lr_, weight_decay_);
}

}  // namespace kten::optim
