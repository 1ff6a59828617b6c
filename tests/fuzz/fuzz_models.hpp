#pragma once
// The models the loader fuzzer loads into, and whose saved files seed its corpus: the seeds pass
// every check, so the fuzzer starts from files that reach the end of load().

#include <kten/kten.hpp>

namespace kten::fuzz {

/// \brief Linear(3, 4), ReLU, Linear(4, 2): every shape known.
inline nn::Sequential eager_model(DType dtype) {
  nn::Sequential net;
  net.add(nn::Linear(3, 4, {true, dtype, 1}));
  net.add(nn::ReLU());
  net.add(nn::Linear(4, 2, {true, dtype, 2}));
  return net;
}

/// \brief Linear(4), ReLU, Linear(2): in_features of both layers come from the file.
inline nn::Sequential lazy_model(DType dtype) {
  nn::Sequential net;
  net.add(nn::Linear(4, {true, dtype, 3}));
  net.add(nn::ReLU());
  net.add(nn::Linear(2, {true, dtype, 4}));
  return net;
}

}  // namespace kten::fuzz
