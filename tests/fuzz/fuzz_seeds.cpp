// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Writes the fuzzers' seed corpora into the directory given: load/ holds files made by save(),
// safetensors/ files made by save_safetensors(), checkpoint/ files made by save_checkpoint() (SGD
// with momentum and Adam, after a step), from the models in fuzz_models.hpp (float32 and
// float64, eager and lazily shaped by a first input), one safetensors file of every dtype
// with metadata, and onnx/ files made by kten::onnx::save() (with KTEN_ENABLE_ONNX).
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>

#include "fuzz_models.hpp"

namespace {

// A module of one function, for the op families no layer exports alone.
class Lambda : public kten::nn::Module {
 public:
  Lambda(std::string name, std::function<kten::Tensor(const kten::Tensor&)> f) : name_(std::move(name)), f_(std::move(f)) {}
  kten::Tensor forward(const kten::Tensor& x) override { return f_(x); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  std::function<kten::Tensor(const kten::Tensor&)> f_;
};

// One seed per op family the ONNX fuzzer must reach (issue 47): real layers at small shapes, so
// that a mutant of any of them runs in milliseconds. The fuzzer feeds each graph input zeros of
// its declared shape (symbolic extents 2), so these reach the kernels as they are.
void write_family_seeds(const std::filesystem::path& onnx) {
  using namespace kten;
  const Tensor image = ones({1, 2, 8, 8});
  const auto save = [&](const std::string& name, nn::Module& m, const Tensor& x) {
    onnx::save((onnx / ("seed-" + name + ".onnx")).string(), m, {x});
  };
  {  // convolution, transposed convolution, padding modes
    nn::Sequential net;
    net.add(nn::Conv2d(2, 3, {3, 3}, {{1}, {1}, {1}, 1, true, nn::PaddingMode::circular, float32, 1}));
    net.add(nn::ConvTranspose2d(3, 2, {2, 2}, {{2}, {0}, {0}, {1}, 1, true, float32, 2}));
    net.add(nn::Conv2d(2, 2, {3, 3}, {{2}, {1}, {2}, 2, false, nn::PaddingMode::reflect, float32, 3}));
    save("conv", net, image);
  }
  {  // pooling
    nn::Sequential net;
    net.add(nn::MaxPool2d({3, 3}, {{2}, {1}, true, true}));
    net.add(nn::AvgPool2d({2, 2}, {{1}, {1}, false, false}));
    net.add(nn::AdaptiveAvgPool<2>({1, 1}));
    save("pool", net, image);
  }
  {  // resampling
    nn::Sequential net;
    net.add(nn::Upsample({{}, {2.0}, nn::InterpolateMode::bilinear, false}));
    net.add(nn::Upsample({{}, {0.5}, nn::InterpolateMode::nearest, false}));
    save("resize", net, image);
  }
  {  // normalisations, in training mode (BatchNormalization's training form, Dropout)
    nn::Sequential net;
    net.add(nn::BatchNorm2d(2));
    net.add(nn::GroupNorm(1, 2));
    net.add(nn::InstanceNorm2d(2, 1e-5, true));
    net.add(nn::Dropout(0.25));
    net.train();
    save("norms", net, image);
    nn::Sequential rows;
    rows.add(nn::LayerNorm(8));
    rows.add(nn::Linear(8, 4, {true, float32, 4}));
    save("layer-norm", rows, ones({3, 8}));
  }
  {  // gathers and scatters along an axis (message passing), int64 indices
    nn::Sequential net;
    net.add(nn::Embedding(5, 3, float32, 5));
    save("embedding", net, tensor(std::vector<std::int64_t>{0, 4, 2}, {3}));
    const Tensor index = tensor(std::vector<std::int64_t>{0, 1, 1, 0, 0, 1}, {2, 3});  // < 2: the fuzzer runs batch 2
    Lambda graph("gather-scatter", [index](const Tensor& x) {
      return scatter_add(x, 0, index, gather(x, 0, index) * 2.0);
    });
    save("gather-scatter", graph, ones({4, 3}));
  }
  {  // attention: scores, a softmax along the keys, the weighted values
    Lambda attention("attention", [](const Tensor& x) {
      const Tensor q = x * 0.5, k = x.transpose(1, 2);
      return matmul(softmax(matmul(q, k) * 0.25, -1), x);
    });
    save("attention", attention, ones({2, 4, 6}));
  }
  {  // a transformer encoder layer in training mode (issue 52): its projections, masks' Where,
     // softmax, LayerNorm and Dropout as save() traces them
    nn::TransformerEncoderLayerOptions o;
    o.dim_feedforward = 8;
    o.seed = 6;
    nn::TransformerEncoderLayer encoder(4, 2, o);
    save("transformer-encoder", encoder, ones({3, 2, 4}));
  }
  {  // element types: Cast to float64 and back (fuzz-coverage found Cast never reached)
    Lambda cast("cast", [](const Tensor& x) { return (x.astype(float64) * 3.0).astype(float32); });
    save("cast", cast, ones({2, 3}));
  }
}

}  // namespace

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
    write_family_seeds(onnx);
  }
  const kten::Tensor x = kten::arange(6).reshape({2, 3});
  kten::io::save_safetensors((safetensors / "seed-dtypes.safetensors").string(),
                             {{"f32", x}, {"f64", x.astype(kten::float64)}, {"i64", x.astype(kten::int64)},
                              {"bool", kten::gt(x, 2.0)}, {"scalar", kten::full({}, 1.0)}, {"empty", kten::zeros({0})}},
                             {{"format", "pt"}});
  return 0;
}
