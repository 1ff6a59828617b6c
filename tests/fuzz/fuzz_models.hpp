// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the fuzz targets share: the models they load into, whose saved files seed their corpora (the
// seeds pass every check, so the fuzzer starts from files that reach the end of loading), and the
// check that a failed load changed nothing.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

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

/// \brief Every parameter's shape and values, on the host (nothing for a lazy layer not yet shaped).
inline std::vector<std::vector<double>> state(nn::Module& model) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : model.parameters()) {
    out.emplace_back(p.shape().begin(), p.shape().end());
    out.push_back(p.astype(float64).to_vector<double>());
  }
  return out;
}

/// \brief An optimiser with per-parameter buffers: Adam, or SGD with momentum.
inline std::unique_ptr<optim::Optimizer> optimizer(bool adam) {
  if (adam) return std::make_unique<optim::Adam>(1e-3);
  return std::make_unique<optim::SGD>(0.1, optim::SGDOptions{0.9});
}

/// \brief An optimiser's state as numbers: its kind's length, scalars, buffers' shapes and values.
inline std::vector<std::vector<double>> state(const optim::Optimizer& optimizer) {
  const optim::OptimizerState s = optimizer.state();
  std::vector<std::vector<double>> out{{static_cast<double>(s.kind.size())}};
  for (const auto& [name, value] : s.scalars) out.push_back({static_cast<double>(name.size()), value});
  for (const auto& [name, t] : s.tensors) {
    out.emplace_back(t.shape().begin(), t.shape().end());
    out.push_back(t.astype(float64).to_vector<double>());
  }
  return out;
}

/// \brief Runs load(), which may throw FormatError only if it leaves `model` (and `optimizer`, when
/// given) exactly as they were; aborts (a finding) when it changed them.
template <class Load>
void load_or_unchanged(nn::Module& model, const optim::Optimizer* optimizer, const Load& load) {
  const auto before = state(model);
  const auto optimizer_before = optimizer ? state(*optimizer) : std::vector<std::vector<double>>{};
  try {
    load();
  } catch (const FormatError&) {
    if (state(model) != before || (optimizer && state(*optimizer) != optimizer_before)) {
      std::fprintf(stderr, "kten fuzz: a load that threw FormatError changed the model or the optimiser\n");
      std::abort();
    }
  }
}

template <class Load>
void load_or_unchanged(nn::Module& model, const Load& load) {
  load_or_unchanged(model, nullptr, load);
}

template <class Load>
void load_or_unchanged(nn::Module& model, const optim::Optimizer& optimizer, const Load& load) {
  load_or_unchanged(model, &optimizer, load);
}

/// \brief The one file this fuzzer writes each input to (its name ends in `suffix`); the first
/// call starts Kokkos and arranges that both are cleaned up when the fuzzer exits normally.
inline const std::string& input_path(const char* suffix) {
  static ScopeGuard guard;  // finalises Kokkos at exit, after the file is removed
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("kten-fuzz-" + std::to_string(::getpid()) + suffix)).string();
  static const int removal = std::atexit([] { std::remove(path.c_str()); });
  (void)removal;
  return path;
}

/// \brief Writes `bytes` to `path`, aborting when it cannot.
inline void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

}  // namespace kten::fuzz
