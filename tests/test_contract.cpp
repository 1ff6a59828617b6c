// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The public contract's walk-through (docs/architecture.md, "The public contract"; the README's
// first example), verbatim in substance: if a name or a signature drifts, this stops compiling;
// if a semantic drifts, it fails.
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <kten/kokkos.hpp>

#include "support.hpp"

TEST_CASE("the public contract's walk-through compiles and behaves", "[contract]") {
  kten::Device c = kten::cpu();
  CHECK(c.str() == "cpu(0)");
  kten::Device g = kten::gpu(1);
  CHECK(g.str() == "gpu(1)");
  int n = kten::num_gpus();
  CHECK(n >= 0);
  kten::Device d = kten::try_gpu();
  CHECK(d == (n > 0 ? kten::gpu(0) : kten::cpu()));
  std::vector<kten::Device> all = kten::try_all_gpus();
  CHECK(!all.empty());

  auto x = kten::tensor({1.f, 2.f, 3.f});
  CHECK(x.device() == kten::cpu());
  auto A = kten::tensor(std::vector<float>(12, 0.5f)).reshape({3, 4});
  auto X = kten::ones({2, 3}, d);
  auto Y = kten::rand({2, 3}, d, /*seed=*/42);
  auto Z = X.copyto(d);
  auto W = X.to(d);
  auto V = X.as_in_context(d);
  CHECK(W.shares_storage_with(X));
  CHECK(V.shares_storage_with(X));
  CHECK_FALSE(Z.shares_storage_with(X));
  auto S = (Z + 2.f).exp() * Y;
  kten::Tensor n2 = kten::norm(S);
  CHECK(n2.device() == d);
  float v = n2.item<float>();
  CHECK(v > 0);
  std::vector<float> h = S.to_vector<float>();
  CHECK(h.size() == 6);
  std::ostringstream os;
  os << S;
  CHECK(os.str().find("<Tensor 2x3 float32 @" + d.str() + ">") != std::string::npos);
  auto C = kten::matmul(A, A.reshape({4, 3}));
  CHECK(C.shape() == kten::Shape{3, 3});
  CHECK_THROWS_AS(kten::matmul(A, A), kten::ShapeError);
  if (d != kten::cpu()) CHECK_THROWS_AS(x + X, kten::DeviceMismatch);
  static_assert(std::is_base_of_v<kten::Error, kten::DeviceMismatch>);
  static_assert(std::is_base_of_v<std::runtime_error, kten::Error>);

  kten::nn::Sequential net;
  net.add(kten::nn::Linear(1));
  net.to(d);
  auto out = net(X);
  CHECK(out.device() == d);
  CHECK(net.parameters()[0].device() == d);

  kten::data::SyntheticRegression data({2.f, -3.4f}, 4.2f, /*noise=*/0.01f,
                                       /*num_train=*/1000, /*num_val=*/1000, /*seed=*/0);
  kten::nn::Sequential model;
  model.add(kten::nn::Linear(1));
  kten::optim::SGD sgd(/*lr=*/0.03f);
  kten::Trainer trainer(/*max_epochs=*/3, /*num_gpus=*/1);
  trainer.set_progress_stream(nullptr);
  trainer.fit(model, kten::nn::MSELoss(), sgd, data, /*batch_size=*/32);
  CHECK(model.parameters()[0].device() == trainer.device());
  const std::string path = "contract-model-" + std::to_string(reinterpret_cast<std::uintptr_t>(&model)) + ".kten";
  model.save(path);
  model.load(path, kten::cpu());
  CHECK(model.parameters()[0].device() == kten::cpu());
  std::remove(path.c_str());
}

