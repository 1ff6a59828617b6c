// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What today's PyTorch writes (issue 49): the committed fixtures of tests/fixtures/onnx/torch-<v>,
// made once by scripts/onnx-fixtures in a Debian root with that PyTorch (its TorchScript exporter
// at opsets 18 and 20; the same graphs re-saved by onnx as IR 10 with external data). Every model
// family kten has, in evaluation and training mode, must load on the device under test and give
// PyTorch's outputs and ONNX Runtime's, PyTorch's gradients by initializer name and, for the
// training-mode exports, its parameters after three Adam steps; the imported model then saves
// and reloads to the same outputs. No Python, no root file system and no network at test time.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <kten/kten.hpp>
#include <kten/onnx.hpp>

#include "onnx_builder.hpp"
#include "onnx_reference.hpp"
#include "support.hpp"

using namespace kten;

namespace {

// Every <model>.onnx of the fixture folders, with the reference it shares with its -ext twin.
struct Fixture {
  std::filesystem::path model, reference;
};

// The fixture folder: $KTEN_ONNX_FIXTURES where a run carries it elsewhere (the GPU bundle), else
// the source tree's.
std::filesystem::path fixture_folder() {
  const char* given = std::getenv("KTEN_ONNX_FIXTURES");
  return given ? given : KTEN_ONNX_FIXTURES;
}

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (const auto& version : std::filesystem::directory_iterator(fixture_folder())) {
    if (!version.is_directory() || version.path().filename().string().rfind("torch-", 0) != 0) continue;
    for (const auto& file : std::filesystem::directory_iterator(version.path())) {
      const std::string name = file.path().filename().string();
      if (file.path().extension() != ".onnx") continue;
      std::string stem = name.substr(0, name.size() - 5);  // <model>-opset<N>[-ext[-ir<M>]]
      if (const auto ext = stem.find("-ext"); ext != std::string::npos) stem.resize(ext);
      out.push_back({file.path(), version.path() / (stem + "-ref.safetensors")});
    }
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.model < b.model; });
  return out;
}

}  // namespace

TEST_CASE("onnx: the files today's PyTorch writes (opsets 18 and 20, IR 10 with external data) give PyTorch's answers", "[onnx]") {
  const auto all = fixtures();
  // Six model families, two opsets, each file also as IR 10 with external data, per PyTorch.
  REQUIRE(all.size() >= 28);
  for (const Fixture& f : all) {
    const std::string name = f.model.parent_path().filename().string() + "/" + f.model.filename().string();
    INFO(name);
    REQUIRE(std::filesystem::exists(f.reference));
    auto net = kten::onnx::load(f.model.string(), test::device());
    CHECK(test::matches_reference(name, net, io::load_safetensors(f.reference.string(), test::device())));
    // The trained model written back (its own opset and form) reads back to the same outputs.
    const auto ref = io::load_safetensors(f.reference.string(), test::device());
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < net.input_names().size(); ++i) inputs.push_back(test::find(ref, "in." + std::to_string(i)));
    const std::string again = (test::scratch() / "kten-fixture-again.onnx").string();
    net.eval();
    kten::onnx::save(again, net);
    auto reloaded = kten::onnx::load(again, test::device());
    reloaded.eval();
    NoGradGuard no_grad;
    const Tensor y = net.run(inputs)[0];
    CHECK(test::close(name + ": saved and reloaded", reloaded.run(inputs)[0], y, 0, 0));
    test::keep_for_onnx_runtime(again, f.model.parent_path().filename().string() + "-" + f.model.stem().string() + "-again", inputs, y);
  }
}
