// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Layers, gradients, training on a device, save and load.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "support.hpp"

using namespace kten;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kten-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::vector<std::vector<double>> snapshot(nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : m.parameters())
    out.push_back(p.dtype() == float32 ? test::host_doubles<float>(p) : test::host_doubles<double>(p));
  return out;
}

// A parameter file written field by field (the layout docs/training.md documents), for files save() never
// writes: each parameter's fields are given as they appear, and finish() appends a valid checksum.
struct CraftedFile {
  std::string bytes = std::string("KTENPRM\n");
  CraftedFile& u(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  CraftedFile& parameter(const std::string& name, const std::vector<std::uint64_t>& extents, std::uint64_t byte_count,
                         std::size_t data_bytes) {
    u(name.size(), 4);
    bytes += name;
    u(0, 1).u(extents.size(), 1);  // float32
    for (auto e : extents) u(e, 8);
    u(byte_count, 8);
    bytes.append(data_bytes, '\0');
    return *this;
  }
  // A float32 parameter and its values.
  CraftedFile& values(const std::string& name, const std::vector<std::uint64_t>& extents, const std::vector<float>& v) {
    parameter(name, extents, 4 * v.size(), 0);
    for (float f : v) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      u(bits, 4);
    }
    return *this;
  }
  std::string finish() const {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
    return CraftedFile{bytes}.u(h, 8).bytes;
  }
};

nn::Sequential small_mlp(DType dtype, std::uint64_t seed) {
  nn::Sequential net;
  net.add(nn::Linear(3, 5, {true, dtype, seed}));
  net.add(nn::ReLU());
  net.add(nn::Linear(5, 2, {true, dtype, seed + 1}));
  return net;
}

}  // namespace

TEST_CASE("a lazy Linear infers in_features at the first call, on the module's device", "[nn]") {
  const Device d = test::device();
  nn::Sequential net;
  net.add(nn::Linear(1));
  CHECK(net.size() == 1);
  CHECK(net.parameters().empty());
  net.to(d);
  CHECK(net.device() == d);
  auto X = rand({4, 3}, d, 1);
  auto out = net(X);
  CHECK(out.shape() == Shape{4, 1});
  CHECK(out.device() == d);
  REQUIRE(net.parameters().size() == 2);
  CHECK(net.parameters()[0].device() == d);
  CHECK(net.parameters()[0].shape() == Shape{1, 3});  // (out, in)
  CHECK(dynamic_cast<nn::Linear&>(net[0]).in_features() == 3);
  CHECK_THROWS_AS(net(rand({4, 2}, d, 1)), ShapeError);
  CHECK_THROWS_AS(net[1], Error);
}

TEST_CASE("a lazy Linear refuses a first input it cannot take its shape from, and stays lazy", "[nn]") {
  const Device d = test::device();
  nn::Linear layer(3);
  layer.to(d);
  try {
    layer(zeros({2, 0}, d));
    FAIL("expected ShapeError");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("in_features must be >= 1") != std::string::npos);
  }
  CHECK(layer.in_features() == -1);
  CHECK(layer.parameters().empty());
  CHECK_THROWS_AS(layer(zeros({2, 4}, d, float64)), DTypeError);
  CHECK(layer.parameters().empty());
  CHECK(layer(ones({2, 4}, d)).shape() == Shape{2, 3});
  CHECK(layer.in_features() == 4);
}

