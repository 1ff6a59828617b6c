// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-torch-interchange: kten <-> PyTorch through safetensors files (label torch), on the device
// under test (KTEN_TEST_RUN, as for the Catch2 suite); PyTorch runs in Debian's Python
// (interchange.py says what it does).
//
//   kten-torch-interchange from-torch PYTHON SCRIPT DIR   PyTorch trains and saves a model; kten
//                                                         loads it with load_state_dict and must
//                                                         compute PyTorch's outputs
//   kten-torch-interchange to-torch PYTHON SCRIPT DIR     kten trains and saves a model; PyTorch
//                                                         loads it and must compute kten's outputs
//   kten-torch-interchange onnx PYTHON SCRIPT DIR         PyTorch exports an MLP as ONNX; kten loads,
//                                                         runs, trains and re-exports it (onnx_from_torch)
//   kten-torch-interchange onnx-grid PYTHON SCRIPT DIR    PyTorch exports CNNs, a U-Net and a graph net;
//                                                         kten runs and trains them (onnx_grid_from_torch)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>

#include <kten/kten.hpp>

#include "../test_run.hpp"
#include "../design_block.hpp"
#include "../onnx_reference.hpp"

extern char** environ;

namespace {

using kten::test::close;
using kten::test::close_to_largest;
using kten::test::find;
using kten::test::largest_gradient;

// Runs PYTHON SCRIPT COMMAND DIR; true when it exits with 0.
bool run_python(const std::string& python, const std::string& script, const std::string& command,
                const std::string& dir) {
  std::vector<std::string> args = {python, script, command, dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    std::cerr << "cannot start " << python << "\n";
    return false;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The model of interchange.py: Linear(3, 16), BatchNorm1d(16), ReLU, Linear(16, 2).
kten::nn::Sequential model(kten::DType dtype, const kten::Device& device) {
  kten::nn::Sequential net;
  net.add(kten::nn::Linear(3, 16, {true, dtype, 1}));
  kten::nn::BatchNormOptions norm;
  norm.dtype = dtype;
  net.add(kten::nn::BatchNorm1d(16, norm));
  net.add(kten::nn::ReLU());
  net.add(kten::nn::Linear(16, 2, {true, dtype, 2}));
  net.to(device);
  return net;
}

// Convolutions (issue 31): interchange.py's conv_model(), Conv2d(2, 4, 3, padding 1 circular),
// ReLU, ConvTranspose2d(4, 2, 2, stride 2).
kten::nn::Sequential conv_model(kten::DType dtype, const kten::Device& device) {
  kten::nn::ConvOptions o;
  o.padding = {1};
  o.padding_mode = kten::nn::PaddingMode::circular;
  o.dtype = dtype;
  kten::nn::ConvTransposeOptions t;
  t.stride = {2};
  t.dtype = dtype;
  kten::nn::Sequential net;
  net.add(kten::nn::Conv2d(2, 4, {3}, o));
  net.add(kten::nn::ReLU());
  net.add(kten::nn::ConvTranspose2d(4, 2, {2}, t));
  net.to(device);
  return net;
}

struct Case {
  kten::DType dtype;
  double rtol, atol;
};
const Case kCases[] = {{kten::float32, 1e-5, 1e-6}, {kten::float64, 1e-12, 1e-12}};

// Attention (issue 52): interchange.py's attention_models(), loaded by name from PyTorch's
// state_dicts (prefixes mha., post. and pre.), against torch.nn's outputs with masks.
kten::nn::StateDict with_prefix(const kten::nn::StateDict& all, const std::string& prefix) {
  kten::nn::StateDict out;
  for (const auto& [key, t] : all)
    if (key.rfind(prefix, 0) == 0) out.emplace_back(key.substr(prefix.size()), t);
  return out;
}

bool attention_from_torch(const std::string& dir, const Case& c, const kten::Device& device) {
  const std::string name = kten::dtype_name(c.dtype);
  const kten::nn::StateDict sd = kten::io::load_safetensors(dir + "/torch-attention-" + name + ".safetensors", device);
  const auto io = kten::io::load_safetensors(dir + "/torch-attention-" + name + "-io.safetensors", device);
  kten::nn::MultiheadAttentionOptions o;
  o.dtype = c.dtype;
  kten::nn::MultiheadAttention mha(8, 2, o);
  mha.to(device);
  mha.load_state_dict(with_prefix(sd, "mha."));
  mha.eval();
  kten::nn::TransformerEncoderLayerOptions post_options;
  post_options.dim_feedforward = 16;
  post_options.dtype = c.dtype;
  kten::nn::TransformerEncoderLayer post(8, 2, post_options);
  kten::nn::TransformerEncoderLayerOptions pre_options = post_options;
  pre_options.activation = "gelu";
  pre_options.batch_first = true;
  pre_options.norm_first = true;
  kten::nn::TransformerEncoderLayer pre(8, 2, pre_options);
  for (auto [layer, prefix] : {std::pair<kten::nn::Module*, const char*>{&post, "post."}, {&pre, "pre."}}) {
    layer->to(device);
    layer->load_state_dict(with_prefix(sd, prefix));
    layer->eval();
  }
  kten::NoGradGuard no_grad;
  const kten::Tensor q = find(io, "q"), k = find(io, "k"), v = find(io, "v"), padding = find(io, "padding");
  auto [y, w] = mha.forward(q, k, v, padding, true, find(io, "additive"));
  auto [y2, w_heads] = mha.forward(q, k, v, padding, true, find(io, "additive"), false);
  bool ok = close(name + ": MultiheadAttention's output", y, find(io, "y"), c.rtol, c.atol);
  ok = close(name + ": its weights, averaged over the heads", w, find(io, "w"), c.rtol, c.atol) && ok;
  ok = close(name + ": its weights per head", w_heads, find(io, "w_heads"), c.rtol, c.atol) && ok;
  const kten::Tensor src = find(io, "src");
  ok = close(name + ": TransformerEncoderLayer (post-norm, causal and padding masks)",
             post.forward(src, find(io, "causal"), find(io, "src_padding")), find(io, "post"), c.rtol, c.atol) && ok;
  ok = close(name + ": TransformerEncoderLayer (batch_first, norm_first, gelu, padding mask)",
             pre.forward(src.transpose(0, 1), {}, find(io, "src_padding")), find(io, "pre"), c.rtol, c.atol) && ok;
  return ok;
}

bool from_torch(const std::string& dir, const kten::Device& device) {
  bool ok = true;
  for (const Case& c : kCases) {
    const std::string name = kten::dtype_name(c.dtype);
    const kten::nn::StateDict sd = kten::io::load_safetensors(dir + "/torch-" + name + ".safetensors", device);
    // The library's order (widest dtype, then name), not the model's: load_state_dict matches names.
    std::vector<std::string> names;
    for (const auto& [key, t] : sd) names.push_back(key);
    if (names != std::vector<std::string>{"1.num_batches_tracked", "0.bias", "0.weight", "1.bias", "1.running_mean", "1.running_var",
                                          "1.weight", "3.bias", "3.weight"}) {
      std::cerr << name << ": the tensors are not in the safetensors library's order\n";
      ok = false;
    }
    auto net = model(c.dtype, device);
    net.load_state_dict(sd);
    net.eval();  // BatchNorm by PyTorch's running statistics
    const auto io = kten::io::load_safetensors(dir + "/torch-" + name + "-io.safetensors", device);
    kten::NoGradGuard no_grad;
    ok = close(name + ": kten's outputs of PyTorch's model", net(find(io, "x")), find(io, "y"), c.rtol, c.atol) && ok;
    // Convolutions (issue 31): PyTorch's Conv2d and ConvTranspose2d state_dict, by name.
    auto conv = conv_model(c.dtype, device);
    conv.load_state_dict(kten::io::load_safetensors(dir + "/torch-conv-" + name + ".safetensors", device));
    const auto conv_io = kten::io::load_safetensors(dir + "/torch-conv-" + name + "-io.safetensors", device);
    ok = close(name + ": kten's outputs of PyTorch's convolutions", conv(find(conv_io, "x")), find(conv_io, "y"), c.rtol, c.atol) && ok;
    ok = attention_from_torch(dir, c, device) && ok;
  }
  return ok;
}

void to_torch(const std::string& dir, const kten::Device& device) {
  for (const Case& c : kCases) {
    const std::string name = kten::dtype_name(c.dtype);
    auto net = model(c.dtype, device);
    kten::optim::SGD sgd(0.1f);
    for (int step = 0; step < 5; ++step) {  // trained, so the file holds more than the initialisation
      const kten::Tensor x = kten::randn({32, 3}, device, 10 + step, c.dtype);
      const kten::Tensor target = kten::stack({x.sum(1), x.select(1, 0) * x.select(1, 1)}, 1);
      net.zero_grad();
      kten::nn::MSELoss()(net(x), target).backward();
      sgd.step(net);
    }
    kten::io::save_safetensors(dir + "/kten-" + name + ".safetensors", net.state_dict(), {{"format", "pt"}});
    const kten::Tensor x = kten::randn({8, 3}, device, 99, c.dtype);
    net.eval();  // BatchNorm by the running statistics kten's training left
    kten::NoGradGuard no_grad;
    kten::io::save_safetensors(dir + "/kten-" + name + "-io.safetensors", {{"x", x}, {"y", net(x)}});
  }
}

// --- ONNX (kten::onnx, issue 32) ----------------------------------------------------------------
// PyTorch exports an MLP (Linear, LayerNorm, SiLU, Softplus; dynamic batch) in evaluation mode
// (opset 17) and in training mode (opset 13); kten loads each and must give PyTorch's outputs,
// parameter gradients of an MSE loss, and parameters after three Adam steps; then kten writes the
// trained model and a Sequential of its own layers, which reload to the same outputs and which
// onnx.checker accepts. A small attention block checks outputs and gradients too. DESIGN's Block,
// traced by save(), is rebuilt in PyTorch from the file's initializers and gives kten's outputs.

using Block = kten::test::DesignBlock;  // DESIGN 1c's composed model (tests/design_block.hpp)

// save() traces the Block in evaluation and in training mode (kten-block-<mode>.onnx) with kten's
// outputs on another batch size (kten-block-<mode>-io.safetensors): onnx-check rebuilds PyTorch's
// Block from each file's initializers and compares; load() must read each back to kten's outputs.
bool traced_block(const std::string& dir, const kten::Device& device) {
  bool ok = true;
  Block block(3, 7, 0.6);
  block.to(device);
  for (std::uint64_t seed : {11, 12}) block(kten::randn({4, 3, 6, 6}, device, seed));  // running statistics of its own
  for (const std::string mode : {"eval", "train"}) {
    block.train(mode == "train");
    const std::string file = dir + "/kten-block-" + mode + ".onnx";
    kten::onnx::save(file, block, {kten::randn({2, 3, 6, 6}, device, 13)});
    auto loaded = kten::onnx::load(file, device);
    const kten::Tensor x = kten::randn({5, 3, 6, 6}, device, 14);
    kten::NoGradGuard no_grad;
    const kten::Tensor y = block(x);
    ok = close("the traced Block (" + mode + ", batch 5, traced with 2) read back", loaded(x), y, 1e-5, 1e-6) && ok;
    kten::io::save_safetensors(dir + "/kten-block-" + mode + "-io.safetensors", {{"x", x}, {"y", y}});
  }
  // More traced files for onnx.checker's full check (GroupNorm's Reshapes, Resize, Pad, pooling,
  // Gather on an int64 input): a grid net and a 1-D CNN, and an Embedding model.
  kten::nn::Sequential grid;
  kten::nn::ConvOptions circular;
  circular.padding = {1};
  circular.padding_mode = kten::nn::PaddingMode::circular;
  grid.add(kten::nn::Conv2d(1, 4, {3, 3}, circular));
  grid.add(kten::nn::GroupNorm(2, 4));
  grid.add(kten::nn::GELU());
  grid.add(kten::nn::MaxPool2d(kten::Shape{2}));
  kten::nn::UpsampleOptions up;
  up.scale_factor = {2};
  up.mode = kten::nn::InterpolateMode::bilinear;
  grid.add(kten::nn::Upsample(up));
  kten::nn::ConvTransposeOptions t;
  t.stride = {2};
  grid.add(kten::nn::ConvTranspose2d(4, 2, {2, 2}, t));
  kten::nn::ConvOptions replicate;
  replicate.padding = {1};
  replicate.padding_mode = kten::nn::PaddingMode::replicate;
  grid.add(kten::nn::Conv2d(2, 2, {3, 3}, replicate));
  grid.add(kten::nn::AvgPool2d(kten::Shape{2}));
  grid.add(kten::nn::Flatten());
  grid.add(kten::nn::Linear(512, 3));
  grid.add(kten::nn::Activation("Softmax", [](const kten::Tensor& v) { return kten::softmax(v, 1); }));
  kten::nn::Sequential embed;
  embed.add(kten::nn::Embedding(10, 3));
  embed.add(kten::nn::Flatten());
  embed.add(kten::nn::Linear(12, 2));
  for (auto [name, net, example, other] :
       {std::tuple<std::string, kten::nn::Module*, kten::Tensor, kten::Tensor>{
            "grid", &grid, kten::randn({2, 1, 16, 16}, device, 15), kten::randn({3, 1, 16, 16}, device, 16)},
        {"embedding", &embed, kten::tensor(std::vector<std::int64_t>{1, 2, 3, 4, 9, 8, 7, 0}, {2, 4}, device),
         kten::tensor(std::vector<std::int64_t>{5, 5, 0, 1, 2, 3, 4, 6, 7, 8, 9, 0}, {3, 4}, device)}}) {
    net->to(device);
    net->eval();
    const std::string file = dir + "/kten-" + name + ".onnx";
    kten::onnx::save(file, *net, {example});
    auto loaded = kten::onnx::load(file, device);
    kten::NoGradGuard no_grad;
    ok = close("the traced " + name + " model read back (another batch size)", loaded(other), (*net)(other), 1e-5, 1e-6) && ok;
  }
  return ok;
}

bool onnx_from_torch(const std::string& python, const std::string& script, const std::string& dir, const kten::Device& device) {
  if (!run_python(python, script, "onnx-export", dir)) return false;
  bool ok = true;
  for (const std::string mode : {"eval", "train"}) {
    auto net = kten::onnx::load(dir + "/mlp-" + mode + ".onnx", device);
    const auto ref = kten::io::load_safetensors(dir + "/mlp-" + mode + "-ref.safetensors", device);
    const kten::Tensor x = find(ref, "x"), target = find(ref, "target");
    std::cout << mode << ": opset " << net.opset() << ", " << net.named_parameters().size() << " parameters\n";
    ok = close_to_largest(mode + ": outputs (batch 7, exported with 4)", net(x), find(ref, "y"), 1e-4) && ok;
    net.zero_grad();
    kten::nn::MSELoss()(net(x), target).backward();
    for (const auto& p : net.named_parameters())
      ok = close_to_largest(mode + ": gradient of " + p.name, p.slot->value.grad(), find(ref, "grad." + p.name), 1e-4,
                            largest_gradient(net, ref)) && ok;
    net.zero_grad();
    kten::optim::Adam adam(1e-2);
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad(net);
      kten::nn::MSELoss()(net(x), target).backward();
      adam.step(net);
    }
    for (const auto& p : net.named_parameters())
      ok = close(mode + ": " + p.name + " after three Adam steps", p.slot->value, find(ref, "after." + p.name), 0, 1e-5) && ok;
    // Re-export with the trained weights; the file reloads to the same outputs.
    kten::onnx::save(dir + "/kten-mlp-" + mode + ".onnx", net);
    auto again = kten::onnx::load(dir + "/kten-mlp-" + mode + ".onnx", device);
    kten::NoGradGuard no_grad;
    ok = close(mode + ": re-exported model's outputs", again(x), net(x), 0, 0) && ok;
  }
  // A small attention block (batch and length dynamic; shape arithmetic, Range, Sin, Cos, Split,
  // batched MatMul, Softmax, LeakyRelu): outputs and gradients, and no device synchronisation.
  {
    auto net = kten::onnx::load(dir + "/attention-eval.onnx", device);
    const auto ref = kten::io::load_safetensors(dir + "/attention-eval-ref.safetensors", device);
    const kten::Tensor x = find(ref, "x"), target = find(ref, "target");
    ok = close_to_largest("attention: outputs (3 x 6, exported with 2 x 5)", net(x), find(ref, "y"), 1e-4) && ok;
    kten::reset_stats();
    const kten::Tensor loss = kten::nn::MSELoss()(net(x), target);
    loss.backward();
    std::cout << "attention: forward and backward made " << kten::stats().host_syncs << " host synchronisations\n";
    ok = kten::stats().host_syncs == 0 && ok;
    for (const auto& p : net.named_parameters())
      ok = close_to_largest("attention: gradient of " + p.name, p.slot->value.grad(), find(ref, "grad." + p.name), 1e-4,
                            largest_gradient(net, ref)) && ok;
  }
  // kten's own layers, written by save() and read back.
  kten::nn::Sequential seq;
  seq.add(kten::nn::Linear(5, 8, {true, kten::float32, 1}));
  seq.add(kten::nn::LayerNorm(8));
  seq.add(kten::nn::SiLU());
  seq.add(kten::nn::Linear(8, 8, {true, kten::float32, 2}));
  seq.add(kten::nn::GELU());
  seq.add(kten::nn::Softplus(2.0));
  seq.add(kten::nn::Tanh());
  seq.add(kten::nn::Linear(8, 2, {true, kten::float32, 3}));
  seq.to(device);
  seq.eval();
  const kten::Tensor x = kten::randn({6, 5}, device, 5);
  kten::onnx::save(dir + "/kten-sequential.onnx", seq, {kten::randn({3, 5}, device, 4)});
  auto loaded = kten::onnx::load(dir + "/kten-sequential.onnx", device);
  kten::NoGradGuard no_grad;
  ok = close("kten's Sequential written and read back (batch 6, written with 3)", loaded(x), seq(x), 1e-6, 1e-6) && ok;
  ok = traced_block(dir, device) && ok;
  return run_python(python, script, "onnx-check", dir) && ok;
}

// --- ONNX grids and graphs (kten::onnx, issue 32) -----------------------------------------------
// PyTorch exports a 1-D CNN (replicate padding, BatchNorm1d, average, max and adaptive pooling,
// softmax; at opsets 15 and 13, BatchNormalization's two training forms) and a 2-D U-Net (periodic
// padding, GroupNorm, GELU, ConvTranspose2d, bilinear and nearest upsampling, skip concatenation,
// residual) in training mode, a 3-D conv net (InstanceNorm3d, LeakyReLU, reflect padding) and a
// message-passing net (Embedding, index gathers, scatter_add_, Where, Equal, gather) in evaluation
// mode. kten must give PyTorch's outputs (on a batch other than the export's where the batch axis
// is dynamic) and parameter gradients, and for the models exported in training mode the
// parameters and BatchNorm's running statistics after three Adam steps.
bool onnx_grid_from_torch(const std::string& python, const std::string& script, const std::string& dir,
                          const kten::Device& device) {
  if (!run_python(python, script, "onnx-grid-export", dir)) return false;
  bool ok = true;
  for (const std::string name : {"cnn1d", "cnn1d-opset13", "unet", "conv3d", "gnn"}) {
    auto net = kten::onnx::load(dir + "/" + name + ".onnx", device);
    ok = kten::test::matches_reference(name, net, kten::io::load_safetensors(dir + "/" + name + "-ref.safetensors", device)) && ok;
  }
  return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  kten::test::configure_run();
  if (argc != 5 || (std::string(argv[1]) != "from-torch" && std::string(argv[1]) != "to-torch" && std::string(argv[1]) != "onnx" &&
                    std::string(argv[1]) != "onnx-grid")) {
    std::cerr << "usage: " << argv[0] << " from-torch|to-torch|onnx|onnx-grid PYTHON SCRIPT DIR\n";
    return 2;
  }
  kten::ScopeGuard guard;
  const std::string command = argv[1], python = argv[2], script = argv[3], dir = argv[4];
  const char* device_name = std::getenv("KTEN_TEST_DEVICE");
  const kten::Device device = device_name && std::string(device_name) == "gpu" ? kten::gpu(0) : kten::cpu();
  std::filesystem::create_directories(dir);
  std::cout << "kten-torch-interchange " << command << " on " << device.str() << ", files in " << dir << "\n";
  try {
    if (command == "onnx") return onnx_from_torch(python, script, dir, device) ? 0 : 1;
    if (command == "onnx-grid") return onnx_grid_from_torch(python, script, dir, device) ? 0 : 1;
    if (command == "from-torch") return run_python(python, script, "save", dir) && from_torch(dir, device) ? 0 : 1;
    to_torch(dir, device);
    return run_python(python, script, "check", dir) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
