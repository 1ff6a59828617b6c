// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libtorch's side of the *_vs_libtorch rows: the workloads of libtorch.hpp written as a libtorch
// user would, each closure owning its tensors. float32 on the CPU.
#include "libtorch.hpp"

#include <memory>

#include <torch/torch.h>

namespace kten::perf::libtorch {
namespace {

torch::nn::Sequential mlp(const MlpShape& s) {
  return torch::nn::Sequential(torch::nn::Linear(s.in, s.hidden), torch::nn::ReLU(),
                               torch::nn::Linear(s.hidden, s.hidden), torch::nn::ReLU(),
                               torch::nn::Linear(s.hidden, s.out));
}

// Forward and backward of `f` to a fresh gradient of x each call (set to none, as kten's side does).
template <class F>
std::function<void()> forward_backward(std::int64_t rows, std::int64_t cols, F f) {
  auto x = torch::rand({rows, cols}).requires_grad_();
  auto g = torch::rand({rows, cols});
  return [=]() mutable {
    x.mutable_grad().reset();
    f(x).backward(g);
  };
}

}  // namespace

std::string version() { return TORCH_VERSION; }

std::string blas() {
  const std::string config = torch::show_config();
  const auto at = config.find("BLAS_INFO=");
  return at == std::string::npos ? "unknown" : config.substr(at + 10, config.find_first_of(", \n", at + 10) - at - 10);
}

void set_threads(int threads) { torch::set_num_threads(threads); }

std::function<void()> mlp_step(const MlpShape& s, Optimizer optimizer) {
  torch::manual_seed(0);
  auto model = mlp(s);
  std::shared_ptr<torch::optim::Optimizer> opt;
  if (optimizer == Optimizer::sgd) opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01));
  else opt = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto X = torch::rand({s.batch, s.in}), Y = torch::rand({s.batch, s.out});
  return [=]() mutable {
    opt->zero_grad();
    torch::mse_loss(model->forward(X), Y).backward();
    opt->step();
  };
}

std::function<void()> mlp_inference(const MlpShape& s, std::int64_t batch) {
  torch::manual_seed(0);
  auto model = mlp(s);
  auto X = torch::rand({batch, s.in});
  return [=]() mutable {
    torch::InferenceMode inference;
    model->forward(X);
  };
}

std::function<void()> add(std::int64_t n) {
  auto x = torch::rand({n}), y = torch::rand({n});
  return [=] {
    torch::InferenceMode inference;
    x + y;
  };
}

std::function<void()> softmax_forward_backward(std::int64_t rows, std::int64_t cols) {
  return forward_backward(rows, cols, [](const torch::Tensor& x) { return torch::softmax(x, -1); });
}

std::function<void()> layer_norm_forward_backward(std::int64_t rows, std::int64_t cols) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}));
  return forward_backward(rows, cols, [norm](const torch::Tensor& x) mutable { return norm->forward(x); });
}

std::function<void()> gelu_forward_backward(std::int64_t rows, std::int64_t cols) {
  return forward_backward(rows, cols, [](const torch::Tensor& x) { return torch::gelu(x); });
}

// Convolutions (issue 31): F.conv2d / F.conv3d as a model calls them, a fresh input gradient each call.
std::function<void()> conv_forward_backward(const ConvShape& s) {
  std::vector<std::int64_t> x_shape{s.batch, s.channels}, w_shape{s.channels, s.channels};
  for (std::int64_t e : s.spatial) x_shape.push_back(e), w_shape.push_back(s.kernel);
  auto x = torch::rand(x_shape).requires_grad_(), w = torch::rand(w_shape).requires_grad_(), b = torch::rand({s.channels}).requires_grad_();
  std::vector<std::int64_t> out_shape = x_shape;
  auto g = torch::rand(out_shape);
  const std::int64_t pad = s.kernel / 2;
  return [=]() mutable {
    x.mutable_grad().reset();
    w.mutable_grad().reset();
    b.mutable_grad().reset();
    (s.spatial.size() == 2 ? torch::conv2d(x, w, b, 1, pad) : torch::conv3d(x, w, b, 1, pad)).backward(g);
  };
}

}  // namespace kten::perf::libtorch