TEST_CASE("Linear computes x W^T + b and initialises like PyTorch, reproducibly", "[nn]") {
  const Device d = test::device();
  nn::Linear a(4, 3, {true, float64, 7}), b(4, 3, {true, float64, 7}), c(4, 3, {true, float64, 8});
  a.to(d);
  CHECK(test::host_doubles<double>(a.weight()) == test::host_doubles<double>(b.weight()));
  CHECK(test::host_doubles<double>(a.weight()) != test::host_doubles<double>(c.weight()));
  for (double w : test::host_doubles<double>(a.weight())) CHECK(std::fabs(w) <= 0.5);  // 1/sqrt(4)
  for (double w : test::host_doubles<double>(a.bias())) CHECK(std::fabs(w) <= 0.5);
  auto X = randn({5, 4}, d, 3, float64);
  const auto hx = test::host_doubles<double>(X), hw = test::host_doubles<double>(a.weight()),
             hb = test::host_doubles<double>(a.bias());
  std::vector<double> ref(15);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      ref[i * 3 + j] = hb[j];
      for (int k = 0; k < 4; ++k) ref[i * 3 + j] += hx[i * 4 + k] * hw[j * 4 + k];  // W is (out, in)
    }
  test::require_allclose<double>(a(X), ref);
  nn::Linear no_bias(4, 3, {false, float64, 1});
  CHECK(no_bias.parameters().size() == 1);
  CHECK_THROWS_AS(a(randn({5, 4}, d, 3, float32)), DTypeError);
}

TEST_CASE("an input on another device than the parameters throws DeviceMismatch", "[nn][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  nn::Sequential net;
  net.add(nn::Linear(2));
  net.to(d);
  try {
    net(ones({3, 2}, other));
    FAIL("expected DeviceMismatch");
  } catch (const DeviceMismatch& e) {
    const std::string msg = e.what();
    CHECK(msg.find(d.str()) != std::string::npos);
    CHECK(msg.find(other.str()) != std::string::npos);
  }
  net(ones({3, 2}, d));
  net.to(other);
  CHECK(net.parameters()[0].device() == other);
  CHECK(net(ones({3, 2}, other)).device() == other);
}

TEST_CASE("backward matches finite differences in float64", "[nn][grad]") {
  const Device d = test::device();
  auto net = small_mlp(float64, 11);
  net.to(d);
  const auto X = randn({6, 3}, d, 21, float64), Y = randn({6, 2}, d, 22, float64);
  nn::MSELoss loss;
  auto loss_value = [&](const Tensor& x) { return loss(net(x), Y).item<double>(); };

  net.zero_grad();
  Tensor x = X.detach();  // a leaf of its own, for d(loss)/d(X)
  x.requires_grad_();
  const Tensor prediction = net(x);
  prediction.backward(loss.backward(prediction, Y));
  const Tensor grad_x = x.grad();
  const double h = 1e-6;
  for (auto& [name, slot] : net.named_parameters()) {
    CAPTURE(name);
    const auto analytic = test::host_doubles<double>(slot->grad);
    auto values = test::host_doubles<double>(slot->value);
    std::vector<double> numeric(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double keep = values[i];
      values[i] = keep + h;
      slot->value.copy_from(tensor(values, slot->value.shape()));
      const double up = loss_value(X);
      values[i] = keep - h;
      slot->value.copy_from(tensor(values, slot->value.shape()));
      const double down = loss_value(X);
      values[i] = keep;
      slot->value.copy_from(tensor(values, slot->value.shape()));
      numeric[i] = (up - down) / (2 * h);
    }
    test::require_allclose(analytic, numeric, 1e-5, 1e-8);
  }
  auto xs = test::host_doubles<double>(X);
  std::vector<double> numeric_x(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    auto up = xs, down = xs;
    up[i] += h, down[i] -= h;
    numeric_x[i] = (loss_value(tensor(up, {6, 3}, d)) - loss_value(tensor(down, {6, 3}, d))) / (2 * h);
  }
  test::require_allclose(test::host_doubles<double>(grad_x), numeric_x, 1e-5, 1e-8);
}

TEST_CASE("ReLU backward passes the gradient where the input is positive or NaN, like PyTorch", "[nn][grad]") {
  const Device d = test::device();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  nn::ReLU relu;
  relu.to(d);
  Tensor x = tensor({nan, -1.0, 0.0, 2.0}, d);
  x.requires_grad_();
  const Tensor y = relu(x);
  // A NaN input took the identity branch forward (relu(nan) is nan), so its gradient passes too.
  y.backward(tensor({3.0, 3.0, 3.0, 3.0}, d), /*retain_graph=*/true);
  CHECK(test::host_doubles<double>(x.grad()) == std::vector<double>{3, 0, 0, 3});
  // A NaN gradient reaches the input wherever the gradient passes; where relu is flat it is 0.
  x.set_grad(Tensor());  // this pass's gradient, not the sum of both
  y.backward(tensor({nan, nan, nan, nan}, d));
  const auto g = test::host_doubles<double>(x.grad());
  CHECK(std::isnan(g[0]));
  CHECK(g[1] == 0);
  CHECK(g[2] == 0);
  CHECK(std::isnan(g[3]));
}