TEST_CASE("the views contract (issue 17) compiles and behaves", "[contract][views]") {
  const kten::Device d = kten::test::device();
  // Views share storage and never copy: a tensor is storage + offset + shape + strides.
  auto X = kten::rand({4, 3}, d, 1);
  auto T = X.transpose(0, 1);  // view, shape {3, 4}; X.transpose() (2-D) is this view too
  CHECK(T.shape() == kten::Shape{3, 4});
  CHECK(X.transpose().strides() == T.strides());
  CHECK_FALSE(T.is_contiguous());
  CHECK(T.strides() == kten::Shape{1, 3});
  auto C = T.contiguous();  // a copy on the same device, only when not contiguous
  CHECK(C.device() == d);
  CHECK(C.is_contiguous());
  auto r = X.select(0, 1);  // shape {3}: row 1
  CHECK(r.shape() == kten::Shape{3});
  auto n = X.narrow(1, 0, 2);  // shape {4, 2}: columns 0..1
  CHECK(n.shape() == kten::Shape{4, 2});
  auto P = kten::rand({2, 3, 4}, d, 2).permute({2, 0, 1});  // shape {4, 2, 3}
  CHECK(P.shape() == kten::Shape{4, 2, 3});
  auto u = r.unsqueeze(0);  // {1, 3};  u.squeeze(0) -> {3};  r.expand({5, 3}) -> {5, 3}
  CHECK(u.shape() == kten::Shape{1, 3});
  CHECK(u.squeeze(0).shape() == kten::Shape{3});
  CHECK(r.expand({5, 3}).shape() == kten::Shape{5, 3});
  auto K = kten::cat({X, X}, 0);  // {8, 3} (a new tensor);  kten::stack({r, r}, 0) -> {2, 3}
  CHECK(K.shape() == kten::Shape{8, 3});
  CHECK(kten::stack({r, r}, 0).shape() == kten::Shape{2, 3});
  for (const auto& v : {T, r, n, u, r.expand({5, 3})}) CHECK(v.shares_storage_with(X));
  CHECK_FALSE(K.shares_storage_with(X));
  // Kokkos interop takes any layout: LayoutLeft (the default of CUDA Views), LayoutRight and
  // LayoutStride wrap without a copy; the tensor's shape is the View's extents, its strides the View's.
  if (d.is_cpu() || kten::gpus_are_emulated()) {
    using Space = Kokkos::HostSpace;
    Kokkos::View<double**, Kokkos::LayoutLeft, Space> left("left", 4, 3);
    auto F = kten::from_view(left, d);
    CHECK(F.shape() == kten::Shape{4, 3});
    CHECK(F.strides() == kten::Shape{1, 4});
    CHECK(F.data() == left.data());
  }
}

TEST_CASE("the dtypes and autograd contract (issue 17) compiles and behaves", "[contract][autograd]") {
  const kten::Device d = kten::test::device();
  auto X = kten::rand({4, 3}, d, 1);
  // dtypes: int64 (indices, class labels) and boolean (masks) join float32 and float64.
  auto labels = kten::tensor(std::vector<std::int64_t>{0, 2, 1, 1}, d);  // DType::int64
  CHECK(labels.dtype() == kten::DType::int64);
  CHECK(labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 1, 1});
  CHECK(kten::argmax(X, 1).dtype() == kten::DType::int64);  // int64 reads and results
  auto mask = kten::gt(X, 0.5);  // DType::boolean
  CHECK(mask.dtype() == kten::DType::boolean);
  auto kept = kten::where(mask, X, kten::zeros({4, 3}, d));
  const auto x = X.to_vector<float>(), k = kept.to_vector<float>();
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(k[i] == (x[i] > 0.5f ? x[i] : 0.f));

  // Autograd: reverse mode over a dynamic tape, as in PyTorch.
  auto w = kten::randn({3, 1}, d, 7).requires_grad_();  // requires_grad_(bool = true)
  auto loss = kten::mean(kten::pow(kten::matmul(X, w) - 1.0, 2.0));
  loss.backward();  // 0-d: implicit gradient 1; t.backward(gradient) otherwise
  CHECK(w.grad().shape() == kten::Shape{3, 1});  // d(loss)/dw, same shape, on d
  CHECK(w.grad().device() == d);
  CHECK(w.requires_grad());
  CHECK_FALSE(w.detach().requires_grad());  // detach(): same storage, no history
  {
    kten::NoGradGuard no_grad;  // records nothing and keeps no activations (inference)
    auto y = kten::matmul(X, w);
    CHECK_FALSE(y.requires_grad());
  }
}

