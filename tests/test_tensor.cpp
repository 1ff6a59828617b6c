// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Tensors: creation on a device, shape and dtype, reshape, host reads, printing, interop, errors.
#include <cmath>
#include <limits>
#include <sstream>

#include <catch2/catch_template_test_macros.hpp>

#include <kten/kokkos.hpp>

#include "support.hpp"

using namespace kten;

TEST_CASE("tensor() from values lands on cpu() by default and on the named device", "[tensor]") {
  auto x = tensor({1.f, 2.f, 3.f});
  CHECK(x.device() == cpu());
  CHECK(x.dtype() == float32);
  CHECK(x.shape() == Shape{3});
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3});

  const Device d = test::device();
  auto m = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, d);
  CHECK(m.device() == d);
  CHECK(m.dtype() == float64);
  CHECK(m.shape() == Shape{2, 3});
  CHECK(m.ndim() == 2);
  CHECK(m.numel() == 6);
  CHECK(m.size(-1) == 3);
  CHECK(m.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(tensor({{1.f, 2.f}, {3.f}}, d), ShapeError);
  CHECK_THROWS_AS(tensor(std::vector<float>{1, 2, 3}, Shape{2, 2}, d), ShapeError);
  CHECK_THROWS_AS(zeros({2, -1}, d), ShapeError);
}

// Every documented creation form compiles with g++ and with clang++ (CI builds both; clang once
// rejected the nested lists as ambiguous) and takes its dtype from the values it is given.
TEST_CASE("tensor() takes dtype and shape from every documented form of values", "[tensor]") {
  const Device d = test::device();
  struct Case {
    Tensor t;
    Device device;
    DType dtype;
    Shape shape;
  };
  const Case cases[] = {
      {tensor({1.f, 2.f, 3.f, 4.f}), cpu(), float32, {4}},
      {tensor({1.0, 2.0, 3.0, 4.0}, d), d, float64, {4}},
      {tensor({{1.f, 2.f}, {3.f, 4.f}}), cpu(), float32, {2, 2}},
      {tensor({{1.0, 2.0}, {3.0, 4.0}}, d), d, float64, {2, 2}},
      {tensor({{1.f, 2.f, 3.f, 4.f}}, d), d, float32, {1, 4}},
      {tensor({{1.0}, {2.0}, {3.0}, {4.0}}), cpu(), float64, {4, 1}},
      {tensor(std::vector<float>{1, 2, 3, 4}), cpu(), float32, {4}},
      {tensor(std::vector<double>{1, 2, 3, 4}, d), d, float64, {4}},
      {tensor(std::vector<float>{1, 2, 3, 4}, {2, 2}, d), d, float32, {2, 2}},
      {tensor(std::vector<double>{1, 2, 3, 4}, {4, 1}), cpu(), float64, {4, 1}},
  };
  for (const Case& c : cases) {
    INFO(c.t);
    CHECK(c.t.device() == c.device);
    CHECK(c.t.dtype() == c.dtype);
    CHECK(c.t.shape() == c.shape);
    CHECK(c.t.astype(float64).to_vector<double>() == std::vector<double>{1, 2, 3, 4});
  }
  // One row of one value is a 1 x 1 matrix, not a 1-D tensor.
  auto one = tensor({{5.f}}, d);
  CHECK(one.shape() == Shape{1, 1});
  CHECK(one.item<float>() == 5.f);
}

TEMPLATE_TEST_CASE("zeros, ones, full and arange fill on the device", "[tensor]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  auto z = zeros({2, 3}, d, t);
  auto o = ones({4}, d, t);
  auto f = full({2, 2}, 2.5, d, t);
  CHECK(z.device() == d);
  CHECK(z.dtype() == t);
  CHECK(z.template to_vector<TestType>() == std::vector<TestType>(6, 0));
  CHECK(o.template to_vector<TestType>() == std::vector<TestType>(4, 1));
  CHECK(f.template to_vector<TestType>() == std::vector<TestType>(4, TestType(2.5)));
  CHECK(arange(5, d, t).template to_vector<TestType>() == std::vector<TestType>{0, 1, 2, 3, 4});
  test::require_allclose<TestType>(arange(1.0, 2.0, 0.25, d, t), {1.0, 1.25, 1.5, 1.75});
  CHECK(arange(3.0, 0.0, -1.0, d, t).template to_vector<TestType>() == std::vector<TestType>{3, 2, 1});
  CHECK(arange(0, d, t).numel() == 0);
  CHECK_THROWS_AS(arange(0.0, 1.0, 0.0, d, t), ShapeError);
  CHECK(zeros({0, 3}, d, t).numel() == 0);
}

