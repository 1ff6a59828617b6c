// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// int64 and boolean tensors (issue 17 part 3): creation, reads, copies and views, astype, printing,
// save and load; comparisons, where, argmax, index_select and gather; and a DTypeError that says
// what to do from every float-only operation. Expected values follow PyTorch 1.13 (checked with
// it), on cpu() and on the emulated GPU (test::device()).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <kten/kokkos.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t int64_min = std::numeric_limits<std::int64_t>::min();

// A tensor of `dtype` from double values, converted on the device (exact for the values used here;
// nonzero -> true for boolean).
Tensor make(const std::vector<double>& v, const Shape& shape, const Device& d, DType dtype) {
  return tensor(v, shape, d).astype(dtype);
}

// A tensor's values widened to double (exact for the values these tests use).
template <class T>
std::vector<double> values(const Tensor& t) {
  const auto v = t.to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

// The message of the E that f throws; fails the test when it throws nothing.
template <class E, class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return {};
}

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kten-dtypes-" + std::to_string(::getpid()) + "-" + name)).string();
}

// A module whose "parameters" are an int64 counter and a boolean mask (like a BatchNorm's
// num_batches_tracked): what save and load must keep.
struct Buffers : nn::Module {
  nn::Parameter& steps;
  nn::Parameter& mask;
  Buffers(const std::vector<std::int64_t>& s, const std::vector<bool>& m)
      : steps(*register_parameter("steps", nn::Parameter{tensor(s), zeros({3}, cpu(), int64)})),
        mask(*register_parameter("mask", nn::Parameter{tensor(m, {2, 2}), zeros({2, 2}, cpu(), boolean)})) {}
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "Buffers"; }
};

}  // namespace

TEST_CASE("the dtypes contract (issue 17 part 3) compiles and behaves", "[contract][dtypes]") {
  const Device d = test::device();
  auto X = kten::tensor(std::vector<float>{0.1f, 0.9f, 0.3f, 0.7f, 0.2f, 0.6f, 0.5f, 0.4f, 0.8f, 0.95f, 0.05f, 0.f},
                        {4, 3}, d);
  auto labels = kten::tensor(std::vector<std::int64_t>{0, 2, 1, 1}, d);  // DType::int64
  CHECK(labels.dtype() == DType::int64);
  CHECK(labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 1, 1});
  auto am = kten::argmax(X, 1);
  CHECK(am.dtype() == kten::int64);
  CHECK(am.device() == d);
  CHECK(am.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 2, 0});
  auto mask = kten::gt(X, 0.5);  // DType::boolean
  CHECK(mask.dtype() == kten::boolean);
  CHECK(mask.to_vector<bool>() ==
        std::vector<bool>{false, true, false, true, false, true, false, false, true, true, false, false});
  auto kept = kten::where(mask, X, kten::zeros({4, 3}, d));
  CHECK(kept.to_vector<float>() == std::vector<float>{0, 0.9f, 0, 0.7f, 0, 0.6f, 0, 0, 0.8f, 0.95f, 0, 0});
  auto rows = kten::index_select(X, 0, labels);
  CHECK(rows.shape() == Shape{4, 3});
  CHECK(rows.to_vector<float>() ==
        std::vector<float>{0.1f, 0.9f, 0.3f, 0.5f, 0.4f, 0.8f, 0.7f, 0.2f, 0.6f, 0.7f, 0.2f, 0.6f});
  // Each row's score at its label: gather along axis 1 with one index per row.
  auto picked = kten::gather(X, 1, labels.reshape({4, 1}));
  CHECK(picked.to_vector<float>() == std::vector<float>{0.1f, 0.6f, 0.4f, 0.05f});
  CHECK(kten::argmax(X).item<std::int64_t>() == 9);
  CHECK_THROWS_AS(X + labels, kten::DTypeError);
  CHECK_THROWS_AS(labels + labels, kten::DTypeError);
}

TEST_CASE("dtype names, sizes and C++ element types", "[dtypes]") {
  CHECK(dtype_size(int64) == 8);
  CHECK(dtype_size(boolean) == 1);
  CHECK(dtype_size(float32) == 4);
  CHECK(dtype_size(float64) == 8);
  CHECK(std::string(dtype_name(int64)) == "int64");
  CHECK(std::string(dtype_name(boolean)) == "boolean");
  static_assert(dtype_of<std::int64_t>() == DType::int64);
  static_assert(dtype_of<bool>() == DType::boolean);
  static_assert(dtype_of<float>() == DType::float32);
  static_assert(dtype_of<double>() == DType::float64);
  static_assert(is_floating(float64) && !is_floating(int64) && !is_floating(boolean));
}