TEST_CASE("the reductions and matmul contract (issue 17 part 5) compiles and behaves", "[contract][reductions-grad]") {
  const kten::Device d = kten::test::device();
  auto x = kten::rand({2, 3, 4}, d, 3, kten::float64);
  x.requires_grad_();
  // softmax(x, axis), log_softmax(x, axis), logsumexp(x, axis, keepdim)
  CHECK(kten::softmax(x, 1).shape() == kten::Shape{2, 3, 4});
  CHECK(kten::log_softmax(x, -1).shape() == kten::Shape{2, 3, 4});
  CHECK(kten::logsumexp(x, 2).shape() == kten::Shape{2, 3});
  CHECK(kten::logsumexp(x, 2, /*keepdim=*/true).shape() == kten::Shape{2, 3, 1});
  // Reductions over several axes, braced or as a vector: sum, mean, max, min (values), norm (L2), var (unbiased).
  CHECK(kten::sum(x, {0, 2}, /*keepdim=*/true).shape() == kten::Shape{1, 3, 1});
  const std::vector<int> axes{0, 2};
  using Reduction = kten::Tensor (*)(const kten::Tensor&, const std::vector<int>&, bool);
  for (Reduction reduce : std::initializer_list<Reduction>{kten::sum, kten::mean, kten::max, kten::min, kten::norm, kten::var}) {
    CHECK(reduce(x, axes, false).shape() == kten::Shape{3});
    CHECK(reduce(x, {-1}, true).shape() == kten::Shape{2, 3, 1});
  }
  // matmul on batches (..., m, k) x (..., k, n) with broadcast batch axes, and on a matrix and a vector.
  auto W = kten::rand({4, 5}, d, 4, kten::float64);
  CHECK(kten::matmul(x, W).shape() == kten::Shape{2, 3, 5});
  CHECK(kten::matmul(kten::rand({5, 1, 3, 4}, d, 5, kten::float64), kten::rand({2, 4, 6}, d, 6, kten::float64)).shape() ==
        kten::Shape{5, 2, 3, 6});
  auto v = kten::rand({4}, d, 7, kten::float64);
  CHECK(kten::matmul(W.transpose(), v).shape() == kten::Shape{5});
  CHECK(kten::matmul(v, W).shape() == kten::Shape{5});
  CHECK(kten::matmul(v, v).shape() == kten::Shape{});
  // Each is differentiable.
  auto loss = kten::sum(kten::softmax(x, 1) * kten::logsumexp(x, 0, true)) + kten::var(x, {1, 2}).sum() +
              kten::norm(kten::matmul(x, W), {0, 2}).sum();
  loss.backward();
  CHECK(x.grad().shape() == x.shape());
}

TEST_CASE("the models contract (issue 18) compiles and behaves", "[contract][layers]") {
  const kten::Device d = kten::test::device();
  auto X = kten::rand({4, 3}, d, 1);
  // DESIGN's labels are {0, 2, 1, 1}; class 2 does not exist for the 2 outputs below, which
  // CrossEntropyLoss refuses on cpu() (IndexError), as PyTorch does. These are in range.
  auto labels = kten::tensor(std::vector<std::int64_t>{0, 1, 1, 0}, d);

  // Layers, modes, losses, optimisers, schedules.
  kten::nn::Sequential mlp;
  mlp.add(kten::nn::Linear(3, 16));  // weight (out, in) in state_dict(), as PyTorch
  mlp.add(kten::nn::GELU());         // also Tanh, Sigmoid, SiLU, Softplus (ReLU as before)
  mlp.add(kten::nn::LayerNorm(16));  // LayerNorm(features, eps = 1e-5): weight and bias
  mlp.add(kten::nn::Dropout(0.1));   // Dropout(p, seed): acts only in training mode
  mlp.add(kten::nn::Linear(16, 2));
  mlp.to(d);
  mlp.train();
  CHECK(mlp.is_training());
  mlp.eval();
  CHECK_FALSE(mlp.is_training());
  mlp.train();
  kten::nn::CrossEntropyLoss ce;  // int64 class targets
  kten::optim::Adam adam(1e-3f);  // Adam(lr, AdamOptions{beta1, beta2, eps, weight_decay})
  kten::optim::AdamW adamw(1e-3f, 1e-2f);
  kten::optim::SGD sgdm(0.1f, kten::optim::SGDOptions{/*momentum=*/0.9f});
  kten::optim::CosineAnnealingLR schedule(adam, /*t_max=*/100);
  adam.zero_grad(mlp);
  auto l = ce(mlp(X), labels);  // a 0-d tensor with history
  CHECK(l.ndim() == 0);
  CHECK(l.requires_grad());
  l.backward();
  auto total = kten::nn::clip_grad_norm_(mlp, 1.0);  // the total norm as a 0-d tensor on the device
  CHECK(total.ndim() == 0);
  CHECK(total.device() == d);
  const auto before = mlp.parameters()[0].to_vector<float>();
  adam.step(mlp);
  schedule.step();
  CHECK(mlp.parameters()[0].to_vector<float>() != before);
  CHECK(adam.lr() < 1e-3);  // the cosine schedule moved the rate

  // Checkpoints: atomic, model, optimiser state and step; FormatError leaves everything unchanged.
  const std::string run_path = "contract-run-" + d.str() + ".ckpt";  // runs on two devices at once
  kten::save_checkpoint(run_path, mlp, adam, /*step=*/1000);
  std::int64_t step = kten::load_checkpoint(run_path, mlp, adam, d);
  CHECK(step == 1000);
  CHECK_THROWS_AS(kten::load_checkpoint(run_path, mlp, sgdm, d), kten::FormatError);  // another kind
  std::remove(run_path.c_str());

  // PyTorch interchange.
  kten::nn::StateDict sd = mlp.state_dict();  // PyTorch's names ("0.weight") and layouts
  REQUIRE(sd.size() == 6);
  CHECK(sd[0].first == "0.weight");
  CHECK(sd[0].second.shape() == kten::Shape{16, 3});
  CHECK(sd[2].first == "2.weight");
  const std::string path = "contract-models-" + d.str() + ".safetensors";  // runs on two devices at once
  kten::io::save_safetensors(path, sd);
  kten::nn::Sequential copy;
  copy.add(kten::nn::Linear(3, 16));
  copy.add(kten::nn::GELU());
  copy.add(kten::nn::LayerNorm(16));
  copy.add(kten::nn::Dropout(0.1));
  copy.add(kten::nn::Linear(16, 2));
  copy.to(d);
  copy.load_state_dict(kten::io::load_safetensors(path, d));  // strict by default
  mlp.eval();
  copy.eval();
  CHECK(copy(X).to_vector<float>() == mlp(X).to_vector<float>());
  std::remove(path.c_str());
}