TEST_CASE("gradients accumulate over backward passes until zero_grad", "[nn][grad]") {
  const Device d = test::device();
  nn::Linear layer(2, 1, {true, float64, 3});
  layer.to(d);
  const auto X = ones({1, 2}, d, float64);
  layer(X).backward(ones({1, 1}, d, float64));
  layer(X).backward(ones({1, 1}, d, float64));
  CHECK(test::host_doubles<double>(layer.named_parameters()[0].slot->grad) == std::vector<double>{2, 2});
  layer.zero_grad();
  CHECK(test::host_doubles<double>(layer.named_parameters()[1].slot->grad) == std::vector<double>{0});
}

TEST_CASE("SGD applies lr and weight decay on the device", "[nn][optim]") {
  const Device d = test::device();
  nn::Linear layer(2, 1, {false, float64, 3});
  layer.to(d);
  const auto w0 = test::host_doubles<double>(layer.weight());
  layer(tensor({{1.0, 2.0}}, d)).backward(ones({1, 1}, d, float64));  // dW = g^T x = [[1, 2]]
  optim::SGD sgd(0.5f, 0.25f);
  sgd.step(layer);
  CHECK(layer.weight().device() == d);
  test::require_allclose<double>(layer.weight(), {w0[0] - 0.5 * (1 + 0.25 * w0[0]), w0[1] - 0.5 * (2 + 0.25 * w0[1])},
                                 1e-7, 1e-7);
}

TEST_CASE("SGD refuses a learning rate or weight decay that is NaN, infinite or negative", "[nn][optim]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf, -0.1f}) {
    CAPTURE(bad);
    try {
      optim::SGD sgd(bad);
      FAIL("expected kten::Error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("learning rate") != std::string::npos);
    }
    try {
      optim::SGD sgd(0.1f, bad);
      FAIL("expected kten::Error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("weight decay") != std::string::npos);
    }
  }
  CHECK(optim::SGD(0.f).lr() == 0.f);
}

TEST_CASE("SyntheticRegression batches are seeded, shuffled and made on the host", "[nn][data]") {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 100, 50, 3);
  CHECK(data.X().shape() == Shape{150, 2});
  CHECK(data.X().device() == cpu());
  const auto a = data.batches(true, 32, 0), b = data.batches(true, 32, 0), c = data.batches(true, 32, 1);
  REQUIRE(a.size() == 4);
  CHECK(a.back().X.shape() == Shape{4, 2});
  CHECK(a[0].X.device() == cpu());
  CHECK(a[0].X.to_vector<float>() == b[0].X.to_vector<float>());
  CHECK(a[0].X.to_vector<float>() != c[0].X.to_vector<float>());
  CHECK(data.batches(false, 32, 0).size() == 2);
  // y = X w + b + small noise
  const auto x = data.X().to_vector<float>(), y = data.y().to_vector<float>();
  for (int i = 0; i < 150; ++i) CHECK(std::fabs(y[i] - (2 * x[2 * i] - 3.4 * x[2 * i + 1] + 4.2)) < 0.06);
  try {
    data::SyntheticRegression({1.f}, 0.f, 0.f, std::numeric_limits<std::int64_t>::max(), 1, 0);
    FAIL("expected ShapeError");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("does not fit in 64 bits") != std::string::npos);
  }
}