TEMPLATE_TEST_CASE("arange gives NumPy's lengths and refuses arguments that have none", "[tensor]", float, double) {
  using T = TestType;
  const Device d = test::device();
  const DType t = dtype_of<T>();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // A step past the span gives the start alone, an infinite one included (NumPy: arange(0, 10, inf) == [0]).
  CHECK(arange(0.0, 10.0, inf, d, t).template to_vector<T>() == std::vector<T>{0});
  CHECK(arange(3.0, -10.0, -inf, d, t).template to_vector<T>() == std::vector<T>{3});
  CHECK(arange(1.0, 10.0, 20.0, d, t).template to_vector<T>() == std::vector<T>{1});
  CHECK(arange(0.0, -10.0, inf, d, t).numel() == 0);
  CHECK(arange(0.0, 10.0, -inf, d, t).numel() == 0);
  CHECK(arange(5.0, 5.0, inf, d, t).numel() == 0);
  CHECK(arange(0.0, 1.0, 0.3, d, t).numel() == 4);
  auto expect_shape_error = [&](double start, double stop, double step, const std::string& needle) {
    CAPTURE(start, stop, step);
    try {
      arange(start, stop, step, d, t);
      FAIL("expected ShapeError");
    } catch (const ShapeError& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  expect_shape_error(nan, 1, 1, "NaN");
  expect_shape_error(0, nan, 1, "NaN");
  expect_shape_error(0, 1, nan, "NaN");
  expect_shape_error(0, 1, 0, "step must not be 0");
  // Lengths that are not numbers, or do not fit in int64 (NumPy: "arange: overflow while computing length").
  expect_shape_error(0, inf, 1, "length");
  expect_shape_error(0, 1e30, 1, "length");
  expect_shape_error(0, 0x1p63, 1, "length");
  expect_shape_error(-inf, 0, 1, "length");
  expect_shape_error(0, -1e30, 1, "length");
  expect_shape_error(inf, inf, 1, "length");
  // A length that fits but whose bytes do not: OutOfMemory names the element count, not a wrapped size.
  try {
    arange(0.0, 9.2e18, 1.0, d, t);
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find("9200000000000000000 " + std::string(dtype_name(t)) + " elements") != std::string::npos);
    CHECK(msg.find(std::to_string(std::uint64_t(9200000000000000000ull) * sizeof(T))) == std::string::npos);
  }
}

TEST_CASE("reshape shares storage and checks element counts", "[tensor]") {
  const Device d = test::device();
  auto A = arange(12, d);
  auto B = A.reshape({3, 4});
  CHECK(B.shares_storage_with(A));
  CHECK(B.shape() == Shape{3, 4});
  CHECK(A.reshape({-1, 6}).shape() == Shape{2, 6});
  CHECK(A.reshape({2, 3, 2}).to_vector<float>() == A.to_vector<float>());
  CHECK_THROWS_AS(A.reshape({5, 3}), ShapeError);
  CHECK_THROWS_AS(A.reshape({-1, -1}), ShapeError);
  CHECK_THROWS_AS(A.reshape({-1, 5}), ShapeError);
  CHECK_THROWS_AS(A.reshape({-2, -6}), ShapeError);
  // Extents whose product passes 64 bits are named as such, never multiplied into a wrapped count.
  const std::int64_t big = std::int64_t(1) << 32;
  for (const Shape& shape : {Shape{big, big}, Shape{big, big, -1}, Shape{-1, (std::int64_t(1) << 62) + 3, 4}}) {
    CAPTURE(shape_str(shape));
    try {
      A.reshape(shape);
      FAIL("expected ShapeError");
    } catch (const ShapeError& e) {
      CHECK(std::string(e.what()).find("more elements than fit in 64 bits") != std::string::npos);
    }
  }
  // An empty shape whose other extents multiply past 64 bits has no contiguous strides.
  try {
    empty({0, std::int64_t(1) << 40, std::int64_t(1) << 40});
    FAIL("expected ShapeError");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("has strides past 64 bits") != std::string::npos);
  }
}