namespace {
// DESIGN 1c's composed module, verbatim in substance.
class Block : public kten::nn::Module {
 public:
  explicit Block(std::int64_t ch) {
    kten::nn::ConvOptions o;                    // stride {1}, padding {0}, dilation {1}: one value
    o.padding = {1};                            // applies to every spatial axis, or one per axis
    o.padding_mode = kten::nn::PaddingMode::circular;   // zeros | reflect | replicate | circular
    conv_ = register_module("conv", kten::nn::Conv2d(ch, ch, {3, 3}, o));   // std::shared_ptr<Conv2d>
    norm_ = register_module("norm", kten::nn::BatchNorm2d(ch));
    gain_ = register_parameter("gain", kten::ones({1}));      // learnable; returns the tensor
    register_buffer("calls", kten::zeros({1}, kten::cpu(), kten::int64));  // saved and moved, never stepped
  }
  kten::Tensor forward(const kten::Tensor& x) override { return x + gain_ * kten::relu((*norm_)((*conv_)(x))); }
  std::string name() const override { return "Block"; }
 private:
  std::shared_ptr<kten::nn::Conv2d> conv_;
  std::shared_ptr<kten::nn::BatchNorm2d> norm_;
  kten::Tensor gain_;
};
}  // namespace

TEST_CASE("the grid contract (DESIGN 1c): a composed Block compiles, names its state as PyTorch and trains", "[contract][grid]") {
  const kten::Device d = kten::test::device();
  Block block(4);
  block.to(d);
  std::vector<std::string> names;
  for (const auto& [name, t] : block.state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"gain", "calls", "conv.weight", "conv.bias", "norm.weight", "norm.bias",
                                          "norm.running_mean", "norm.running_var", "norm.num_batches_tracked"});
  CHECK(block.parameters().size() == 5);  // gain, conv's two, norm's two: buffers are never stepped
  const kten::Tensor x = kten::rand({2, 4, 8, 8}, d, 3), target = kten::rand({2, 4, 8, 8}, d, 4);
  kten::optim::Adam adam(1e-2f);
  kten::nn::MSELoss mse;
  block.train();
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    adam.zero_grad(block);
    kten::Tensor loss = mse(block(x), target);
    loss.backward();
    adam.step(block);
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < first);
  CHECK(block.state_dict()[8].second.item<std::int64_t>() == 20);  // num_batches_tracked
  block.eval();
  CHECK(block(x).shape() == x.shape());
}