TEST_CASE("the Trainer recovers d2l's w and b on its device, reading losses once per epoch", "[nn][trainer]") {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 1000, 1000, 0);
  nn::Sequential model;
  model.add(nn::Linear(1));
  optim::SGD sgd(0.03f);
  // The device under test, also when a GPU is present and this run tests cpu().
  Trainer trainer(3, test::device().is_gpu() ? 1 : 0);
  CHECK(trainer.device() == test::device());
  std::ostringstream progress;
  trainer.set_progress_stream(&progress);
  reset_stats();
  const auto reports = trainer.fit(model, nn::MSELoss(), sgd, data, 32);
  const Stats s = stats();
  REQUIRE(reports.size() == 3);
  CHECK(s.host_syncs == 3);  // one read per epoch, never one per batch (32 batches per epoch)
  if (trainer.device().is_gpu()) CHECK(s.host_to_device == 3 * 2 * (32 + 32) + 2);  // batches + one-hot slots
  CAPTURE(reports[0].train_loss, reports[2].train_loss, reports[2].val_loss);
  CHECK(reports[2].train_loss < reports[0].train_loss / 10);
  CHECK(reports[2].val_loss < 1e-3);
  CHECK(reports.back().samples_per_sec > 0);
  CHECK(progress.str().find("epoch 3/3") != std::string::npos);
  CHECK(progress.str().find(trainer.device().str()) != std::string::npos);
  for (const Tensor& p : model.parameters()) CHECK(p.device() == trainer.device());
  const auto w = model.parameters()[0].to_vector<float>();
  const auto b = model.parameters()[1].item<float>();
  CHECK(std::fabs(w[0] - 2.0) < 0.05);
  CHECK(std::fabs(w[1] + 3.4) < 0.05);
  CHECK(std::fabs(b - 4.2) < 0.05);
}

TEST_CASE("MSELoss is the mean squared difference, NaN included, on the device", "[nn]") {
  const Device d = test::device();
  for (std::int64_t n : {1, 7, 1000, 20000}) {  // one kernel below the serial grain, parts above
    CAPTURE(n);
    const Tensor p = uniform({n, 1}, -2.0, 2.0, d, 5), t = uniform({n, 1}, -2.0, 2.0, d, 6);
    const auto hp = test::host_doubles<float>(p), ht = test::host_doubles<float>(t);
    double want = 0;
    for (std::int64_t i = 0; i < n; ++i) want += (hp[i] - ht[i]) * (hp[i] - ht[i]);
    const Tensor loss = nn::MSELoss()(p, t);
    CHECK(loss.ndim() == 0);
    CHECK(loss.device() == d);
    test::require_allclose<float>(loss, {want / n}, 1e-5, 1e-7);
  }
  std::vector<float> with_nan(100, 1.f);
  with_nan[42] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(nn::MSELoss()(tensor(with_nan, d), zeros({100}, d)).item<float>()));
}

TEST_CASE("the Trainer reports the mean loss over every example, a short last batch included", "[nn][trainer]") {
  // 100 training and 70 validation examples in batches of 32: last batches of 4 and 6. With a zero
  // learning rate the model stays as initialised, so each report is the loss of the whole set.
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 100, 70, 0);
  nn::Sequential model;
  model.add(nn::Linear(1));
  optim::SGD frozen(0.f);
  Trainer trainer(2, test::device().is_gpu() ? 1 : 0);
  trainer.set_progress_stream(nullptr);
  const auto reports = trainer.fit(model, nn::MSELoss(), frozen, data, 32);
  REQUIRE(reports.size() == 2);
  auto whole = [&](bool train) {
    const data::Batch all = data.batches(train, 1000, 0)[0];
    return nn::MSELoss()(model(all.X.to(trainer.device())), all.y.to(trainer.device())).item<float>();
  };
  const double train = whole(true), val = whole(false);
  for (const auto& r : reports) {
    CAPTURE(r.epoch, r.train_loss, train, r.val_loss, val);
    CHECK(std::fabs(r.train_loss - train) <= 1e-5 * train);
    CHECK(std::fabs(r.val_loss - val) <= 1e-5 * val);
  }
}