TEST_CASE("an undefined tensor has no elements and every use of it says it is undefined", "[tensor]") {
  const Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.ndim() == 0);
  CHECK(t.shape().empty());
  CHECK_FALSE(t.is_pinned());
  CHECK_FALSE(t.shares_storage_with(Tensor()));
  std::ostringstream os;
  os << t;
  CHECK(os.str() == "<Tensor undefined>");
  auto expect_undefined = [](const char* what, auto use) {
    CAPTURE(what);
    try {
      use();
      FAIL("expected kten::Error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("undefined") != std::string::npos);
    }
  };
  expect_undefined("device", [&] { t.device(); });
  expect_undefined("data", [&] { t.data(); });
  expect_undefined("size", [&] { t.size(0); });
  expect_undefined("item", [&] { t.item<float>(); });
  expect_undefined("to_vector", [&] { t.to_vector<float>(); });
  expect_undefined("reshape", [&] { t.reshape({1}); });
  expect_undefined("exp", [&] { t.exp(); });
  expect_undefined("add", [&] { t + t; });
}

TEST_CASE("host reads check the element type and the element count", "[tensor]") {
  const Device d = test::device();
  auto x = ones({3}, d);
  CHECK_THROWS_AS(x.to_vector<double>(), DTypeError);
  CHECK_THROWS_AS(x.item<float>(), ShapeError);
  CHECK(sum(x).item<float>() == 3.f);
  CHECK(x.astype(float64).to_vector<double>() == std::vector<double>{1, 1, 1});
  CHECK(x.astype(float32).shares_storage_with(x));
  CHECK_THROWS_AS(Tensor().device(), Error);
}

TEST_CASE("item<T>() converts as libtorch's item<T>(), and refuses a value T cannot hold", "[tensor]") {
  const Device d = test::device();
  const auto one = [&](double v, DType t) { return full({}, v, d, t); };
  const auto integer = [&](std::int64_t v) { return tensor(std::vector<std::int64_t>{v}, d); };
  CHECK(one(2.5, float32).item<double>() == 2.5);
  CHECK(one(0.1, float64).item<float>() == 0.1f);
  CHECK(one(-3.7, float32).item<std::int64_t>() == -3);  // toward zero
  CHECK(one(3.7, float64).item<std::int64_t>() == 3);
  CHECK(integer(9007199254740993).item<std::int64_t>() == 9007199254740993);  // 2^53 + 1: exact
  CHECK(integer(-5).item<double>() == -5.0);
  CHECK(integer(std::int64_t(1) << 40).item<float>() == 1099511627776.f);
  CHECK(integer(2).item<bool>());
  CHECK(one(1, boolean).item<float>() == 1.f);
  CHECK(one(1, boolean).item<std::int64_t>() == 1);
  CHECK(one(2.5, float32).item<bool>());
  CHECK_FALSE(one(0, float64).item<bool>());
  CHECK(one(NAN, float32).item<bool>());  // NaN != 0, as bool(torch.tensor(nan))
  CHECK(std::isnan(one(NAN, float32).item<double>()));
  CHECK(std::isinf(one(INFINITY, float64).item<float>()));  // infinities convert
  CHECK(one(-9.2e18, float64).item<std::int64_t>() == std::int64_t(-9.2e18));
  CHECK_THROWS_AS(one(NAN, float64).item<std::int64_t>(), DTypeError);
  CHECK_THROWS_AS(one(INFINITY, float32).item<std::int64_t>(), DTypeError);
  CHECK_THROWS_AS(one(1e19, float64).item<std::int64_t>(), DTypeError);
  CHECK_THROWS_AS(one(1e300, float64).item<float>(), DTypeError);
}

TEST_CASE("printing shows the values and a trailer with shape, dtype and device", "[tensor][print]") {
  const Device d = test::device();
  std::ostringstream os;
  os << ones({2, 3}, d);
  CHECK(os.str() == "[[1. 1. 1.]\n [1. 1. 1.]]\n<Tensor 2x3 float32 @" + d.str() + ">");

  std::ostringstream scalar;
  scalar << tensor({0.5, 0.25}, d).sum();
  CHECK(scalar.str() == "0.75\n<Tensor scalar float64 @" + d.str() + ">");

  std::ostringstream big;
  big << arange(2000, d).reshape({2, 1000});
  const std::string s = big.str();
  CHECK(s.find("...") != std::string::npos);
  CHECK(s.find("1999.") != std::string::npos);
  CHECK(s.find("500.") == std::string::npos);
  CHECK(s.size() < 400);
}

TEST_CASE("an allocation that cannot succeed throws OutOfMemory naming the device and the size", "[tensor]") {
  const Device d = test::device();
  try {
    empty({std::int64_t(1) << 40, 1 << 20}, d);  // 4 EiB
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    CHECK(msg.find(d.str()) != std::string::npos);
    CHECK(msg.find("bytes") != std::string::npos);
  }
  CHECK_THROWS_AS(empty({std::int64_t(1) << 40, std::int64_t(1) << 40}, d), ShapeError);  // overflows 64 bits
}