TEST_CASE("int64 and boolean tensors from host values read back exactly", "[dtypes]") {
  const Device d = test::device();
  const std::vector<std::int64_t> big{int64_min, -1, 0, (std::int64_t(1) << 53) + 1, int64_max};
  auto i = tensor(big, d);
  CHECK(i.device() == d);
  CHECK(i.shape() == Shape{5});
  CHECK(i.nbytes() == 40);
  CHECK(i.to_vector<std::int64_t>() == big);  // past 2^53: never through double
  CHECK(i.select(0, 3).item<std::int64_t>() == (std::int64_t(1) << 53) + 1);

  // std::vector<bool> packs bits; 11 values cross a byte boundary.
  const std::vector<bool> flags{true, false, false, true, true, true, false, true, false, true, true};
  auto b = tensor(flags, d);
  CHECK(b.dtype() == boolean);
  CHECK(b.nbytes() == 11);
  CHECK(b.to_vector<bool>() == flags);
  CHECK(b.select(0, 1).item<bool>() == false);
  CHECK(b.select(0, -1).item<bool>() == true);
  auto m = tensor(std::vector<bool>{true, false, false, true, true, false}, {2, 3}, d);
  CHECK(m.shape() == Shape{2, 3});
  CHECK(m.to_vector<bool>() == std::vector<bool>{true, false, false, true, true, false});
  CHECK(tensor(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {3, 2}, d).select(1, 1).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{2, 4, 6});
  CHECK(tensor(std::vector<bool>{}, d).to_vector<bool>().empty());
  CHECK(tensor(std::vector<std::int64_t>{}, {0, 3}, d).to_vector<std::int64_t>().empty());

  CHECK_THROWS_AS(tensor(std::vector<std::int64_t>{1, 2, 3}, {2, 2}, d), ShapeError);
  CHECK_THAT(message_of<DTypeError>([&] { i.to_vector<float>(); }), ContainsSubstring("(std::int64_t)"));
  CHECK_THAT(message_of<DTypeError>([&] { b.to_vector<std::int64_t>(); }), ContainsSubstring("(bool)"));
  CHECK_THROWS_AS(b.item<bool>(), ShapeError);
}

TEST_CASE("Kokkos Views of std::int64_t and bool wrap as int64 and boolean tensors and back", "[dtypes][interop]") {
  Kokkos::View<std::int64_t*, Kokkos::HostSpace> counts("counts", 3);
  for (int k = 0; k < 3; ++k) counts(k) = int64_max - k;
  const Tensor t = from_view(counts);
  CHECK(t.dtype() == int64);
  CHECK(t.to_vector<std::int64_t>() == std::vector<std::int64_t>{int64_max, int64_max - 1, int64_max - 2});
  const Tensor mask = tensor(std::vector<bool>{false, true}, cpu());
  const auto v = mask.view<bool*>();
  CHECK_FALSE(v(0));
  CHECK(v(1));
  CHECK_THROWS_AS(mask.view<std::int64_t*>(), DTypeError);
}