namespace {
// MSE whose value is reshaped to `shape` (one element: {1}; or repeated: {2}).
struct ShapedMSELoss : nn::MSELoss {
  Shape shape;
  explicit ShapedMSELoss(Shape s) : shape(std::move(s)) {}
  Tensor operator()(const Tensor& prediction, const Tensor& target) const override {
    const Tensor loss = nn::MSELoss::operator()(prediction, target).reshape({1});
    return shape == Shape{1} ? loss : loss * ones(shape, loss.device());
  }
};
}  // namespace

TEST_CASE("the Trainer takes a one-element loss of any rank and refuses a longer one", "[nn][trainer]") {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 64, 64, 0);
  Trainer trainer(1, test::device().is_gpu() ? 1 : 0);
  trainer.set_progress_stream(nullptr);
  optim::SGD sgd(0.03f);
  nn::Sequential a, b;
  a.add(nn::Linear(1));
  b.add(nn::Linear(1));
  const auto reports = trainer.fit(a, ShapedMSELoss({1}), sgd, data, 32);
  REQUIRE(reports.size() == 1);
  CHECK(std::isfinite(reports[0].train_loss));
  try {
    trainer.fit(b, ShapedMSELoss({2}), sgd, data, 32);
    FAIL("a loss of shape 2 was accepted");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("Trainer: the loss must be one number") != std::string::npos);
  }
}

TEST_CASE("save then load restores parameters, into a lazy model too", "[nn][io]") {
  const Device d = test::device();
  const std::string path = temp_path("roundtrip.kten");
  auto net = small_mlp(float32, 5);
  net.to(d);
  net.save(path);
  auto other = small_mlp(float32, 99);
  other.load(path, d);
  CHECK(snapshot(other) == snapshot(net));
  CHECK(other.parameters()[0].device() == d);

  nn::Sequential lazy;
  lazy.add(nn::Linear(5));
  lazy.add(nn::ReLU());
  lazy.add(nn::Linear(2));
  lazy.load(path, d);
  CHECK(snapshot(lazy) == snapshot(net));
  auto X = rand({4, 3}, d, 1);
  CHECK(lazy(X).to_vector<float>() == net(X).to_vector<float>());

  nn::Sequential unshaped;
  unshaped.add(nn::Linear(1));
  CHECK_THROWS_AS(unshaped.save(path), Error);
  auto reread = small_mlp(float32, 42);
  reread.load(path, d);
  CHECK(snapshot(reread) == snapshot(net));  // the failed save left the file intact
  std::remove(path.c_str());
}

TEST_CASE("a version-1 file, whose Linear weights were (in, out), loads transposed and computes as before", "[nn][io][layers]") {
  const Device d = test::device();
  const std::string path = temp_path("version1.kten");
  // Linear(3, 2), ReLU, Linear(2, 1) as kten wrote it before version 2, weights (in, out).
  const std::vector<float> w0{1, -2, 0.5, 3, -1, 0.25}, b0{0.5, -0.5}, w1{2, -1}, b1{0.125};
  std::ofstream(path, std::ios::binary) << CraftedFile()
                                               .u(1, 4)
                                               .u(4, 4)
                                               .values("0.weight", {3, 2}, w0)
                                               .values("0.bias", {2}, b0)
                                               .values("2.weight", {2, 1}, w1)
                                               .values("2.bias", {1}, b1)
                                               .finish();
  const std::vector<float> x{0.5, -1, 2, 1, 1, 1};
  std::vector<double> want;  // relu(x W0 + b0) W1 + b1, with W as the file holds it
  for (int r = 0; r < 2; ++r) {
    double out = b1[0];
    for (int j = 0; j < 2; ++j) {
      double h = b0[j];
      for (int k = 0; k < 3; ++k) h += x[r * 3 + k] * w0[k * 2 + j];
      out += std::max(h, 0.0) * w1[j];
    }
    want.push_back(out);
  }
  nn::Sequential eager;
  eager.add(nn::Linear(3, 2, {true, float32, 1}));
  eager.add(nn::ReLU());
  eager.add(nn::Linear(2, 1, {true, float32, 2}));
  nn::Sequential lazy;
  lazy.add(nn::Linear(2));
  lazy.add(nn::ReLU());
  lazy.add(nn::Linear(1));
  for (nn::Sequential* model : {&eager, &lazy}) {
    model->load(path, d);
    const auto& first = dynamic_cast<nn::Linear&>((*model)[0]);
    CHECK(first.weight().shape() == Shape{2, 3});
    CHECK(first.weight().to_vector<float>() == std::vector<float>{1, 0.5, -1, -2, 3, 0.25});  // transposed
    test::require_allclose<float>((*model)(tensor(x, {2, 3}, d)), want);
  }
  // Saved again, it is a version-2 file holding (out, in) weights, and computes the same.
  eager.save(path);
  std::ifstream in(path, std::ios::binary);
  const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(saved[8] == 2);
  nn::Sequential reloaded;
  reloaded.add(nn::Linear(2));
  reloaded.add(nn::ReLU());
  reloaded.add(nn::Linear(1));
  reloaded.load(path, d);
  test::require_allclose<float>(reloaded(tensor(x, {2, 3}, d)), want);
  std::remove(path.c_str());
}

