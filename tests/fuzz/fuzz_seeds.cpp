// Writes the fuzzers' seed corpora into the directory given: load/ holds files made by save(),
// safetensors/ files made by save_safetensors(), checkpoint/ files made by save_checkpoint() (SGD
// with momentum and Adam, after a step), from the models in fuzz_models.hpp (float32 and
// float64, eager and lazily shaped by a first input), one safetensors file of every dtype
// with metadata, and onnx/ files made by kten::onnx::save() (with KTEN_ENABLE_ONNX).
#include <filesystem>
#include <iostream>
#include <string>

#include "fuzz_models.hpp"

int main(int argc, char* argv[]) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CORPUS_DIR\n";
    return 2;
  }
  kten::ScopeGuard guard;
  const std::filesystem::path load = std::filesystem::path(argv[1]) / "load",
                              safetensors = std::filesystem::path(argv[1]) / "safetensors";
  const std::filesystem::path checkpoint = std::filesystem::path(argv[1]) / "checkpoint";
  std::filesystem::create_directories(load);
  std::filesystem::create_directories(safetensors);
  std::filesystem::create_directories(checkpoint);
  for (kten::DType dtype : {kten::float32, kten::float64}) {
    const std::string name = kten::dtype_name(dtype);
    auto eager = kten::fuzz::eager_model(dtype);
    eager.save((load / ("seed-eager-" + name + ".kten")).string());
    kten::io::save_safetensors((safetensors / ("seed-eager-" + name + ".safetensors")).string(), eager.state_dict());
    auto lazy = kten::fuzz::lazy_model(dtype);
    lazy(kten::ones({1, 5}, kten::cpu(), dtype));  // shapes it: in_features 5, then 4
    lazy.save((load / ("seed-lazy-" + name + ".kten")).string());
    // Checkpoints after one step, with each optimiser's buffers.
    for (bool adam : {false, true}) {
      auto model = kten::fuzz::eager_model(dtype);
      auto optimizer = kten::fuzz::optimizer(adam);
      kten::nn::MSELoss()(model(kten::ones({2, 3}, kten::cpu(), dtype)), kten::zeros({2, 2}, kten::cpu(), dtype)).backward();
      optimizer->step(model);
      kten::save_checkpoint((checkpoint / ("seed-" + optimizer->kind() + "-" + name + ".ckpt")).string(), model, *optimizer, 1);
    }
  }
  // ONNX files (kten::onnx::save) of the eager model and of one with LayerNorm and the activations.
  if (kten::onnx::available()) {
    const std::filesystem::path onnx = std::filesystem::path(argv[1]) / "onnx";
    std::filesystem::create_directories(onnx);
    auto eager = kten::fuzz::eager_model(kten::float32);
    kten::onnx::save((onnx / "seed-eager.onnx").string(), eager, {kten::ones({2, 3})});
    kten::nn::Sequential mixed;
    mixed.add(kten::nn::Linear(3, 4, {true, kten::float32, 5}));
    mixed.add(kten::nn::LayerNorm(4));
    mixed.add(kten::nn::GELU());
    mixed.add(kten::nn::SiLU());
    mixed.add(kten::nn::Softplus(2.0));
    mixed.add(kten::nn::Linear(4, 3, {false, kten::float32, 6}));
    kten::onnx::save((onnx / "seed-mixed.onnx").string(), mixed, {kten::ones({2, 3})});
  }
  const kten::Tensor x = kten::arange(6).reshape({2, 3});
  kten::io::save_safetensors((safetensors / "seed-dtypes.safetensors").string(),
                             {{"f32", x}, {"f64", x.astype(kten::float64)}, {"i64", x.astype(kten::int64)},
                              {"bool", kten::gt(x, 2.0)}, {"scalar", kten::full({}, 1.0)}, {"empty", kten::zeros({0})}},
                             {{"format", "pt"}});
  return 0;
}
