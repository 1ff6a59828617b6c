// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten's lifetimes, each in a process of its own (the mode is the first argument): nothing aborts
// at exit, whatever outlives Kokkos.
//   no-guard      no ScopeGuard at all: kten starts Kokkos on first use and finalises it at exit
//                 (after an index-checked gather)
//   static-model  a model at namespace scope, filled and trained inside a ScopeGuard, destroyed at
//                 exit after the guard has finalised Kokkos (a simulation object holding its surrogate)
//   after-guard   a tensor used after its guard has ended: a kten::Error that says so, and the
//                 tensor itself dropped at exit without an abort
//   unread-index-error  (a GPU) an embedding with an index out of range and no synchronisation
//                 after it: the error is said on stderr at exit, which still exits normally
#include <cstdint>
#include <cstring>
#include <iostream>
#include <vector>

#include <kten/kten.hpp>

namespace {

kten::nn::Sequential static_model;  // constructed before main, destroyed after the guard

int no_guard() {
  const auto x = kten::ones({2, 3}, kten::try_gpu());
  // A gather checks its indices on the device (a GPU's check state is made here, after kten's
  // at-exit finalize was registered: it used to be destroyed first, and the finalize then freed
  // it again, an abort at exit).
  const auto picked = kten::gather(x, 0, kten::tensor(std::vector<std::int64_t>{1, 0, 1}, {1, 3}, x.device()));
  std::cout << "sum " << (x + 1.f).sum().item<float>() + picked.sum().item<float>() - 3 << " on " << x.device() << '\n';
  return 0;
}

int with_static_model() {
  kten::ScopeGuard guard;
  static_model.add(kten::nn::Linear(3, 2));
  static_model.to(kten::try_gpu());
  kten::optim::SGD sgd(0.1);
  const auto x = kten::ones({4, 3}, kten::try_gpu()), y = kten::zeros({4, 2}, kten::try_gpu());
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad(static_model);
    kten::nn::MSELoss()(static_model(x), y).backward();
    sgd.step(static_model);
  }
  std::cout << "trained " << static_model.parameters().size() << " parameters\n";
  return 0;
}

int after_guard() {
  kten::Tensor t;
  {
    kten::ScopeGuard guard;
    t = kten::ones({3}, kten::try_gpu());
  }
  try {
    const auto u = t + 1.f;
    std::cout << "no error after the guard ended\n";
    return 1;
  } catch (const kten::Error& e) {
    std::cout << "kten::Error: " << e.what() << '\n';
  }
  return 0;
}

}  // namespace

int unread_index_error() {
  const auto weight = kten::ones({4, 2}, kten::try_gpu());
  const auto rows = kten::embedding(weight, kten::tensor(std::vector<std::int64_t>{0, 9}, weight.device()));
  std::cout << "embedding queued on " << rows.device() << '\n';
  return 0;
}

int main(int argc, char* argv[]) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "no-guard") == 0) return no_guard();
  if (std::strcmp(mode, "static-model") == 0) return with_static_model();
  if (std::strcmp(mode, "after-guard") == 0) return after_guard();
  if (std::strcmp(mode, "unread-index-error") == 0) return unread_index_error();
  std::cerr << "kten-lifetimes no-guard | static-model | after-guard | unread-index-error\n";
  return 2;
}