TEST_CASE("save on one device, load on another", "[nn][io][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  const std::string path = temp_path("devices.kten");
  auto net = small_mlp(float64, 5);
  net.to(d);
  net.save(path);
  auto copy = small_mlp(float64, 6);
  copy.load(path, other);
  CHECK(copy.device() == other);
  for (const Tensor& p : copy.parameters()) CHECK(p.device() == other);
  CHECK(snapshot(copy) == snapshot(net));
  std::remove(path.c_str());
}

TEST_CASE("a malformed parameter file throws FormatError and leaves the model as it was", "[nn][io]") {
  const Device d = test::device();
  const std::string path = temp_path("good.kten"), bad = temp_path("bad.kten");
  auto net = small_mlp(float32, 5);
  net.to(d);
  net.save(path);
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& bytes) { std::ofstream(bad, std::ios::binary) << bytes; };
  auto model = small_mlp(float32, 77);
  model.to(d);
  const auto before = snapshot(model);
  auto expect_format_error = [&](const std::string& what, const std::string& needle) {
    CAPTURE(what);
    try {
      model.load(bad, d);
      FAIL("expected FormatError");
    } catch (const FormatError& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    CHECK(snapshot(model) == before);
  };
  std::remove(bad.c_str());
  expect_format_error("missing", "cannot open");
  write(good.substr(0, good.size() / 2));
  expect_format_error("truncated", "truncated");
  std::string flipped = good;
  flipped[good.size() - 12] ^= 0x40;  // inside the last parameter's values
  write(flipped);
  expect_format_error("corrupted values", "checksum");
  flipped = good;
  flipped[good.size() - 20] ^= 0x40;  // inside the last parameter's byte count
  write(flipped);
  expect_format_error("corrupted header", "corrupted");
  write("not a parameter file at all");
  expect_format_error("foreign", "not a kten parameter file");
  std::string future = good;
  future[8] = 3;
  write(future);
  expect_format_error("version", "version 3");
  nn::Sequential fewer;
  fewer.add(nn::Linear(3, 4));
  fewer.save(bad);
  expect_format_error("other parameter count", "the model has 4");
  nn::Sequential wider;
  wider.add(nn::Linear(3, 7));
  wider.add(nn::ReLU());
  wider.add(nn::Linear(7, 2));
  wider.save(bad);
  expect_format_error("other shapes", "in the model");
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("crafted files whose sizes overflow, and paths that are not files, throw FormatError", "[nn][io]") {
  const Device d = test::device();
  const std::string bad = temp_path("crafted.kten");
  nn::Sequential lazy;
  lazy.add(nn::Linear(4));
  lazy.to(d);
  nn::Sequential eager;
  eager.add(nn::Linear(3, 4, {true, float32, 8}));
  eager.to(d);
  const auto before = snapshot(eager);
  auto expect_format_error = [&](const std::string& what, const std::string& path, const std::string& needle) {
    CAPTURE(what);
    for (nn::Sequential* model : {&lazy, &eager}) {
      try {
        model->load(path, d);
        FAIL("expected FormatError");
      } catch (const FormatError& e) {
        CAPTURE(e.what());
        CHECK(std::string(e.what()).find(needle) != std::string::npos);
      }
    }
    CHECK(lazy.parameters().empty());
    CHECK(snapshot(eager) == before);
  };
  auto write = [&](const CraftedFile& file) {
    std::ofstream(bad, std::ios::binary) << file.finish();
    return bad;
  };
  const std::uint64_t e60 = std::uint64_t(1) << 60, e62 = std::uint64_t(1) << 62;
  // 2^60 x 4 float32 is 2^64 bytes, which wrapped to the claimed 0.
  expect_format_error("byte count wraps to 0",
                      write(CraftedFile().u(1, 4).u(2, 4).parameter("0.weight", {e60, 4}, 0, 0).parameter("0.bias", {4}, 16, 16)),
                      "more bytes than fit in 64 bits");
  // (2^62 - 1) x 4 bytes fits, but reading that far past the end wrapped the read position.
  expect_format_error("byte count past the end",
                      write(CraftedFile().u(1, 4).u(2, 4).parameter("0.weight", {e62 - 1}, 4 * (e62 - 1), 0)),
                      "truncated");
  expect_format_error("extent past int64",
                      write(CraftedFile().u(1, 4).u(2, 4).parameter("0.weight", {std::uint64_t(1) << 63, 0}, 0, 0)),
                      "extent");
  // A lazy extent is filled from the file, but never with 0 (a Linear needs in_features >= 1).
  expect_format_error("lazy extent 0",
                      write(CraftedFile().u(1, 4).u(2, 4).parameter("0.weight", {0, 4}, 0, 0).parameter("0.bias", {4}, 16, 16)),
                      "in the model");
  expect_format_error("name length past the end", write(CraftedFile().u(1, 4).u(1, 4).u(0xffffffffull, 4)),
                      "truncated");
  const std::string dir = temp_path("crafted-dir.kten");
  std::filesystem::create_directories(dir);
  expect_format_error("a directory", dir, "not a regular file");
  expect_format_error("a device", "/dev/null", "not a regular file");
  std::filesystem::remove_all(dir);
  std::remove(bad.c_str());
}

TEST_CASE("two threads saving to one path both succeed, leaving one whole file and no temporaries", "[nn][io]") {
  const Device d = test::device();
  const std::filesystem::path dir = temp_path("concurrent-saves");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.kten").string();
  auto a = small_mlp(float32, 1), b = small_mlp(float32, 2);
  a.to(d);
  b.to(d);
  std::atomic<int> failures{0};
  auto save_repeatedly = [&](nn::Sequential& net) {
    for (int i = 0; i < 50; ++i) {
      try {
        net.save(path);
      } catch (const std::exception&) {
        ++failures;
      }
    }
  };
  std::thread first(save_repeatedly, std::ref(a)), second(save_repeatedly, std::ref(b));
  first.join();
  second.join();
  CHECK(failures == 0);
  auto loaded = small_mlp(float32, 3);
  loaded.load(path, d);
  const auto values = snapshot(loaded);
  CHECK((values == snapshot(a) || values == snapshot(b)));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  CHECK(names == std::vector<std::string>{"model.kten"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("save is atomic: a failed write keeps the old file and leaves no temporary", "[nn][io]") {
  const Device d = test::device();
  const std::string dir = temp_path("as-a-directory");
  std::filesystem::create_directories(dir);
  auto net = small_mlp(float32, 5);
  net.to(d);
  CHECK_THROWS_AS(net.save(dir), Error);  // rename over a directory fails
  CHECK(std::filesystem::is_directory(dir));
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(entry.path().string().find("as-a-directory.tmp") == std::string::npos);
  std::filesystem::remove_all(dir);
}
