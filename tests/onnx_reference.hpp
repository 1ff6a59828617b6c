// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// An imported model against a reference that PyTorch wrote (a safetensors file): its outputs, the
// parameter gradients of an MSE loss and, for a model exported in training mode, its parameters
// and running statistics after three Adam steps. The torch label makes the references at test time
// (tests/torch/interchange.cpp); the committed fixtures of today's PyTorch (tests/fixtures/onnx,
// tests/test_onnx_fixtures.cpp) were made once by scripts/onnx-fixtures. Each comparison prints
// its largest difference.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <kten/kten.hpp>
#include <kten/onnx.hpp>

namespace kten::test {

/// \brief |got - want| <= atol + rtol |want| everywhere; prints the largest difference.
inline bool close(const std::string& what, const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.shape() != want.shape()) {
    std::cerr << what << ": shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape()) << "\n";
    return false;
  }
  const auto g = got.astype(float64).to_vector<double>(), w = want.astype(float64).to_vector<double>();
  double worst = 0;
  bool ok = true;
  for (std::size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, std::fabs(g[i] - w[i]));
    ok = ok && std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]);
  }
  std::cout << what << ": largest difference " << worst << (ok ? ": ok" : ": WRONG") << "\n";
  return ok;
}

/// \brief The largest |value| of `t`.
inline double largest_of(const Tensor& t) {
  double largest = 0;
  for (double v : t.astype(float64).to_vector<double>()) largest = std::max(largest, std::fabs(v));
  return largest;
}

/// \brief |got - want| <= tol * scale everywhere; scale is the largest |want| (relative to the
/// largest element, however small: an output of 1e-3 gets 1e-7, not an absolute 1e-4), or for a
/// gradient the largest of any of the model's reference gradients (`scale`), since a gradient
/// that is zero in exact arithmetic (a bias before InstanceNorm) is rounding noise of that size on
/// both sides.
inline bool close_to_largest(const std::string& what, const Tensor& got, const Tensor& want, double tol, double scale = 0) {
  return close(what, got, want, 0, tol * std::max(scale, largest_of(want)));
}

/// \brief The tensor `name` of a reference file; std::runtime_error when it has none.
inline Tensor find(const nn::StateDict& sd, const std::string& name) {
  for (const auto& [key, t] : sd)
    if (key == name) return t;
  throw std::runtime_error("no tensor '" + name + "' in the reference file");
}

/// \brief True when the reference file has a tensor `name`.
inline bool has(const nn::StateDict& sd, const std::string& name) {
  return std::any_of(sd.begin(), sd.end(), [&](const auto& named) { return named.first == name; });
}

/// \brief The largest reference gradient ("grad." entries of `ref`) of the model's parameters.
inline double largest_gradient(nn::Module& net, const nn::StateDict& ref) {
  double largest = 0;
  for (const auto& p : net.named_parameters())
    for (const auto& [name, t] : ref)
      if (name == "grad." + p.name) largest = std::max(largest, largest_of(t));
  return largest;
}

/// \brief Where a test writes the ONNX files kten saved, with their inputs and outputs
/// (<file>-io.safetensors: in.<i>, y), for ONNX Runtime to run them (scripts/onnx-fixtures
/// [root] ort DIR): $KTEN_ONNX_EXPORT_DIR when set, else nowhere (empty).
inline std::string export_dir() {
  const char* dir = std::getenv("KTEN_ONNX_EXPORT_DIR");
  return dir ? dir : "";
}

/// \brief Copies the file kten wrote at `path` into export_dir() as `name`.onnx with its inputs and
/// the output `y` kten computes for them (nothing when export_dir() is empty).
inline void keep_for_onnx_runtime(const std::string& path, const std::string& name, const std::vector<Tensor>& inputs, const Tensor& y) {
  const std::string dir = export_dir();
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(path, dir + "/" + name + ".onnx", std::filesystem::copy_options::overwrite_existing);
  nn::StateDict io;
  for (std::size_t i = 0; i < inputs.size(); ++i) io.emplace_back("in." + std::to_string(i), inputs[i]);
  io.emplace_back("y", y);
  io::save_safetensors(dir + "/" + name + "-io.safetensors", io);
}

/// \brief `net` against the reference `ref`: inputs in.<i>, outputs y (and ONNX Runtime's ort.y
/// where present) to 1e-4 of the largest, gradients of the MSE loss against `target` to 1e-4 of
/// the largest reference gradient, and, where `ref` holds after.<name>, the state after three
/// Adam steps (lr 1e-2) to 1e-5, running variances excepted. Changes the model's parameters; prints one line per comparison.
inline bool matches_reference(const std::string& name, onnx::Model& net, const nn::StateDict& ref) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < net.input_names().size(); ++i) inputs.push_back(find(ref, "in." + std::to_string(i)));
  const Tensor target = find(ref, "target");
  const bool trained = std::any_of(ref.begin(), ref.end(), [](const auto& named) { return named.first.rfind("after.", 0) == 0; });
  std::cout << name << ": opset " << net.opset() << ", " << net.named_parameters().size() << " parameters, "
            << net.named_buffers().size() << " buffers, " << (trained ? "exported in training mode" : "evaluation mode") << "\n";
  // One forward for both: in training mode each call moves BatchNorm's running statistics, and
  // the reference made as many calls as this function does.
  const Tensor y = net.run(inputs)[0];
  bool ok = close_to_largest(name + ": outputs", y, find(ref, "y"), 1e-4);
  if (has(ref, "ort.y")) ok = close_to_largest(name + ": outputs against ONNX Runtime's", y, find(ref, "ort.y"), 1e-4) && ok;
  net.zero_grad();
  nn::MSELoss()(net.run(inputs)[0], target).backward();
  for (const auto& p : net.named_parameters())
    ok = close_to_largest(name + ": gradient of " + p.name, p.slot->value.grad(), find(ref, "grad." + p.name), 1e-4,
                          largest_gradient(net, ref)) && ok;
  if (!trained) return ok;
  net.zero_grad();
  optim::Adam adam(1e-2);
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad(net);
    nn::MSELoss()(net.run(inputs)[0], target).backward();
    adam.step(net);
  }
  // Parameters and running means; not the running variances, which ONNX (and so an imported
  // model, as ONNX Runtime) updates with the batch's population variance and PyTorch's module with
  // the unbiased one (ONNX's conformance cases check kten's).
  for (const auto& [key, t] : net.state_dict())
    if (key.size() < 12 || key.compare(key.size() - 12, 12, ".running_var") != 0)
      ok = close(name + ": " + key + " after three Adam steps", t, find(ref, "after." + key), 0, 1e-5) && ok;
  return ok;
}

}  // namespace kten::test
