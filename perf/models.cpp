// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf's model workloads: a training step with autograd against the hand-written backward, the
// framework-peer workloads (MLPs, activations, convolutions; libtorch's side where it is built in,
// PyTorch's in perf/pytorch_peer.py), and imported ONNX models against the same models from modules.
#ifdef __linux__
#include <unistd.h>
#endif

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <kten/kten.hpp>

#include "ops/conv.hpp"         // conv_multiply_adds: the arithmetic a convolution's paths do
#include "ops/elementwise.hpp"  // the hand-written step's kernels: fill, relu_grad
#include "ops/linalg.hpp"       // gemm
#include "optim/kernels.hpp"   // sgd_update

#include "baselines/libtorch.hpp"
#include "perf_harness.hpp"

namespace kten::perf {

// --- a training step: autograd vs the hand-written backward kten had before it ------------------------

namespace {

/// \brief A 3-layer MLP (in -> h -> ReLU -> h -> ReLU -> out) trained with MSE and SGD, stepped
/// the way kten's layers did before autograd: forward GEMMs X W^T with the (out, in) weights read
/// transposed in place and the bias in the epilogue, then a hand-written backward (dW = dY^T X
/// accumulated inside the GEMM, db by a column sum, dX = dY W, relu's gradient), nothing recorded.
/// The reference the autograd step is held to.
struct HandWrittenMlp {
  std::vector<Tensor> W, b, gW, gb;
  HandWrittenMlp(kten::nn::Sequential& model) {
    for (auto& [name, p] : model.named_parameters()) {
      const bool weight = name.find("weight") != std::string::npos;
      (weight ? W : b).push_back(p->value.detach().copyto(p->value.device()));
      (weight ? gW : gb).push_back(kten::zeros(p->value.shape(), p->value.device()));
    }
  }
  void step(const Tensor& X, const Tensor& Y, float lr) {
    kten::NoGradGuard no_grad;
    for (std::size_t l = 0; l < W.size(); ++l) {
      kten::detail::fill(gW[l], 0.0);
      kten::detail::fill(gb[l], 0.0);
    }
    std::vector<Tensor> inputs{X}, pre;
    for (std::size_t l = 0; l < W.size(); ++l) {
      Tensor z = kten::empty({X.shape()[0], W[l].shape()[0]}, X.device());
      kten::detail::gemm(inputs.back(), false, W[l], true, z, &b[l], false);
      pre.push_back(z);
      if (l + 1 < W.size()) inputs.push_back(kten::relu(z));
    }
    Tensor g = (pre.back() - Y) * (2.0 / static_cast<double>(Y.numel()));  // MSELoss' gradient
    for (std::size_t l = W.size(); l-- > 0;) {
      if (l + 1 < W.size()) g = kten::detail::relu_grad(pre[l], g);
      kten::detail::gemm(g, true, inputs[l], false, gW[l], nullptr, true);
      gb[l] = gb[l] + kten::sum(g, 0);
      Tensor gx = kten::empty(inputs[l].shape(), X.device());
      kten::detail::gemm(g, false, W[l], false, gx, nullptr, false);
      g = gx;
    }
    for (std::size_t l = 0; l < W.size(); ++l) {
      kten::detail::sgd_update(W[l], gW[l], Tensor(), {lr, 0, 0, 0, false, false});
      kten::detail::sgd_update(b[l], gb[l], Tensor(), {lr, 0, 0, 0, false, false});
    }
  }
};

}  // namespace

void register_training_step() {
  const Device d = config.device;
  const std::int64_t batch = config.quick ? 64 : 256, in = 64, hidden = config.quick ? 64 : 256, out = 8;
  auto make_model = [=] {
    kten::nn::Sequential m;
    m.add(kten::nn::Linear(in, hidden, {true, kten::float32, 1}));
    m.add(kten::nn::ReLU());
    m.add(kten::nn::Linear(hidden, hidden, {true, kten::float32, 2}));
    m.add(kten::nn::ReLU());
    m.add(kten::nn::Linear(hidden, out, {true, kten::float32, 3}));
    m.to(d);
    return m;
  };
  const double flops = 3 * 2.0 * batch * (in * hidden + hidden * hidden + hidden * out);
  benchmark::RegisterBenchmark("train/mlp_autograd", [=](benchmark::State& state) {
    auto model = make_model();
    kten::optim::SGD sgd(0.01f);
    kten::nn::MSELoss mse;
    auto X = kten::rand({batch, in}, d, 4), Y = kten::rand({batch, out}, d, 5);
    timed(state, d, flops, [&] {
      sgd.zero_grad(model);
      mse(model(X), Y).backward();
      sgd.step(model);
    });
  });
  benchmark::RegisterBenchmark("train/mlp_handwritten", [=](benchmark::State& state) {
    auto model = make_model();
    HandWrittenMlp mlp(model);
    auto X = kten::rand({batch, in}, d, 4), Y = kten::rand({batch, out}, d, 5);
    timed(state, d, flops, [&] { mlp.step(X, Y, 0.01f); });
  });
}

// --- kten against a framework peer: the same workloads (baselines/libtorch.hpp) -------------------
// kten's side runs on every device and its times go to workloads.json with each workload's shape,
// which perf/pytorch_peer.py reads to run the same workloads in PyTorch on the same GPU. Host-only
// builds with libtorch also run libtorch's side here, on the same threads, in the same run.

namespace {

/// \brief One peer workload: its row, its shape for the Python peer, and kten's closure (made
/// inside its benchmark); libtorch's closure where libtorch is built in.
struct PeerWorkload {
  std::string name, what, target;
  std::string shape_json;  // {"kind": ..., and the sizes}: what perf/pytorch_peer.py runs
  std::function<std::function<void()>()> kten;
#ifdef KTEN_PERF_LIBTORCH
  std::function<std::function<void()>()> libtorch;
#endif
};

kten::nn::Sequential kten_mlp(const kten::perf::MlpShape& s) {
  kten::nn::Sequential m;
  m.add(kten::nn::Linear(s.in, s.hidden, {true, kten::float32, 1}));
  m.add(kten::nn::ReLU());
  m.add(kten::nn::Linear(s.hidden, s.hidden, {true, kten::float32, 2}));
  m.add(kten::nn::ReLU());
  m.add(kten::nn::Linear(s.hidden, s.out, {true, kten::float32, 3}));
  m.to(config.device);
  return m;
}

// Forward and backward of `f` to a fresh gradient of x each call, as the peers' side does.
template <class F>
std::function<void()> kten_forward_backward(std::int64_t rows, std::int64_t cols, F f) {
  const Device d = config.device;
  auto x = kten::rand({rows, cols}, d, 1), g = kten::rand({rows, cols}, d, 2);
  x.requires_grad_();
  return [=]() mutable {
    x.set_grad(Tensor());
    f(x).backward(g);
  };
}

std::string mlp_json(const char* kind, const kten::perf::MlpShape& s, std::int64_t batch, const std::string& opt) {
  std::ostringstream os;
  os << "{\"kind\":\"" << kind << "\",\"in\":" << s.in << ",\"hidden\":" << s.hidden << ",\"out\":" << s.out
     << ",\"batch\":" << batch << (opt.empty() ? "" : ",\"optimizer\":\"" + opt + "\"") << "}";
  return os.str();
}

std::string rows_json(const char* kind, std::int64_t rows, std::int64_t cols) {
  return std::string("{\"kind\":\"") + kind + "\",\"rows\":" + std::to_string(rows) + ",\"cols\":" + std::to_string(cols) + "}";
}

// --- Convolutions (issue 31) ---
std::string conv_json(const kten::perf::ConvShape& c) {
  std::string spatial;
  for (std::int64_t e : c.spatial) spatial += (spatial.empty() ? "" : ",") + std::to_string(e);
  return "{\"kind\":\"conv\",\"batch\":" + std::to_string(c.batch) + ",\"channels\":" + std::to_string(c.channels) +
         ",\"spatial\":[" + spatial + "],\"kernel\":" + std::to_string(c.kernel) + "}";
}
// conv2d / conv3d forward and backward to x, the weight and the bias, a fresh gradient each call.
std::function<void()> kten_conv_forward_backward(const kten::perf::ConvShape& c) {
  const Device d = config.device;
  kten::Shape x_shape{c.batch, c.channels}, w_shape{c.channels, c.channels};
  for (std::int64_t e : c.spatial) x_shape.push_back(e), w_shape.push_back(c.kernel);
  auto x = kten::rand(x_shape, d, 1), w = kten::rand(w_shape, d, 2), b = kten::rand({c.channels}, d, 3), g = kten::rand(x_shape, d, 4);
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  const std::int64_t pad = c.kernel / 2;
  return [=]() mutable {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    (c.spatial.size() == 2 ? kten::conv2d(x, w, b, {1}, {pad}) : kten::conv3d(x, w, b, {1}, {pad})).backward(g);
  };
}

// LIBTORCH(f) is libtorch's closure f where libtorch is built in, and nothing elsewhere.
#ifdef KTEN_PERF_LIBTORCH
#define LIBTORCH(f) , f
#else
#define LIBTORCH(f)
#endif

std::vector<PeerWorkload> peer_workloads() {
#ifdef KTEN_PERF_LIBTORCH
  namespace lt = kten::perf::libtorch;
#endif
  using kten::perf::MlpShape;
  using kten::perf::Optimizer;
  std::vector<PeerWorkload> w;
  const auto shapes = kten::perf::mlp_shapes(config.quick);
  for (const MlpShape& s : shapes)
    for (Optimizer o : {Optimizer::sgd, Optimizer::adam}) {
      const std::string opt = o == Optimizer::sgd ? "sgd" : "adam";
      w.push_back({"mlp_" + opt + "_step_" + s.name,
                   "MLP " + std::to_string(s.in) + "-" + std::to_string(s.hidden) + "-" + std::to_string(s.hidden) + "-" +
                       std::to_string(s.out) + ", batch " + std::to_string(s.batch) + ", " + opt + " training step",
                   s.name == "tiny" ? ">= 1.5" : ">= 1.0", mlp_json("mlp_step", s, s.batch, opt),
                   [=] {
                     auto model = std::make_shared<kten::nn::Sequential>(kten_mlp(s));
                     std::shared_ptr<kten::optim::Optimizer> optimizer;
                     if (o == Optimizer::sgd) optimizer = std::make_shared<kten::optim::SGD>(0.01);
                     else optimizer = std::make_shared<kten::optim::Adam>(1e-3);
                     auto X = kten::rand({s.batch, s.in}, config.device, 4), Y = kten::rand({s.batch, s.out}, config.device, 5);
                     return std::function<void()>([=] {
                       optimizer->zero_grad(*model);
                       kten::nn::MSELoss()((*model)(X), Y).backward();
                       optimizer->step(*model);
                     });
                   } LIBTORCH([=] { return lt::mlp_step(s, o); })});
    }
  const MlpShape& medium = shapes[1];
  for (std::int64_t batch : {std::int64_t(1), std::int64_t(4096)})
    w.push_back({"inference_batch" + std::to_string(batch),
                 "medium MLP forward, batch " + std::to_string(batch) + ", NoGradGuard / InferenceMode",
                 batch == 1 ? ">= 1.5" : ">= 1.0", mlp_json("mlp_inference", medium, batch, ""),
                 [=] {
                   auto model = std::make_shared<kten::nn::Sequential>(kten_mlp(medium));
                   auto X = kten::rand({batch, medium.in}, config.device, 4);
                   return std::function<void()>([=] {
                     kten::NoGradGuard no_grad;
                     (*model)(X);
                   });
                 } LIBTORCH([=] { return lt::mlp_inference(medium, batch); })});
  w.push_back({"op1024_latency", "a 1024-element add, nothing requiring grad", ">= 1.5", "{\"kind\":\"add\",\"n\":1024}",
               [] {
                 auto x = kten::rand({1024}, config.device, 1), y = kten::rand({1024}, config.device, 2);
                 return std::function<void()>([=] { x + y; });
               } LIBTORCH([] { return lt::add(1024); })});
  const std::int64_t rows = kten::perf::activation_rows(config.quick), cols = kten::perf::activation_cols(config.quick);
  const std::string size = std::to_string(rows) + " x " + std::to_string(cols);
  w.push_back({"softmax", "softmax over rows of " + size + ", forward + backward", ">= 1.0",
               rows_json("softmax", rows, cols),
               [=] { return kten_forward_backward(rows, cols, [](const Tensor& x) { return kten::softmax(x, 1); }); }
               LIBTORCH([=] { return lt::softmax_forward_backward(rows, cols); })});
  w.push_back({"layernorm", "LayerNorm over rows of " + size + ", forward + backward", ">= 1.0",
               rows_json("layernorm", rows, cols),
               [=] {
                 auto norm = std::make_shared<kten::nn::LayerNorm>(cols);
                 norm->to(config.device);
                 return kten_forward_backward(rows, cols, [norm](const Tensor& x) { return (*norm)(x); });
               } LIBTORCH([=] { return lt::layer_norm_forward_backward(rows, cols); })});
  w.push_back({"gelu", "exact GELU of " + size + ", forward + backward", ">= 1.0", rows_json("gelu", rows, cols),
               [=] { return kten_forward_backward(rows, cols, [](const Tensor& x) { return kten::gelu(x); }); }
               LIBTORCH([=] { return lt::gelu_forward_backward(rows, cols); })});
  // --- Convolutions (issue 31): forward and backward to x, the weight and the bias ---
  for (const kten::perf::ConvShape& c : kten::perf::conv_shapes(config.quick))
    w.push_back({c.name, c.name + ", padding " + std::to_string(c.kernel / 2) + ", forward + backward", ">= 1.5", conv_json(c),
                 [=] { return kten_conv_forward_backward(c); } LIBTORCH([=] { return lt::conv_forward_backward(c); })});
  return w;
}
#undef LIBTORCH

// --- ONNX (kten::onnx, issue 32): an imported model against the same model built from modules ----
// A small U-Net of the in-situ kind (circular 3x3 convolutions, BatchNorm, max pooling, bilinear
// upsampling, a skip through cat), for the imported grid model's rows.
class PerfUNet : public kten::nn::Module {
 public:
  explicit PerfUNet(std::int64_t ch) {
    kten::nn::ConvOptions same;
    same.padding = {1};
    same.padding_mode = kten::nn::PaddingMode::circular;
    kten::nn::UpsampleOptions twice;
    twice.scale_factor = {2.0, 2.0};
    twice.mode = kten::nn::InterpolateMode::bilinear;
    enc1_ = register_module("enc1", kten::nn::Conv2d(4, ch, {3, 3}, same));
    norm1_ = register_module("norm1", kten::nn::BatchNorm2d(ch));
    pool_ = register_module("pool", kten::nn::MaxPool2d({2}));
    enc2_ = register_module("enc2", kten::nn::Conv2d(ch, 2 * ch, {3, 3}, same));
    norm2_ = register_module("norm2", kten::nn::BatchNorm2d(2 * ch));
    up_ = register_module("up", kten::nn::Upsample(twice));
    dec_ = register_module("dec", kten::nn::Conv2d(3 * ch, ch, {3, 3}, same));
    head_ = register_module("head", kten::nn::Conv2d(ch, 4, {1, 1}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor e1 = kten::relu((*norm1_)((*enc1_)(x)));
    const Tensor e2 = kten::relu((*norm2_)((*enc2_)((*pool_)(e1))));
    return (*head_)(kten::relu((*dec_)(kten::cat({(*up_)(e2), e1}, 1))));
  }
  std::string name() const override { return "PerfUNet"; }

 private:
  std::shared_ptr<kten::nn::Conv2d> enc1_, enc2_, dec_, head_;
  std::shared_ptr<kten::nn::BatchNorm2d> norm1_, norm2_;
  std::shared_ptr<kten::nn::MaxPool2d> pool_;
  std::shared_ptr<kten::nn::Upsample> up_;
};

}  // namespace

// Each model written by kten::onnx::save (traced) and read back by load(), beside the model itself:
// the medium MLP (an Adam step, forward passes of batch 1 and 4096) and the U-Net (an Adam step in
// training mode, a forward pass in evaluation mode) on 8 x 4 x 64 x 64 fields (2 x 4 x 32 x 32 quick).
void register_onnx() {
  if (!kten::onnx::available()) return;
  const kten::perf::MlpShape s = kten::perf::mlp_shapes(config.quick)[1];
  const std::int64_t grid = config.quick ? 32 : 64, fields = config.quick ? 2 : 8;
  // `module` itself, or its traced export read back (on config.device, in the module's mode).
  const auto model_of = [](std::shared_ptr<kten::nn::Module> module, const Tensor& example,
                           bool imported) -> std::shared_ptr<kten::nn::Module> {
    module->to(config.device);
    if (!imported) return module;
    const auto path = std::filesystem::temp_directory_path() / ("kten-perf-" + std::to_string(getpid()) + ".onnx");
    kten::onnx::save(path.string(), *module, {example});
    auto net = std::make_shared<kten::onnx::Model>(kten::onnx::load(path.string(), config.device));
    std::filesystem::remove(path);
    net->train(module->is_training());
    return net;
  };
  const auto mlp = [=](bool imported) {
    return model_of(std::make_shared<kten::nn::Sequential>(kten_mlp(s)), kten::zeros({1, s.in}, config.device), imported);
  };
  const auto unet = [=](bool imported, bool training) {
    auto module = std::make_shared<PerfUNet>(16);
    module->train(training);
    return model_of(module, kten::rand({2, 4, grid, grid}, config.device, 3), imported);
  };
  // An Adam step of `model` on (X, Y).
  const auto train_step = [](const std::shared_ptr<kten::nn::Module>& model, const Tensor& X, const Tensor& Y,
                             benchmark::State& state) {
    kten::optim::Adam adam(1e-3);
    timed(state, config.device, 1, [&] {
      adam.zero_grad(*model);
      kten::nn::MSELoss()((*model)(X), Y).backward();
      adam.step(*model);
    });
  };
  const auto inference = [](const std::shared_ptr<kten::nn::Module>& model, const Tensor& X, benchmark::State& state) {
    timed(state, config.device, 1, [&] {
      kten::NoGradGuard no_grad;
      (*model)(X);
    });
  };
  // The two sides of each row in turns, three rounds (one quick), each side's fastest round kept:
  // run one after the other, the imported MLP's step was 1.54 of the module's in one process and
  // 0.96-1.10 in alternate processes, where the module's own step varied 1.8x from one process to
  // the next (docs/performance.md).
  for (int round = 0; round < (config.quick ? 1 : 3); ++round) {
    for (bool imported : {false, true}) {
      const std::string kind = imported ? "onnx" : "modules";
      benchmark::RegisterBenchmark(("onnx/mlp_step_" + kind).c_str(), [=](benchmark::State& state) {
        train_step(mlp(imported), kten::rand({s.batch, s.in}, config.device, 4), kten::rand({s.batch, s.out}, config.device, 5), state);
      });
      for (std::int64_t batch : {std::int64_t(1), std::int64_t(4096)})
        benchmark::RegisterBenchmark(("onnx/mlp_inference" + std::to_string(batch) + "_" + kind).c_str(),
                                     [=](benchmark::State& state) {
                                       inference(mlp(imported), kten::rand({batch, s.in}, config.device, 4), state);
                                     });
      benchmark::RegisterBenchmark(("onnx/unet_step_" + kind).c_str(), [=](benchmark::State& state) {
        train_step(unet(imported, true), kten::rand({fields, 4, grid, grid}, config.device, 4),
                   kten::rand({fields, 4, grid, grid}, config.device, 5), state);
      });
      benchmark::RegisterBenchmark(("onnx/unet_inference_" + kind).c_str(), [=](benchmark::State& state) {
        inference(unet(imported, false), kten::rand({fields, 4, grid, grid}, config.device, 4), state);
      });
    }
  }
}

void register_peer_workloads() {
  for (const auto& w : peer_workloads())
    benchmark::RegisterBenchmark(("peer/" + w.name + "/kten").c_str(), [w](benchmark::State& state) {
      timed(state, config.device, 1, w.kten());
    });
}

/// \brief workloads.json: each peer workload's shape, row, target and kten's seconds, for
/// perf/pytorch_peer.py.
void write_peer_workloads() {
  std::ofstream js(std::filesystem::path(config.out) / "workloads.json");
  js << "{\"device\":\"" << config.device << "\",\"quick\":" << (config.quick ? "true" : "false") << ",\"workloads\":[";
  bool first = true;
  for (const auto& w : peer_workloads()) {
    const std::string name = "peer/" + w.name + "/kten";
    js << (first ? "" : ",") << "\n  {\"name\":\"" << w.name << "\",\"what\":\"" << w.what << "\",\"target\":\""
       << w.target << "\",\"shape\":" << w.shape_json << ",\"kten_seconds\":"
       << (results.count(name) ? results[name].seconds : 0.0) << "}";
    first = false;
  }
  js << "\n]}\n";
}

#ifdef KTEN_PERF_LIBTORCH
namespace {

/// \brief libtorch's GEMMs run in OpenBLAS, whose thread pool and libtorch's OpenMP pool compete
/// for the cores: libtorch runs with OpenBLAS on every thread and on one, and keeps its best.
std::vector<int> libtorch_openblas_threads() {
  const int all = kten::host_threads();
  return all > 1 ? std::vector<int>{all, 1} : std::vector<int>{1};
}

}  // namespace

void register_libtorch() {
  if (!config.device.is_cpu()) return;  // Debian's libtorch is a CPU build
  kten::perf::libtorch::set_threads(kten::host_threads());
  for (const auto& w : peer_workloads())
    for (int blas_threads : libtorch_openblas_threads())
      benchmark::RegisterBenchmark(("peer/" + w.name + "/libtorch_openblas_threads_" + std::to_string(blas_threads)).c_str(),
                                   [w, blas_threads](benchmark::State& state) {
                                     give_openblas_every_core(blas_threads);
                                     timed(state, kten::cpu(), 1, w.libtorch());
                                     give_openblas_every_core(kten::host_threads());
                                   });
}

/// \brief The *_vs_libtorch rows: libtorch's time in its best OpenBLAS configuration / kten's time.
void add_libtorch_rows(std::vector<Row>& rows) {
  if (!config.device.is_cpu()) return;
  for (const auto& w : peer_workloads()) {
    const std::string name = "peer/" + w.name + "/";
    double best = 0;
    int best_threads = 0;
    for (int blas_threads : libtorch_openblas_threads()) {
      const std::string config_name = name + "libtorch_openblas_threads_" + std::to_string(blas_threads);
      if (results.count(config_name) && (best == 0 || results[config_name].seconds < best))
        std::tie(best, best_threads) = std::make_pair(results[config_name].seconds, blas_threads);
    }
    const double kten_s = results.count(name + "kten") ? results[name + "kten"].seconds : 0;
    const std::string blas = best > 0 ? " (OpenBLAS threads " + std::to_string(best_threads) + ")" : "";
    rows.push_back({w.name + "_vs_libtorch", w.what + ": libtorch time" + blas + " / kten time", w.target,
                    best > 0 && kten_s > 0 ? best / kten_s : 0, false, true});
  }
}
#endif

// --- the ratio rows --------------------------------------------------------------------------------

void add_model_rows(std::vector<Row>& rows, const std::vector<std::int64_t>& sizes) {
  rows.push_back({"mlp_step_autograd_vs_handwritten", "3-layer MLP training step: loss.backward() time / hand-written backward time",
                  "<= 1.10", ratio(seconds("train/mlp_autograd"), seconds("train/mlp_handwritten"))});
  // --- Convolutions (issue 31): forward + backward (3 products of the forward's multiply-adds each)
  // in GFLOP/s against kten's own float32 GEMM at its best measured size.
  const auto gemm = best_rate([&] {
    std::vector<std::string> names;
    for (auto n : sizes) names.push_back("gemm/kten/float32/" + std::to_string(n));
    return names;
  }());
  for (const kten::perf::ConvShape& c : kten::perf::conv_shapes(config.quick)) {
    const double s = seconds("peer/" + c.name + "/kten");
    // Effective: the direct convolution's multiply-adds (what libtorch's rows and a FLOP count of
    // the layer assume), so a Winograd path scores above 1. Done: the multiply-adds the paths kten
    // took perform (conv_multiply_adds), an efficiency against the GEMM that stays below 1.
    rows.push_back({c.name + "_vs_gemm", c.name + " forward + backward, effective GFLOP/s (the direct convolution's "
                    "multiply-adds) vs kten's float32 GEMM (" + gemm.second + ")",
                    ">= 0.60", ratio(s > 0 ? 3 * 2 * c.macs() / s : 0, gemm.first)});
    kten::Shape x_shape{c.batch, c.channels}, w_shape{c.channels, c.channels};
    for (std::int64_t e : c.spatial) x_shape.push_back(e), w_shape.push_back(c.kernel);
    const double done = kten::detail::conv_multiply_adds(static_cast<int>(c.spatial.size()), kten::empty(x_shape, config.device),
                                                         kten::empty(w_shape, config.device), {1}, {c.kernel / 2}, {1}, 1);
    rows.push_back({c.name + "_done_vs_gemm", c.name + " forward + backward, GFLOP/s of the multiply-adds done (Winograd's "
                    "counted as its GEMMs perform them) vs kten's float32 GEMM", "(informative)",
                    ratio(s > 0 ? 2 * done / s : 0, gemm.first)});
  }
}

void add_onnx_rows(std::vector<Row>& rows) {
  // kten::onnx (issue 32): the imported medium MLP against the same Sequential
  rows.push_back({"onnx_mlp_step_vs_modules", "medium MLP Adam step, imported from ONNX / built from kten modules",
                  "<= 1.10", ratio(seconds("onnx/mlp_step_onnx"), seconds("onnx/mlp_step_modules"))});
  for (const char* batch : {"1", "4096"})
    rows.push_back({std::string("onnx_mlp_inference") + batch + "_vs_modules",
                    std::string("medium MLP forward, batch ") + batch + ", imported from ONNX / built from kten modules", "<= 1.10",
                    ratio(seconds(std::string("onnx/mlp_inference") + batch + "_onnx"),
                          seconds(std::string("onnx/mlp_inference") + batch + "_modules"))});
  rows.push_back({"onnx_unet_step_vs_modules", "U-Net (circular convs, BatchNorm, pooling, bilinear upsampling, skip) Adam step, "
                  "imported from ONNX / built from kten modules", "<= 1.10",
                  ratio(seconds("onnx/unet_step_onnx"), seconds("onnx/unet_step_modules"))});
  rows.push_back({"onnx_unet_inference_vs_modules", "U-Net forward in evaluation mode, imported from ONNX / built from kten modules",
                  "<= 1.10", ratio(seconds("onnx/unet_inference_onnx"), seconds("onnx/unet_inference_modules"))});
}

}  // namespace kten::perf