TEST_CASE("zeros, ones, full, empty and arange make int64 and boolean tensors", "[dtypes]") {
  const Device d = test::device();
  CHECK(zeros({2, 2}, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 0, 0});
  CHECK(ones({3}, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 1});
  CHECK(zeros({3}, d, boolean).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(ones({2}, d, boolean).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(empty({2, 5}, d, boolean).nbytes() == 10);
  CHECK(empty({0}, d, int64).numel() == 0);
  // As torch.full: a float value truncates toward zero into int64; into boolean it is x != 0.
  CHECK(full({2}, 2.7, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 2});
  CHECK(full({2}, -2.7, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{-2, -2});
  CHECK(full({1}, -0x1p63, d, int64).item<std::int64_t>() == int64_min);
  CHECK(full({1}, 2.5, d, boolean).item<bool>());
  CHECK(full({1}, qnan, d, boolean).item<bool>());
  CHECK_FALSE(full({1}, -0.0, d, boolean).item<bool>());
  for (double v : {qnan, inf, -inf, 0x1p63, 1e19})
    CHECK_THAT(message_of<DTypeError>([&] { full({1}, v, d, int64); }), ContainsSubstring("has no int64"));

  CHECK(arange(5, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(10, -1, -3, d, int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{10, 7, 4, 1});
  CHECK(arange(0, 0, 1, d, int64).numel() == 0);
  // Integers past 2^53 stay exact (computed in int64, not in double, whose spacing is 256 there).
  const auto far = arange(0x1p60, 0x1p60 + 512, 1, d, int64).to_vector<std::int64_t>();
  REQUIRE(far.size() == 512);
  for (std::int64_t k = 0; k < 512; ++k) CHECK(far[k] == (std::int64_t(1) << 60) + k);
  CHECK_THAT(message_of<DTypeError>([&] { arange(0, 5, 1.5, d, int64); }), ContainsSubstring("integer start and step"));
  CHECK_THAT(message_of<DTypeError>([&] { arange(0.5, 5, 1, d, int64); }), ContainsSubstring(".astype(kten::int64)"));
  CHECK_THAT(message_of<DTypeError>([&] { arange(3, d, boolean); }), ContainsSubstring("not boolean"));
  CHECK_THROWS_AS(arange(0, 0x1p64, 0x1p62, d, int64), DTypeError);  // 3 * 2^62 has no int64

  // Random factories stay float-only.
  CHECK_THAT(message_of<DTypeError>([&] { rand({2}, d, 0, int64); }), ContainsSubstring("astype(kten::int64)"));
  CHECK_THROWS_AS(randn({2}, d, 0, boolean), DTypeError);
  CHECK_THROWS_AS(uniform({2}, 0, 1, d, 0, int64), DTypeError);
  CHECK_THROWS_AS(normal({2}, 0, 1, d, 0, boolean), DTypeError);
}

TEMPLATE_TEST_CASE("copies, views, cat and stack keep int64 and boolean elements", "[dtypes][views]", std::int64_t,
                   bool) {
  const Device d = test::device();
  DType t = dtype_of<TestType>();  // not const, so that calls taking it are not dependent
  const std::vector<double> v{1, 0, 3, 0, 5, 6, 0, 8, 9, 10, 0, 12};  // 3x4; bool: nonzero -> true
  const Tensor x = make(v, {3, 4}, d, t);
  const auto hx = values<TestType>(x);
  auto at = [&](std::int64_t r, std::int64_t c) { return hx[r * 4 + c]; };

  auto T = x.transpose(0, 1);
  CHECK(T.dtype() == t);
  std::vector<double> transposed;
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 3; ++r) transposed.push_back(at(r, c));
  CHECK(values<TestType>(T) == transposed);
  reset_stats();
  auto C = T.contiguous();
  CHECK(stats().contiguous_copies == 1);
  CHECK(stats().bytes_contiguous_copies == 12 * dtype_size(t));
  CHECK(values<TestType>(C) == transposed);
  CHECK(values<TestType>(x.narrow(1, 1, 2)) == std::vector<double>{at(0, 1), at(0, 2), at(1, 1), at(1, 2), at(2, 1), at(2, 2)});
  CHECK(values<TestType>(x.select(1, -1)) == std::vector<double>{at(0, 3), at(1, 3), at(2, 3)});
  CHECK(values<TestType>(x.reshape({2, 6})) == hx);
  CHECK(values<TestType>(x.select(0, 1).expand({2, 4})) ==
        std::vector<double>{at(1, 0), at(1, 1), at(1, 2), at(1, 3), at(1, 0), at(1, 1), at(1, 2), at(1, 3)});
  CHECK(values<TestType>(x.copyto(d)) == hx);
  CHECK(values<TestType>(x.to(cpu())) == hx);
  CHECK(x.to(cpu()).device() == cpu());

  // Writing through a view reaches the base.
  auto y = zeros({3, 4}, d, t);
  y.narrow(1, 0, 2).copy_from(x.narrow(1, 2, 2));
  CHECK(values<TestType>(y) == std::vector<double>{at(0, 2), at(0, 3), 0, 0, at(1, 2), at(1, 3), 0, 0, at(2, 2), at(2, 3), 0, 0});

  auto joined = cat({x, x.narrow(0, 0, 1)}, 0);
  CHECK(joined.dtype() == t);
  CHECK(joined.shape() == Shape{4, 4});
  std::vector<double> want = hx;
  want.insert(want.end(), hx.begin(), hx.begin() + 4);
  CHECK(values<TestType>(joined) == want);
  auto stacked = stack({x.select(1, 0), x.select(1, 3)}, 1);
  CHECK(stacked.shape() == Shape{3, 2});
  CHECK(values<TestType>(stacked) == std::vector<double>{at(0, 0), at(0, 3), at(1, 0), at(1, 3), at(2, 0), at(2, 3)});
  CHECK_THROWS_AS(cat({x, x.astype(float32)}, 0), DTypeError);
}

TEST_CASE("astype converts between any two dtypes as PyTorch, with defined float -> int64 edges", "[dtypes]") {
  const Device d = test::device();
  const std::vector<double> v{qnan, 1, inf, -inf, 0, -0.5, 2.9, -2.9, 1e30, -1e30};
  for (DType from : {float32, float64}) {
    const Tensor x = tensor(v, d).astype(from);
    // float -> boolean is x != 0: NaN and -0.5 are true, as torch's .bool().
    CHECK(x.astype(boolean).to_vector<bool>() ==
          std::vector<bool>{true, true, true, true, false, true, true, true, true, true});
    // float -> int64 truncates toward zero; NaN -> 0 and values past the range saturate (PyTorch's
    // cast is undefined there and gives INT64_MIN on x86: kten gives one answer on every device).
    CHECK(x.astype(int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{0, 1, int64_max, int64_min, 0, 0, 2, -2, int64_max, int64_min});
  }
  const auto i = tensor(std::vector<std::int64_t>{-3, 0, 7, (std::int64_t(1) << 53) + 1}, d);
  CHECK(i.astype(float64).to_vector<double>() == std::vector<double>{-3, 0, 7, 0x1p53});  // rounds to nearest
  CHECK(i.astype(float32).to_vector<float>() == std::vector<float>{-3, 0, 7, 0x1p53f});
  CHECK(i.astype(boolean).to_vector<bool>() == std::vector<bool>{true, false, true, true});
  CHECK(i.astype(int64).shares_storage_with(i));
  const auto b = tensor(std::vector<bool>{true, false, true}, d);
  CHECK(b.astype(int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  CHECK(b.astype(float32).to_vector<float>() == std::vector<float>{1, 0, 1});
  CHECK(b.astype(float64).to_vector<double>() == std::vector<double>{1, 0, 1});
  // A strided view converts through one contiguous copy.
  const auto m = tensor(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}, d);
  CHECK(m.transpose().astype(float32).to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(m.transpose().astype(boolean).astype(int64).to_vector<std::int64_t>() == std::vector<std::int64_t>(6, 1));
  CHECK(empty({0, 2}, d, boolean).astype(float64).shape() == Shape{0, 2});
}

TEST_CASE("printing shows int64 as integers and booleans as true and false", "[dtypes][print]") {
  const Device d = test::device();
  const std::string at = " @" + d.str() + ">";
  CHECK(printed(tensor(std::vector<std::int64_t>{1, -20, 300, 0}, d)) == "[  1 -20 300   0]\n<Tensor 4 int64" + at);
  CHECK(printed(tensor(std::vector<std::int64_t>{int64_max}, d)) == "[9223372036854775807]\n<Tensor 1 int64" + at);
  CHECK(printed(tensor(std::vector<bool>{true, false, true}, d)) == "[ true false  true]\n<Tensor 3 boolean" + at);
  CHECK(printed(tensor(std::vector<bool>{true, false, false, true}, {2, 2}, d)) ==
        "[[ true false]\n [false  true]]\n<Tensor 2x2 boolean" + at);
  CHECK(printed(full({}, 7, d, int64)) == "7\n<Tensor scalar int64" + at);
  CHECK(printed(zeros({0, 2}, d, boolean)) == "[[]]\n<Tensor 0x2 boolean" + at);
  const std::string big = printed(arange(2000, d, int64));
  CHECK_THAT(big, ContainsSubstring("[   0    1    2 ... 1997 1998 1999]"));
}

TEST_CASE("save and load keep int64 and boolean parameters; a corrupted boolean is refused", "[dtypes][io]") {
  const Device d = test::device();
  const std::string path = temp_path("buffers.kten"), bad = temp_path("buffers-bad.kten");
  Buffers saved({int64_min, 3, int64_max}, {true, false, false, true});
  saved.to(d);
  saved.save(path);
  Buffers loaded({0, 0, 0}, {false, false, false, false});
  loaded.load(path, d);
  CHECK(loaded.device() == d);
  CHECK(loaded.steps.value.device() == d);
  CHECK(loaded.steps.value.to_vector<std::int64_t>() == std::vector<std::int64_t>{int64_min, 3, int64_max});
  CHECK(loaded.mask.value.to_vector<bool>() == std::vector<bool>{true, false, false, true});
  CHECK(loaded.steps.grad.dtype() == int64);
  loaded.zero_grad();

  // The file as docs/training.md documents it (save()): the mask's dtype code is 3 and its last
  // element byte 1.
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t mask_code = good.find("mask") + 4, last_mask_byte = good.size() - 9;
  REQUIRE(good[mask_code] == 3);
  REQUIRE(good[last_mask_byte] == 1);
  auto rewrite = [&](std::size_t at, char byte) {
    std::string bytes = good;
    bytes[at] = byte;
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of everything before the checksum
    for (std::size_t k = 0; k + 8 < bytes.size(); ++k) h = (h ^ static_cast<unsigned char>(bytes[k])) * 0x100000001b3ull;
    for (int k = 0; k < 8; ++k) bytes[bytes.size() - 8 + k] = static_cast<char>(h >> (8 * k));
    std::ofstream(bad, std::ios::binary) << bytes;
  };
  rewrite(last_mask_byte, 2);
  CHECK_THAT(message_of<FormatError>([&] { loaded.load(bad, d); }), ContainsSubstring("other than 0 or 1"));
  rewrite(mask_code, 4);
  CHECK_THAT(message_of<FormatError>([&] { loaded.load(bad, d); }), ContainsSubstring("unknown dtype code 4"));
  CHECK(loaded.mask.value.to_vector<bool>() == std::vector<bool>{true, false, false, true});  // unchanged

  // A file whose parameter is float64 where the model's is int64 (the same size) is refused.
  rewrite(good.find("steps") + 5, 1);
  CHECK_THAT(message_of<FormatError>([&] { loaded.load(bad, d); }), ContainsSubstring("3 float64 in the file"));
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("float-only operations refuse int64 and boolean with a DTypeError that says what to do", "[dtypes]") {
  const Device d = test::device();
  const Tensor x = rand({2, 2}, d, 1);
  for (DType t : {int64, boolean}) {
    const Tensor i = ones({2, 2}, d, t);
    INFO(dtype_name(t));
    const std::vector<std::pair<const char*, std::function<void()>>> ops{
        {"+", [&] { i + i; }},
        {"-", [&] { i - i; }},
        {"*", [&] { i * i; }},
        {"/", [&] { i / i; }},
        {"+ scalar", [&] { i + 1.0; }},
        {"scalar -", [&] { 1.0 - i; }},
        {"* scalar", [&] { i * 2.0; }},
        {"scalar /", [&] { 2.0 / i; }},
        {"neg", [&] { -i; }},
        {"exp", [&] { exp(i); }},
        {"log", [&] { log(i); }},
        {"sqrt", [&] { sqrt(i); }},
        {"abs", [&] { abs(i); }},
        {"relu", [&] { relu(i); }},
        {"sigmoid", [&] { sigmoid(i); }},
        {"tanh", [&] { tanh(i); }},
        {"fma", [&] { fma(i, i, i); }},
        {"sum", [&] { sum(i); }},
        {"sum axis", [&] { sum(i, 0); }},
        {"mean", [&] { mean(i); }},
        {"mean axis", [&] { mean(i, 1); }},
        {"max", [&] { max(i); }},
        {"max axis", [&] { max(i, 0); }},
        {"norm", [&] { norm(i); }},
        {"norm axis", [&] { norm(i, 1); }},
        {"matmul", [&] { matmul(i, i); }},
        {"matmul strided", [&] { matmul(i.transpose(), i); }},
        {"mixed +", [&] { x + i; }},
        {"mixed matmul", [&] { matmul(x, i); }},
        {"Linear", [&] {
           nn::Linear layer(2, 3);
           layer.to(d);
           layer(i);
         }},
        {"ReLU", [&] {
           nn::ReLU layer;
           layer.to(d);
           layer(i);
         }},
        {"MSELoss", [&] { nn::MSELoss()(i, i); }},
        {"MSELoss mixed", [&] { nn::MSELoss()(x, i); }},
    };
    for (const auto& [name, op] : ops) {
      INFO(name);
      CHECK_THAT(message_of<DTypeError>(op), ContainsSubstring(".astype("));
    }
    CHECK_THAT(message_of<DTypeError>([&] { i + i; }), ContainsSubstring("arithmetic is float-only"));
  }
  // Mixing names the float dtype to convert to.
  const Tensor labels = tensor(std::vector<std::int64_t>{0, 1, 1, 0}, {2, 2}, d);
  CHECK_THAT(message_of<DTypeError>([&] { x + labels; }), ContainsSubstring(".astype(kten::float32)"));
  CHECK_THAT(message_of<DTypeError>([&] { labels * x.astype(float64); }), ContainsSubstring(".astype(kten::float64)"));
  // An optimiser step on an int64 "parameter".
  Buffers buffers({1, 2, 3}, {true, true, false, false});
  buffers.to(d);
  optim::SGD sgd(0.1f);
  CHECK_THAT(message_of<DTypeError>([&] { sgd.step(buffers); }), ContainsSubstring("arithmetic is float-only"));
  CHECK(buffers.steps.value.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3});
}

TEMPLATE_TEST_CASE("comparisons give booleans with IEEE NaN, broadcasting, scalars and views", "[dtypes][compare]",
                   float, double, std::int64_t) {
  const Device d = test::device();
  DType t = dtype_of<TestType>();  // not const, so that calls taking it are not dependent
  constexpr bool is_float = std::is_floating_point_v<TestType>;
  // 3x4 against 1x4 (broadcast along rows); NaN and infinities for the float dtypes.
  const std::vector<double> va{1, 2, 3, 4, is_float ? qnan : 5, 0, -1, 7, is_float ? inf : 9, 2, 2, is_float ? -inf : -9};
  const std::vector<double> vb{1, is_float ? qnan : 6, 2, 7};
  const Tensor a = make(va, {3, 4}, d, t), b = make(vb, {4}, d, t);
  struct Comparison {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&);
    Tensor (*op_scalar)(const Tensor&, double);
    std::function<bool(double, double)> ref;  // the C++ comparison in double: IEEE as well
  };
  const Comparison comparisons[] = {
      {"eq", eq, eq, std::equal_to<>()}, {"ne", ne, ne, std::not_equal_to<>()}, {"lt", lt, lt, std::less<>()},
      {"le", le, le, std::less_equal<>()}, {"gt", gt, gt, std::greater<>()},   {"ge", ge, ge, std::greater_equal<>()},
  };
  for (const auto& [name, op, op_scalar, ref] : comparisons) {
    INFO(name);
    std::vector<double> want, want_t, want_s;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c) want.push_back(ref(va[r * 4 + c], vb[c]));
    const Tensor got = op(a, b);
    CHECK(got.dtype() == boolean);
    CHECK(got.device() == d);
    CHECK(got.shape() == Shape{3, 4});
    CHECK(values<bool>(got) == want);
    // The other way round and from a transposed view: b (4x1 after unsqueeze) against a's transpose.
    for (int c = 0; c < 4; ++c)
      for (int r = 0; r < 3; ++r) want_t.push_back(ref(vb[c], va[r * 4 + c]));
    CHECK(values<bool>(op(b.unsqueeze(1), a.transpose())) == want_t);
    for (double v : va) want_s.push_back(ref(v, 2));
    CHECK(values<bool>(op_scalar(a, 2.0)) == want_s);
    CHECK(values<bool>(op_scalar(a.transpose(), 2.0).transpose().contiguous()) == want_s);
    CHECK(op(empty({0, 4}, d, t), b).shape() == Shape{0, 4});
  }
  if (is_float) {  // IEEE: NaN equals nothing, itself included
    const Tensor n = make({qnan}, {1}, d, t);
    CHECK(eq(n, n).to_vector<bool>() == std::vector<bool>{false});
    CHECK(ne(n, n).to_vector<bool>() == std::vector<bool>{true});
    CHECK(ne(n, qnan).to_vector<bool>() == std::vector<bool>{true});
    CHECK(ge(n, -inf).to_vector<bool>() == std::vector<bool>{false});
  } else {  // the scalar must be an int64 value
    CHECK(gt(a, 2.0).to_vector<bool>() == gt(a, make({2}, {}, d, t)).to_vector<bool>());
    CHECK_THAT(message_of<DTypeError>([&] { lt(a, 0.5); }), ContainsSubstring("compare with an integer"));
    CHECK_THAT(message_of<DTypeError>([&] { eq(a, qnan); }), ContainsSubstring("astype(kten::float64)"));
    CHECK_THROWS_AS(ge(a, 1e19), DTypeError);
  }
  CHECK_THAT(message_of<DTypeError>([&] { eq(a, a.astype(is_float ? int64 : float32)); }),
             ContainsSubstring("different dtypes"));
  CHECK_THROWS_AS(lt(a, make({1, 2, 3}, {3}, d, t)), ShapeError);
}

TEST_CASE("booleans compare too, and comparisons chain into where and astype", "[dtypes][compare]") {
  const Device d = test::device();
  const auto p = tensor(std::vector<bool>{true, true, false, false}, d), q = tensor(std::vector<bool>{true, false, true, false}, d);
  CHECK(eq(p, q).to_vector<bool>() == std::vector<bool>{true, false, false, true});
  CHECK(ne(p, q).to_vector<bool>() == std::vector<bool>{false, true, true, false});  // exclusive or
  CHECK(gt(p, q).to_vector<bool>() == std::vector<bool>{false, true, false, false});  // p and not q
  CHECK(eq(p, 1).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK_THAT(message_of<DTypeError>([&] { eq(p, 2); }), ContainsSubstring("compare with 0 or 1"));
  // The count of elements above a threshold, as a float sum of the mask.
  const auto x = arange(10, d);
  CHECK(sum(gt(x, 6.5).astype(float32)).item<float>() == 3.f);
}

TEST_CASE("where selects with broadcasting over the condition and both values, in every dtype", "[dtypes][where]") {
  const Device d = test::device();
  const auto cond = tensor(std::vector<bool>{true, false, true}, {3, 1}, d);  // one per row
  const auto a = arange(4, d, int64);                                            // one per column
  const auto b = tensor(std::vector<std::int64_t>{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12}, {3, 4}, d);
  const auto w = where(cond, a, b);
  CHECK(w.dtype() == int64);
  CHECK(w.shape() == Shape{3, 4});
  CHECK(w.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, -5, -6, -7, -8, 0, 1, 2, 3});
  // A transposed condition and transposed values read in place.
  const auto c2 = tensor(std::vector<bool>{true, false, false, true, true, false}, {2, 3}, d).transpose();  // 3x2
  const auto f = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, d).transpose();
  CHECK(where(c2, f, -f).to_vector<double>() == std::vector<double>{1, 4, -2, 5, -3, -6});
  CHECK(where(c2, f, 0.5).to_vector<double>() == std::vector<double>{1, 4, 0.5, 5, 0.5, 0.5});
  CHECK(where(c2, 0.5, f).to_vector<double>() == std::vector<double>{0.5, 0.5, 2, 0.5, 3, 6});
  const auto n = tensor(std::vector<double>{qnan, 1}, d);  // NaN is just a value to select
  CHECK(std::isnan(where(tensor(std::vector<bool>{true, false}, d), n, 0.0).to_vector<double>()[0]));
  // Boolean values: a logical and / or.
  const auto p = tensor(std::vector<bool>{true, true, false, false}, d), q = tensor(std::vector<bool>{true, false, true, false}, d);
  CHECK(where(p, q, false).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(where(p, true, q).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(where(tensor(std::vector<bool>{}, d), empty({0}, d), 1.0).shape() == Shape{0});

  CHECK_THAT(message_of<DTypeError>([&] { where(a, a, a); }), ContainsSubstring("kten::gt(x, 0)"));
  CHECK_THAT(message_of<DTypeError>([&] { where(cond, a, b.astype(float32)); }), ContainsSubstring("different dtypes"));
  CHECK_THROWS_AS(where(cond, a, qnan), DTypeError);  // an int64 holds no NaN
  CHECK_THROWS_AS(where(cond, zeros({2, 2}, d), 0.0), ShapeError);
}

TEMPLATE_TEST_CASE("argmax along an axis and over all elements: NaN first, ties first, views", "[dtypes][argmax]", float,
                   double, std::int64_t) {
  const Device d = test::device();
  DType t = dtype_of<TestType>();  // not const, so that calls taking it are not dependent
  constexpr bool is_float = std::is_floating_point_v<TestType>;
  // 2x3x4 with ties and (float dtypes) NaN: compared against a host scan with the same rules.
  std::vector<double> v;
  for (int k = 0; k < 24; ++k) v.push_back(static_cast<double>((k * 7) % 5));
  if (is_float) v[5] = v[14] = v[15] = qnan;
  const Shape shape{2, 3, 4};
  const Tensor x = make(v, shape, d, t);
  auto first_max = [](const std::vector<double>& row) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < row.size(); ++k)
      if ((std::isnan(row[k]) && !std::isnan(row[best])) || row[k] > row[best]) best = k;
    return static_cast<double>(best);
  };
  const Shape strides{12, 4, 1};
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    std::vector<double> want;
    for (std::int64_t o = 0; o < 24 / shape[axis]; ++o) {
      // o indexes the other two axes in row-major order.
      std::int64_t rest = o, base = 0;
      for (int dim = 2; dim >= 0; --dim) {
        if (dim == axis) continue;
        base += (rest % shape[dim]) * strides[dim];
        rest /= shape[dim];
      }
      std::vector<double> row;
      for (std::int64_t k = 0; k < shape[axis]; ++k) row.push_back(v[base + k * strides[axis]]);
      want.push_back(first_max(row));
    }
    const auto got = argmax(x, axis);
    CHECK(got.dtype() == int64);
    CHECK(values<std::int64_t>(got) == want);
    Shape kept = shape;
    kept[axis] = 1;
    CHECK(argmax(x, axis, true).shape() == kept);
    CHECK(values<std::int64_t>(argmax(x, axis - 3, true)) == want);
    // The same through a permuted view (axes reversed): read in place through its strides.
    CHECK(values<std::int64_t>(argmax(x.permute({2, 1, 0}), 2 - axis).transpose()) == want);
  }
  CHECK(argmax(x).item<std::int64_t>() == static_cast<std::int64_t>(first_max(v)));
  CHECK(argmax(x.transpose(0, 2)).item<std::int64_t>() == static_cast<std::int64_t>(first_max(values<TestType>(x.transpose(0, 2)))));
  CHECK(argmax(make({3, 3, 1}, {3}, d, t)).item<std::int64_t>() == 0);  // ties: the first

  // Whole-tensor argmax over many parts and a tail: the largest value placed anywhere wins.
  for (std::int64_t n : {1, 2, 17, 1000, 10007}) {
    for (std::int64_t at : {std::int64_t(0), n / 2, n - 1}) {
      std::vector<double> big(static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) big[k] = static_cast<double>(k % 97);
      big[at] = 1000;
      CAPTURE(n, at);
      CHECK(argmax(make(big, {n}, d, t)).item<std::int64_t>() == at);
      if (is_float && n > 2) {
        big[n - 1 - at] = qnan;  // NaN beats 1000
        CHECK(argmax(make(big, {n}, d, t)).item<std::int64_t>() == n - 1 - at);
      }
    }
  }
  CHECK(argmax(zeros({0, 3}, d, t), 1).shape() == Shape{0});
  CHECK_THAT(message_of<ShapeError>([&] { argmax(zeros({3, 0}, d, t), 1); }), ContainsSubstring("empty"));
  CHECK_THROWS_AS(argmax(zeros({0}, d, t)), ShapeError);
  CHECK_THROWS_AS(argmax(x, 3), ShapeError);
}

TEST_CASE("argmax of NaN follows PyTorch: the first NaN wins", "[dtypes][argmax]") {
  const Device d = test::device();
  // torch.tensor([1., qnan, 3.]).argmax() == 1; [[1, 5, 5], [qnan, 2, qnan]].argmax(1) == [1, 0].
  CHECK(argmax(tensor({1.f, NAN, 3.f}, d)).item<std::int64_t>() == 1);
  CHECK(argmax(tensor({{1.0, 5.0, 5.0}, {qnan, 2.0, qnan}}, d), 1).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, 0});
  CHECK(argmax(tensor({-0.f, 0.f}, d)).item<std::int64_t>() == 0);
  CHECK(argmax(tensor({-inf, -inf}, d)).item<std::int64_t>() == 0);
}

TEMPLATE_TEST_CASE("index_select and gather read like PyTorch in every dtype, views included", "[dtypes][indexing]",
                   float, std::int64_t, bool) {
  const Device d = test::device();
  DType t = dtype_of<TestType>();  // not const, so that calls taking it are not dependent
  std::vector<double> v;
  for (int k = 0; k < 12; ++k) v.push_back(std::is_same_v<TestType, bool> ? k % 3 == 0 : k * 10);
  const Tensor x = make(v, {3, 4}, d, t);
  auto at = [&](std::int64_t r, std::int64_t c) { return v[r * 4 + c]; };
  const auto idx = tensor(std::vector<std::int64_t>{2, 0, 2}, d);

  const auto rows = index_select(x, 0, idx);
  CHECK(rows.dtype() == t);
  CHECK(rows.shape() == Shape{3, 4});
  std::vector<double> want;
  for (std::int64_t r : {2, 0, 2})
    for (int c = 0; c < 4; ++c) want.push_back(at(r, c));
  CHECK(values<TestType>(rows) == want);
  const auto cols = index_select(x, -1, idx);
  CHECK(cols.shape() == Shape{3, 3});
  want.clear();
  for (int r = 0; r < 3; ++r)
    for (std::int64_t c : {2, 0, 2}) want.push_back(at(r, c));
  CHECK(values<TestType>(cols) == want);
  // A transposed x and strided indices (a column of an int64 matrix) are read in place.
  const auto picks = tensor(std::vector<std::int64_t>{9, 3, 9, 1, 9, 0}, {3, 2}, d).select(1, 1);  // {3, 1, 0}
  CHECK(picks.strides() == Shape{2});
  want.clear();
  for (std::int64_t c : {3, 1, 0})
    for (int r = 0; r < 3; ++r) want.push_back(at(r, c));
  CHECK(values<TestType>(index_select(x.transpose(), 0, picks)) == want);
  CHECK(index_select(x, 1, empty({0}, d, int64)).shape() == Shape{3, 0});

  // gather along each axis (torch.gather), the index a transposed view on axis 1.
  const auto g0 = tensor(std::vector<std::int64_t>{2, 0, 1, 1, 0, 2, 2, 0}, {2, 4}, d);
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) want.push_back(at(std::vector<std::int64_t>{2, 0, 1, 1, 0, 2, 2, 0}[i * 4 + j], j));
  CHECK(values<TestType>(gather(x, 0, g0)) == want);
  const auto g1 = tensor(std::vector<std::int64_t>{3, 0, 1, 3, 2, 2}, {2, 3}, d).transpose();  // 3x2: {{3, 3}, {0, 2}, {1, 2}}
  const auto got1 = gather(x, 1, g1);
  CHECK(got1.shape() == Shape{3, 2});
  CHECK(values<TestType>(got1) == std::vector<double>{at(0, 3), at(0, 3), at(1, 0), at(1, 2), at(2, 1), at(2, 2)});
  CHECK(gather(x, 1, empty({3, 0}, d, int64)).shape() == Shape{3, 0});
}

TEST_CASE("index_select and gather check their indices without a host synchronisation", "[dtypes][indexing]") {
  const Device d = test::device();
  const auto x = arange(12, d).reshape({3, 4});
  const auto rows = tensor(std::vector<std::int64_t>{0, 2}, d), none = empty({0}, d, int64), firsts = zeros({3, 1}, d, int64);
  reset_stats();
  (void)index_select(x, 0, rows);
  (void)index_select(x, 0, none);
  (void)gather(x, 1, firsts);
  CHECK(stats().host_syncs == 0);  // the kernels check the indices they read
  CHECK(stats().transfers() == 0);

  // As PyTorch, negative indices are refused too: by the call on cpu(), at the next
  // synchronisation on a GPU.
  const auto synced = [&](auto f) { return [&, f] { f(); synchronize(d); }; };
  CHECK_THAT(message_of<IndexError>(synced([&] { index_select(x, 0, tensor(std::vector<std::int64_t>{0, -1}, d)); })),
             ContainsSubstring("index -1 is out of range for axis 0 of extent 3"));
  CHECK_THAT(message_of<IndexError>(synced([&] { index_select(x, 1, tensor(std::vector<std::int64_t>{4, 1}, d)); })),
             ContainsSubstring("index 4 is out of range for axis 1 of extent 4"));
  CHECK_THAT(message_of<IndexError>(synced([&] { gather(x, 0, full({1, 4}, 3, d, int64)); })), ContainsSubstring("[0, extent)"));
  CHECK_THROWS_AS(synced([&] { gather(x, 1, tensor(std::vector<std::int64_t>{0, 1, 9, 0, 0, 1}, {3, 2}, d).narrow(1, 0, 1)); })(),
                  IndexError);
  CHECK_THROWS_AS(synced([&] { index_select(empty({0, 2}, d), 0, zeros({1}, d, int64)); })(), IndexError);
  static_assert(std::is_base_of_v<Error, IndexError>);

  CHECK_THAT(message_of<DTypeError>([&] { index_select(x, 0, zeros({2}, d)); }), ContainsSubstring(".astype(kten::int64)"));
  CHECK_THAT(message_of<ShapeError>([&] { index_select(x, 0, zeros({2, 1}, d, int64)); }), ContainsSubstring("1-D"));
  CHECK_THROWS_AS(index_select(x, 2, zeros({1}, d, int64)), ShapeError);
  CHECK_THROWS_AS(gather(x, 0, zeros({4}, d, int64)), ShapeError);       // rank differs
  CHECK_THROWS_AS(gather(x, 0, zeros({1, 5}, d, int64)), ShapeError);    // wider than x off the axis
  CHECK_THROWS_AS(gather(x, 1, zeros({2, 2}, d)), DTypeError);
}

TEST_CASE("int64 and boolean tensors move between devices; mixed devices throw", "[dtypes][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  const auto i = tensor(std::vector<std::int64_t>{5, int64_min, 7}, d);
  const auto b = tensor(std::vector<bool>{false, true, true}, d);
  CHECK(i.to(other).device() == other);
  CHECK(i.to(other).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, int64_min, 7});
  CHECK(b.copyto(other).to_vector<bool>() == std::vector<bool>{false, true, true});
  const auto x = arange(3, d);
  CHECK_THROWS_AS(where(b.to(other), x, x), DeviceMismatch);
  CHECK_THROWS_AS(index_select(x, 0, i.to(other)), DeviceMismatch);
  CHECK_THROWS_AS(gt(x, x.to(other)), DeviceMismatch);
}