TEST_CASE("a byte size past 64 bits throws OutOfMemory naming the real size, never allocating a wrapped one",
          "[tensor]") {
  const Device d = test::device();
  auto expect_out_of_memory = [&](const char* what, auto make, const std::string& size) {
    CAPTURE(what);
    try {
      make();
      FAIL("expected OutOfMemory");
    } catch (const OutOfMemory& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find(d.str()) != std::string::npos);
      CHECK(msg.find(size) != std::string::npos);
    }
  };
  const std::int64_t e62 = std::int64_t(1) << 62, e61 = std::int64_t(1) << 61;
  // numel x dtype size wraps to 0 bytes
  expect_out_of_memory("empty 2^62 float32", [&] { empty({e62}, d); }, "4611686018427387904 float32 elements");
  expect_out_of_memory("zeros 2^62 float32", [&] { zeros({e62}, d); }, "4611686018427387904 float32 elements");
  expect_out_of_memory("zeros 2^61 float64", [&] { zeros({e61}, d, float64); }, "2305843009213693952 float64 elements");
  expect_out_of_memory("2x2^61 float32", [&] { ones({2, e61}, d); }, "16.00 EiB");
  // 2^64 - 4 bytes fits, but the allocator's rounding up to its block size would wrap
  expect_out_of_memory("2^62 - 1 float32", [&] { empty({e62 - 1}, d); }, "(18446744073709551612 bytes)");
}

TEST_CASE("a tensor wraps an existing Kokkos::View without copying and hands it back", "[tensor][interop]") {
  const Device d = test::device();
  if (d.is_cpu() || gpus_are_emulated()) {
    Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> user("user", 2, 3);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) user(i, j) = i * 3 + j;
    auto t = from_view(user, d);
    CHECK(t.device() == d);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.dtype() == float64);
    CHECK(t.data() == user.data());
    CHECK(sum(t).item<double>() == 15.0);
    auto back = t.view<double**>();
    CHECK(back.data() == user.data());
    back(1, 2) = 50;
    CHECK(user(1, 2) == 50);
    CHECK_THROWS_AS(t.view<float**>(), DTypeError);
    CHECK_THROWS_AS(t.view<double*>(), ShapeError);
    auto strided = Kokkos::subview(user, Kokkos::ALL, 1);
    Kokkos::View<double*, Kokkos::LayoutStride, Kokkos::HostSpace> col = strided;
    CHECK(from_view(col, d).strides() == Shape{3});  // a strided subview wraps as a view ([views])
  } else {
    using Space = Kokkos::DefaultExecutionSpace::memory_space;
    Kokkos::View<float*, Space> user("user", 4);
    Kokkos::deep_copy(user, 2.f);
    auto t = from_view(user, d);
    CHECK(t.data() == user.data());
    CHECK(sum(t).item<float>() == 8.f);
    CHECK(t.view<float*, Space>().data() == user.data());
    CHECK_THROWS_AS((t.view<float*, Kokkos::HostSpace>()), Error);
    Kokkos::View<float*, Kokkos::HostSpace> host("host", 4);
    CHECK_THROWS_AS(from_view(host, d), Error);
  }
}

TEST_CASE("a wrapped View stays alive as long as the tensor", "[tensor][interop]") {
  Tensor t;
  {
    Kokkos::View<float*, Kokkos::HostSpace> user("user", 3);
    Kokkos::deep_copy(user, 1.5f);
    t = from_view(user);
  }
  CHECK(t.to_vector<float>() == std::vector<float>(3, 1.5f));
}

TEST_CASE("freed tensors' memory is reused through the cache and released by empty_cache", "[tensor][cache]") {
  const Device d = test::device();
  empty_cache();
  CHECK(cached_bytes() == 0);
  void* first = nullptr;
  {
    auto t = ones({1000}, d);
    first = t.data();
  }
  CHECK(cached_bytes() >= 4000);
  auto again = zeros({1000}, d);  // same size: the same block, and its values are rewritten
  CHECK(again.data() == first);
  CHECK(again.to_vector<float>() == std::vector<float>(1000, 0.f));
  CHECK(cached_bytes() == 0);
  { auto big = empty({1 << 20}, d); }
  CHECK(cached_bytes() >= (4u << 20));
  empty_cache();
  CHECK(cached_bytes() == 0);
}
