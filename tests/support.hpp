// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared test helpers: the device under test, one allclose and one gradient check.

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/catch_message.hpp>

#include <kten/kten.hpp>

namespace kten::test {

/// The device this run tests, from KTEN_TEST_DEVICE ("cpu", the default, or "gpu"); CTest runs
/// the suite once per enabled backend. A "gpu" run without a usable GPU fails loudly.
inline Device device() {
  const char* env = std::getenv("KTEN_TEST_DEVICE");
  const std::string name = env ? env : "cpu";
  if (name == "gpu") {
    require_available(gpu(0));
    return gpu(0);
  }
  REQUIRE(name == "cpu");
  return cpu();
}

/// The other device for cross-device tests ([multidevice] runs need a GPU, real or emulated).
inline Device other_device() { return device().is_cpu() ? gpu(0) : cpu(); }

/// Skips a [multidevice] test case, saying why, when there are fewer than `gpus` GPUs.
#define KTEN_REQUIRE_GPUS(gpus)                                                                \
  do {                                                                                         \
    if (::kten::num_gpus() < (gpus))                                                           \
      SKIP("needs " << (gpus) << " GPU(s), real or emulated (KTEN_EMULATE_GPUS=2); this process has " \
                    << ::kten::num_gpus());                                                    \
  } while (false)

/// Tolerance per element type: float32 results are checked against float64 host references.
template <class T>
constexpr double tolerance() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

/// Elementwise |got - want| <= atol + rtol * |want|, reporting the first element that is off.
template <class T>
void require_allclose(const std::vector<T>& got, const std::vector<double>& want, double rtol = tolerance<T>(),
                      double atol = tolerance<T>()) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(diff <= atol + rtol * std::fabs(want[i]))) {
      INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
      REQUIRE(diff <= atol + rtol * std::fabs(want[i]));
    }
  }
}

/// The tensor's values on the host, checked against a float64 reference.
template <class T>
void require_allclose(const Tensor& t, const std::vector<double>& want, double rtol = tolerance<T>(),
                      double atol = tolerance<T>()) {
  require_allclose(t.to_vector<T>(), want, rtol, atol);
}

/// Host values of a tensor widened to double (the reference computations run in double).
template <class T>
std::vector<double> host_doubles(const Tensor& t) {
  auto v = t.to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

/// The gradients of sum(op(inputs) * w), w random, by backward() on the device under test (the
/// inputs as float64 leaves there) against central differences of the same sum. The differences
/// are taken on cpu(), where the many small evaluations are quick (an emulated GPU's launches are
/// not); the op's forward on the device is the subject of other tests.
inline void check_gradients(const std::string& name, const std::function<Tensor(const std::vector<Tensor>&)>& op,
                            std::vector<Tensor> inputs, double h = 1e-6, double tol = 1e-6) {
  INFO(name);
  const Device d = device();
  std::vector<Tensor> at;  // the inputs on cpu(), where the differences are taken
  for (auto& t : inputs) {
    t = t.astype(float64).to(d).detach().requires_grad_();
    at.push_back(t.detach().to(cpu()));
  }
  const Tensor out = op(inputs);
  const Tensor weights = randn(out.shape(), d, 99, float64);
  sum(out * weights).backward();
  NoGradGuard no_grad;
  const Tensor host_weights = weights.to(cpu());
  const auto loss = [&] { return sum(op(at) * host_weights).item<double>(); };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i << ", shape " << shape_str(inputs[i].shape()));
    const Tensor grad = inputs[i].grad();
    REQUIRE(grad.defined());
    REQUIRE(grad.shape() == inputs[i].shape());
    REQUIRE(grad.device() == d);
    auto values = at[i].to_vector<double>();
    std::vector<double> numeric(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) {
      const double keep = values[k];
      values[k] = keep + h;
      at[i] = tensor(values, inputs[i].shape());
      const double up = loss();
      values[k] = keep - h;
      at[i] = tensor(values, inputs[i].shape());
      const double down = loss();
      values[k] = keep;
      numeric[k] = (up - down) / (2 * h);
    }
    at[i] = tensor(values, inputs[i].shape());
    require_allclose(grad.to_vector<double>(), numeric, tol, tol);
  }
}

/// A folder of its own for one test case (in the system's temporary folder), removed at its end.
struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    static std::atomic<int> counter{0};
    dir = std::filesystem::temp_directory_path() /
          ("kten-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

/// A file's bytes.
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Writes `bytes` as the whole file at `path`.
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A small seeded MLP (3 -> 4 -> ReLU -> 1) on `d`: the same model in every process and thread.
inline nn::Sequential small_mlp(const Device& d) {
  nn::Sequential m;
  m.add(nn::Linear(3, 4, {true, float32, 7}));
  m.add(nn::ReLU());
  m.add(nn::Linear(4, 1, {true, float32, 8}));
  m.to(d);
  return m;
}

}  // namespace kten::test