TEST_CASE("the recurrent contract (DESIGN 1d): LSTM and GRU as written there, and an LSTM trains", "[contract][rnn]") {
  const kten::Device d = kten::test::device();
  kten::nn::LSTM lstm(/*input_size=*/3, /*hidden_size=*/32, kten::nn::RNNOptions{});
  kten::nn::GRU gru(3, 32, kten::nn::RNNOptions{});
  lstm.to(d);
  gru.to(d);
  const kten::Tensor x = kten::randn({7, 2, 3}, d, 8);  // (L, N, input_size): batch_first false
  const kten::Tensor h0 = kten::zeros({1, 2, 32}, d), c0 = kten::zeros({1, 2, 32}, d);
  kten::Tensor y = lstm(x);
  auto [y2, hc] = lstm.forward_state(x, {h0, c0});
  auto [y3, h] = gru.forward_state(x, h0);
  CHECK(y.shape() == kten::Shape{7, 2, 32});
  kten::test::require_allclose<double>(y2.astype(kten::float64), kten::test::host_doubles<double>(y.astype(kten::float64)), 0, 0);
  CHECK(std::get<1>(hc).shape() == kten::Shape{1, 2, 32});
  CHECK(y3.shape() == kten::Shape{7, 2, 32});
  CHECK(h.shape() == kten::Shape{1, 2, 32});
  // Predicting the running sum of the first feature from the last step's output.
  kten::nn::Linear head(32, 1);
  head.to(d);
  const kten::Tensor target = kten::sum(x.select(2, 0), 0).reshape({2, 1});
  kten::optim::Adam adam(1e-2f), adam_head(1e-2f);  // an optimiser serves one model
  kten::nn::MSELoss mse;
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    adam.zero_grad(lstm);
    adam_head.zero_grad(head);
    kten::Tensor loss = mse(head(lstm(x).select(0, 6)), target);
    loss.backward();
    adam.step(lstm);
    adam_head.step(head);
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < first / 4);
}

TEST_CASE("the attention contract (DESIGN 1d): SDPA, MultiheadAttention and TransformerEncoderLayer as written there",
          "[contract][attention]") {
  const kten::Device d = kten::test::device();
  const kten::Tensor q = kten::randn({2, 4, 5, 16}, d, 1), k = kten::randn({2, 4, 7, 16}, d, 2), v = kten::randn({2, 4, 7, 16}, d, 3);
  kten::Tensor a = kten::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                      /*is_causal=*/false);
  CHECK(a.shape() == kten::Shape{2, 4, 5, 16});
  kten::nn::MultiheadAttention mha(/*embed_dim=*/64, /*num_heads=*/4,
                                   kten::nn::MultiheadAttentionOptions{});  // dropout, bias, batch_first (false), dtype, seed
  mha.to(d);
  const kten::Tensor query = kten::randn({5, 2, 64}, d, 4), key = kten::randn({7, 2, 64}, d, 5);
  auto [out, weights] = mha.forward(query, key, key);
  CHECK(out.shape() == kten::Shape{5, 2, 64});
  CHECK(weights.shape() == kten::Shape{2, 5, 7});
  CHECK(mha(query).shape() == kten::Shape{5, 2, 64});
  std::vector<std::string> names;
  for (const auto& p : mha.named_parameters()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  kten::nn::TransformerEncoderLayer enc(64, 4, kten::nn::TransformerEncoderLayerOptions{});
  enc.to(d);
  CHECK(enc.options().dim_feedforward == 2048);
  CHECK(enc.options().dropout == 0.1);
  CHECK(enc(query).shape() == kten::Shape{5, 2, 64});
  CHECK(enc.forward(query, {}, {}, /*is_causal=*/true).shape() == kten::Shape{5, 2, 64});
  // A one-layer encoder learns to copy the mean of the sequence into every step.
  kten::nn::TransformerEncoderLayerOptions small;
  small.dim_feedforward = 32;
  small.dropout = 0.0;
  small.seed = 3;
  kten::nn::TransformerEncoderLayer block(8, 2, small);
  block.to(d);
  const kten::Tensor x = kten::randn({6, 4, 8}, d, 6);
  const kten::Tensor target = kten::mean(x, 0).unsqueeze(0).expand({6, 4, 8}) * 0.5;
  kten::optim::Adam adam(1e-2f);
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    adam.zero_grad(block);
    kten::Tensor loss = kten::nn::MSELoss()(block(x), target);
    loss.backward();
    adam.step(block);
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < first / 2);
}
