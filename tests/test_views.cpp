// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Views and strides: view operations share storage and never copy; every operation reads strided
// tensors (elementwise bitwise equal to the same op on contiguous copies); the GEMM reads
// transposed views in place; contiguous() copies are counted apart from transfers; from_view
// wraps any layout; cat and stack. On cpu() and on the emulated GPU (test::device()).
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <kten/kokkos.hpp>

#include "core/emulated_memory.hpp"  // detail::emulated_memory_trapped
#include "core/backends.hpp"  // detail::guarded_instance
#include "ops/elementwise.hpp"  // detail::fill, an in-place kernel that assumes contiguous memory
#include "support.hpp"

using namespace kten;

namespace {

// Bit for bit (NaN included): the values widened to double, which is exact for float.
bool same_bits(const Tensor& x, const Tensor& y) {
  const auto a = x.astype(float64).to_vector<double>(), b = y.astype(float64).to_vector<double>();
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <class T>
std::vector<double> widened(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("view operations share storage and give the right shape, strides and offset", "[views]") {
  const Device d = test::device();
  auto X = rand({4, 3}, d, 1);
  const auto x = X.to_vector<float>();
  CHECK(X.strides() == Shape{3, 1});
  CHECK(X.offset() == 0);
  CHECK(X.is_contiguous());

  auto T = X.transpose(0, 1);
  CHECK(T.shape() == Shape{3, 4});
  CHECK(T.strides() == Shape{1, 3});
  CHECK_FALSE(T.is_contiguous());
  CHECK(T.shares_storage_with(X));
  CHECK(X.transpose().strides() == Shape{1, 3});
  CHECK(transpose(X).shares_storage_with(X));
  const auto t = T.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(t[i * 4 + j] == x[j * 3 + i]);

  reset_stats();
  auto C = T.contiguous();
  CHECK(C.is_contiguous());
  CHECK_FALSE(C.shares_storage_with(X));
  CHECK(C.device() == d);
  CHECK(stats().contiguous_copies == 1);
  CHECK(stats().bytes_contiguous_copies == 48);
  CHECK(stats().transfers() == 0);
  CHECK(X.contiguous().shares_storage_with(X));  // already contiguous: itself
  CHECK(stats().contiguous_copies == 1);
  CHECK(C.to_vector<float>() == t);

  auto r = X.select(0, 1);
  CHECK(r.shape() == Shape{3});
  CHECK(r.offset() == 3);
  CHECK(r.is_contiguous());
  CHECK(r.to_vector<float>() == std::vector<float>(x.begin() + 3, x.begin() + 6));
  CHECK(X.select(1, -1).to_vector<float>() == std::vector<float>{x[2], x[5], x[8], x[11]});
  CHECK(X.select(1, -1).strides() == Shape{3});

  auto n = X.narrow(1, 0, 2);
  CHECK(n.shape() == Shape{4, 2});
  CHECK(n.strides() == Shape{3, 1});
  CHECK_FALSE(n.is_contiguous());
  CHECK(n.to_vector<float>() == std::vector<float>{x[0], x[1], x[3], x[4], x[6], x[7], x[9], x[10]});
  CHECK(X.narrow(0, 1, 2).offset() == 3);
  CHECK(X.narrow(0, 1, 2).is_contiguous());

  auto B = rand({2, 3, 4}, d, 2);
  const auto b = B.to_vector<float>();
  auto P = B.permute({2, 0, 1});
  CHECK(P.shape() == Shape{4, 2, 3});
  CHECK(P.strides() == Shape{1, 12, 4});
  const auto p = P.to_vector<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) CHECK(p[(i * 2 + j) * 3 + k] == b[j * 12 + k * 4 + i]);
  CHECK(B.transpose(0, -1).shape() == Shape{4, 3, 2});

  auto u = r.unsqueeze(0);
  CHECK(u.shape() == Shape{1, 3});
  CHECK(u.squeeze(0).shape() == Shape{3});
  CHECK(u.squeeze(1).shape() == Shape{1, 3});  // not of extent 1: unchanged, as PyTorch
  CHECK(r.unsqueeze(-1).shape() == Shape{3, 1});
  CHECK(ones({1, 2, 1}, d).squeeze().shape() == Shape{2});
  auto e = r.expand({5, 3});
  CHECK(e.shape() == Shape{5, 3});
  CHECK(e.strides() == Shape{0, 1});
  CHECK(e.shares_storage_with(X));
  const auto ev = e.to_vector<float>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) CHECK(ev[i * 3 + j] == x[3 + j]);
  CHECK(u.expand({4, -1}).shape() == Shape{4, 3});
}

TEST_CASE("reshape is a view when the strides allow it and a copy otherwise", "[views]") {
  const Device d = test::device();
  auto X = rand({4, 6}, d, 3);
  auto R = X.reshape({2, 2, 6});
  CHECK(R.shares_storage_with(X));
  auto n = X.narrow(1, 0, 4);  // rows of 4 out of 6: {4, 4} can split its rows, not merge them
  auto split = n.reshape({4, 2, 2});
  CHECK(split.shares_storage_with(X));
  CHECK(split.strides() == Shape{6, 2, 1});
  CHECK(split.to_vector<float>() == n.to_vector<float>());
  reset_stats();
  auto merged = n.reshape({16});
  CHECK_FALSE(merged.shares_storage_with(X));
  CHECK(stats().contiguous_copies == 1);
  CHECK(merged.to_vector<float>() == n.to_vector<float>());
  auto T = X.transpose();
  CHECK(T.reshape({6, 2, 2}).shares_storage_with(X));  // splitting the outer axis of a transpose
  CHECK(T.reshape({6, 2, 2}).to_vector<float>() == T.to_vector<float>());
  CHECK_FALSE(T.reshape({24}).shares_storage_with(X));
  CHECK(T.reshape({-1}).to_vector<float>() == T.to_vector<float>());
}

TEST_CASE("view() is reshape that never copies: a ShapeError where reshape would copy", "[views]") {
  // DESIGN 1d, PyTorch's view: a solver's later writes to a wrapped field are seen through it.
  const Device d = test::device();
  auto X = rand({4, 6}, d, 3);
  CHECK(X.view({4, -1}).shares_storage_with(X));
  auto n = X.narrow(1, 0, 4);
  auto split = n.view({4, 2, 2});
  CHECK(split.shares_storage_with(X));
  CHECK(split.strides() == Shape{6, 2, 1});
  reset_stats();
  try {
    (void)n.view({16});
    FAIL("view() copied");
  } catch (const ShapeError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::ContainsSubstring("view()") && Catch::Matchers::ContainsSubstring("without a copy") &&
                             Catch::Matchers::ContainsSubstring("reshape()"));
  }
  CHECK_THROWS_AS(X.transpose().view({24}), ShapeError);
  CHECK(stats().contiguous_copies == 0);
  CHECK_THROWS_AS(X.view({5, -1}), ShapeError);
  // Writes through the view reach the base, and the base's writes the view.
  auto v = X.transpose().view({3, 2, 4});
  v.copy_from(zeros({3, 2, 4}, d));
  CHECK(sum(X).item<float>() == 0.f);
  X.copy_from(ones({4, 6}, d));
  CHECK(sum(v).item<float>() == 24.f);
  // Its gradient is reshape's.
  auto w = rand({2, 3}, d, 4).requires_grad_();
  sum(w.view({6}) * arange(6, d)).backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("zeros_like and ones_like take the shape, dtype and device", "[views]") {
  const Device d = test::device();
  const Tensor t = rand({2, 3}, d, 5).astype(float64);
  const Tensor z = zeros_like(t), o = ones_like(t.transpose());
  CHECK((z.shape() == Shape{2, 3} && z.dtype() == float64 && z.device() == d));
  CHECK((o.shape() == Shape{3, 2} && o.dtype() == float64 && o.device() == d && o.is_contiguous()));
  CHECK(sum(z).item<double>() == 0);
  CHECK(sum(o).item<double>() == 6);
  CHECK_THROWS_AS(zeros_like(Tensor()), Error);
}

TEST_CASE("writing through a view reaches its base", "[views]") {
  const Device d = test::device();
  auto X = zeros({4, 3}, d);
  X.select(0, 1).copy_from(tensor({1.f, 2.f, 3.f}, d));
  X.narrow(1, 2, 1).copy_from(full({4, 1}, 9, d));
  X.transpose().select(0, 0).copy_from(tensor({5.f, 6.f, 7.f, 8.f}, test::other_device()));  // column 0, across devices
  CHECK(X.to_vector<float>() == std::vector<float>{5, 0, 9, 6, 2, 9, 7, 0, 9, 8, 0, 9});
  // A contiguous view with an offset: one copy of bytes into the middle of the storage.
  X.narrow(0, 2, 2).copy_from(ones({2, 3}, d));
  CHECK(X.to_vector<float>() == std::vector<float>{5, 0, 9, 6, 2, 9, 1, 1, 1, 1, 1, 1});
  // The source may be a view too.
  auto Y = zeros({3, 4}, d);
  Y.copy_from(X.transpose());
  CHECK(Y.to_vector<float>() == std::vector<float>{5, 6, 1, 1, 0, 2, 1, 1, 9, 9, 1, 1});
  // An expanded tensor's elements overlap: writing into it is refused.
  auto e = zeros({3}, d).expand({2, 3});
  CHECK_THROWS_AS(e.copy_from(ones({2, 3}, d)), ShapeError);
}

TEMPLATE_TEST_CASE("every elementwise op on strided inputs equals the op on contiguous copies, bit for bit",
                   "[views]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  auto B = uniform({5, 6, 7}, 0.1, 2.0, d, 4, t);
  auto S = uniform({7, 5}, 0.1, 2.0, d, 5, t);
  auto N = uniform({6, 5}, -2.0, 2.0, d, 14, t);  // signed: NaN from log and sqrt, compared bit for bit
  // Strided inputs: selects across the middle, transposes, a narrow, a permute, a strided vector.
  const std::vector<Tensor> views = {B.select(1, 2), B.select(0, 3).transpose(), B.narrow(2, 1, 5).select(0, 4),
                                     S.transpose(), B.permute({2, 1, 0}).select(2, 1), S.select(1, 3), N.transpose()};
  using Unary = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Unary>> unary = {
      {"exp", [](const Tensor& x) { return exp(x); }},         {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }},       {"abs", [](const Tensor& x) { return abs(x); }},
      {"neg", [](const Tensor& x) { return -x; }},               {"relu", [](const Tensor& x) { return relu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},   {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"+ s", [](const Tensor& x) { return x + 1.5; }},          {"s - x", [](const Tensor& x) { return 1.5 - x; }},
      {"* s", [](const Tensor& x) { return x * 3.0; }},          {"s / x", [](const Tensor& x) { return 2.0 / x; }},
      {"astype", [](const Tensor& x) { return x.astype(float32).astype(float64); }},
      {"fma", [](const Tensor& x) { return fma(x, x, x); }}};
  for (const Tensor& v : views) {
    CAPTURE(v.shape(), v.strides());
    REQUIRE_FALSE(v.is_contiguous());
    const Tensor c = v.contiguous();
    for (const auto& [name, op] : unary) {
      CAPTURE(name);
      CHECK(same_bits(op(v), op(c)));
    }
  }
  // Binary ops: strided with strided, strided with contiguous, and broadcasting a strided row.
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Binary>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }}};
  // a, b: 5x7 (rows of a select, a transpose); row: 7 with stride 5; col: 5x1 with strides (42, 7).
  const Tensor a = B.select(1, 2), b = S.transpose(), row = S.select(1, 2), col = B.select(2, 0).narrow(1, 0, 1);
  const std::vector<std::pair<Tensor, Tensor>> pairs = {
      {a, b}, {a, b.contiguous()}, {a.contiguous(), b}, {a, row}, {row, b}, {a, col}, {col, row}, {a, a.select(0, 0).expand({5, 7})}};
  for (const auto& [x, y] : pairs) {
    CAPTURE(x.shape(), x.strides(), y.shape(), y.strides());
    for (const auto& [name, op] : binary) {
      CAPTURE(name);
      CHECK(same_bits(op(x, y), op(x.contiguous(), y.contiguous())));
    }
  }
  // Elementwise ops read strided tensors in place: no contiguous copy.
  reset_stats();
  (void)(exp(a) + b * row);
  CHECK(stats().contiguous_copies == 0);
}

TEMPLATE_TEST_CASE("reductions and matmul on strided inputs equal them on contiguous copies", "[views]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  auto B = uniform({5, 40, 30}, -1.0, 1.0, d, 6, t);
  for (const Tensor& v : {B.select(1, 7), B.permute({2, 0, 1}).select(2, 3), B.narrow(2, 3, 20).select(0, 1).transpose()}) {
    CAPTURE(v.shape(), v.strides());
    const Tensor c = v.contiguous();
    auto same = [](const Tensor& x, const Tensor& y) {
      CHECK(x.template to_vector<TestType>() == y.template to_vector<TestType>());
    };
    same(sum(v), sum(c));
    same(mean(v), mean(c));
    same(max(v), max(c));
    same(norm(v), norm(c));
    for (int axis : {0, 1}) {
      same(sum(v, axis), sum(c, axis));
      same(max(v, axis), max(c, axis));
      same(norm(v, axis), norm(c, axis));
      same(mean(v, axis), mean(c, axis));
    }
  }
  // The GEMM reads row- and column-major operands (transposed views, narrowed columns) in place.
  auto A = uniform({33, 17}, -1.0, 1.0, d, 7, t), W = uniform({23, 17}, -1.0, 1.0, d, 8, t);
  reset_stats();
  auto AWt = matmul(A, W.transpose());
  auto AtA = matmul(A.transpose(), A);
  auto narrow = matmul(A.narrow(1, 2, 10), W.narrow(1, 5, 10).transpose());
  auto vec = matmul(A.transpose(), A.select(1, 4));
  CHECK(stats().contiguous_copies == 0);
  auto close = [](const Tensor& got, const Tensor& x, const Tensor& y) {
    test::require_allclose<TestType>(got, widened(matmul(x.contiguous(), y.contiguous()).template to_vector<TestType>()));
  };
  close(AWt, A, W.transpose());
  close(AtA, A.transpose(), A);
  close(narrow, A.narrow(1, 2, 10), W.narrow(1, 5, 10).transpose());
  close(vec, A.transpose(), A.select(1, 4));
  // Neither row- nor column-major (strides (5, 30)): one contiguous copy, counted.
  auto C3 = uniform({4, 6, 5}, -1.0, 1.0, d, 9, t), R = uniform({4, 3}, -1.0, 1.0, d, 10, t);
  const Tensor odd = C3.select(2, 1).transpose();
  reset_stats();
  auto product = matmul(odd, R);
  CHECK(stats().contiguous_copies == 1);
  CHECK(product.shape() == Shape{6, 3});
  close(product, odd, R);
}

TEST_CASE("transfers of views copy their elements, counting the gather apart from the transfer", "[views]") {
  const Device d = test::device();
  auto X = rand({4, 3}, d, 11);
  const auto x = X.to_vector<float>();
  auto T = X.transpose();
  reset_stats();
  auto on_other = T.to(test::other_device());
  CHECK(on_other.shape() == Shape{3, 4});
  CHECK(on_other.is_contiguous());
  CHECK(stats().contiguous_copies == 1);
  CHECK(stats().transfers() == 1);
  CHECK(stats().bytes_transferred() == 48);
  CHECK(on_other.to_vector<float>() == T.to_vector<float>());
  std::ostringstream printed;
  printed << X.select(1, 0);
  CHECK(printed.str().find("<Tensor 4 float32") != std::string::npos);
}

TEST_CASE("view errors say what to do", "[views]") {
  const Device d = test::device();
  auto X = rand({4, 3}, d, 12);
  CHECK_THROWS_AS(X.transpose(0, 2), ShapeError);
  CHECK_THROWS_AS(X.permute({0}), ShapeError);
  CHECK_THROWS_AS(X.permute({0, 0}), ShapeError);
  CHECK_THROWS_AS(X.narrow(1, 2, 2), ShapeError);
  CHECK_THROWS_AS(X.narrow(1, 0, -1), ShapeError);
  CHECK_THROWS_AS(X.select(0, 4), ShapeError);
  CHECK_THROWS_AS(X.select(0, -5), ShapeError);
  CHECK_THROWS_AS(X.select(2, 0), ShapeError);
  CHECK_THROWS_AS(X.unsqueeze(3), ShapeError);
  CHECK_THROWS_AS(X.squeeze(2), ShapeError);
  CHECK_THROWS_AS(X.expand({4, 5}), ShapeError);
  CHECK_THROWS_AS(X.expand({3}), ShapeError);
  CHECK_THROWS_AS(X.expand({-1, 4, 3}), ShapeError);
  CHECK_THROWS_AS(ones({3}, d).transpose(), ShapeError);
  try {
    X.narrow(1, 2, 2);
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("start + length <= 3") != std::string::npos);
  }
}

TEST_CASE("cat and stack make new contiguous tensors", "[views]") {
  const Device d = test::device();
  auto X = rand({4, 3}, d, 13);
  const auto x = X.to_vector<float>();
  auto K = cat({X, X}, 0);
  CHECK(K.shape() == Shape{8, 3});
  CHECK_FALSE(K.shares_storage_with(X));
  std::vector<float> twice = x;
  twice.insert(twice.end(), x.begin(), x.end());
  CHECK(K.to_vector<float>() == twice);
  auto J = cat({X.narrow(1, 0, 1), X.transpose().transpose(), X.narrow(1, 2, 1)}, -1);
  CHECK(J.shape() == Shape{4, 5});
  const auto j = J.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    CHECK(j[i * 5] == x[i * 3]);
    CHECK(j[i * 5 + 4] == x[i * 3 + 2]);
    for (int c = 0; c < 3; ++c) CHECK(j[i * 5 + 1 + c] == x[i * 3 + c]);
  }
  auto r = X.select(0, 1);
  auto S = stack({r, r}, 0);
  CHECK(S.shape() == Shape{2, 3});
  CHECK(S.to_vector<float>() == std::vector<float>{x[3], x[4], x[5], x[3], x[4], x[5]});
  auto S1 = stack({X.select(1, 0), X.select(1, 1)}, 1);
  CHECK(S1.shape() == Shape{4, 2});
  CHECK(S1.to_vector<float>() == X.narrow(1, 0, 2).to_vector<float>());
  CHECK(cat({X, zeros({0, 3}, d)}, 0).shape() == Shape{4, 3});

  CHECK_THROWS_AS(cat({}, 0), ShapeError);
  CHECK_THROWS_AS(cat({X, ones({4, 2}, d)}, 0), ShapeError);
  CHECK_THROWS_AS(cat({X, ones({4}, d)}, 0), ShapeError);
  CHECK_THROWS_AS(cat({X, X.astype(float64)}, 0), DTypeError);
  CHECK_THROWS_AS(stack({r, X.select(1, 0)}, 0), ShapeError);
  CHECK_THROWS_AS(stack({r, r}, 2), ShapeError);
  CHECK_THROWS_AS(stack({r, r.astype(float64)}, 0), DTypeError);
  if (num_gpus() > 0) {
    CHECK_THROWS_AS(cat({X, X.to(test::other_device())}, 0), DeviceMismatch);
    CHECK_THROWS_AS(stack({r, r.to(test::other_device())}, 0), DeviceMismatch);
  }
}

TEST_CASE("from_view wraps LayoutLeft, LayoutStride and subview Views without a copy", "[views][interop]") {
  const Device d = test::device();
  if (!d.is_cpu() && !gpus_are_emulated()) SKIP("host-built Views fit cpu() and the emulated GPU only");
  // An application's multi-component field: n points of 3 components, row-major.
  Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> field("field", 5, 3);
  for (int i = 0; i < 5; ++i)
    for (int c = 0; c < 3; ++c) field(i, c) = 10 * i + c;
  auto component = Kokkos::subview(field, Kokkos::ALL, 1);
  auto y = from_view(component, d);
  CHECK(y.shape() == Shape{5});
  CHECK(y.strides() == Shape{3});
  CHECK(y.data() == &field(0, 1));
  CHECK(y.to_vector<double>() == std::vector<double>{1, 11, 21, 31, 41});
  CHECK(sum(y).item<double>() == 105);
  y.copy_from(tensor({0.0, 1.0, 2.0, 3.0, 4.0}, d));  // writes the application's memory
  CHECK(field(3, 1) == 3);
  CHECK(field(3, 0) == 30);

  Kokkos::View<float**, Kokkos::LayoutLeft, Kokkos::HostSpace> left("left", 4, 3);  // column-major
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) left(i, j) = static_cast<float>(i * 3 + j);
  auto L = from_view(left, d);
  CHECK(L.shape() == Shape{4, 3});
  CHECK(L.strides() == Shape{1, 4});
  CHECK_FALSE(L.is_contiguous());
  CHECK(L.data() == left.data());
  std::vector<float> row_major(12);
  for (int k = 0; k < 12; ++k) row_major[k] = static_cast<float>(k);
  CHECK(L.to_vector<float>() == row_major);
  reset_stats();
  auto LtL = matmul(L.transpose(), L);  // a column-major operand goes to the GEMM as it is
  CHECK(stats().contiguous_copies == 0);
  test::require_allclose<float>(LtL, widened(matmul(L.contiguous().transpose(), L.contiguous()).to_vector<float>()));

  Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace> cube("cube", 2, 3, 4);
  for (int i = 0; i < 24; ++i) cube.data()[i] = i;
  Kokkos::View<double**, Kokkos::LayoutStride, Kokkos::HostSpace> plane = Kokkos::subview(cube, Kokkos::ALL, 1, Kokkos::ALL);
  auto Pl = from_view(plane, d);
  CHECK(Pl.shape() == Shape{2, 4});
  CHECK(Pl.strides() == Shape{12, 1});
  CHECK(Pl.to_vector<double>() == std::vector<double>{4, 5, 6, 7, 16, 17, 18, 19});

  if (d.is_cpu()) {
    // view<>() hands back LayoutRight for contiguous tensors, LayoutStride on request for any.
    auto back = L.view<float**, Kokkos::LayoutStride>();
    static_assert(std::is_same_v<decltype(back)::array_layout, Kokkos::LayoutStride>);
    CHECK(back.data() == left.data());
    CHECK(back.stride(0) == 1);
    CHECK(back.stride(1) == 4);
    CHECK(back(2, 1) == left(2, 1));
    CHECK_THROWS_AS(L.view<float**>(), Error);
    auto T = L.transpose();
    CHECK(T.is_contiguous());
    auto right = T.view<float**>();
    static_assert(std::is_same_v<decltype(right)::array_layout, Kokkos::LayoutRight>);
    CHECK(right(1, 2) == left(2, 1));
    auto explicit_space = y.view<double*, Kokkos::LayoutStride, Kokkos::HostSpace>();
    CHECK(explicit_space(4) == 4);
  }
}

TEST_CASE("device_of names the device of a View's memory space, and from_view(view) takes it", "[views][interop]") {
  Kokkos::View<float*, Kokkos::HostSpace> host("host", 3);
  CHECK(device_of(host) == cpu());
  CHECK(from_view(host).device() == cpu());
  CHECK(from_view(host).data() == host.data());
  using Space = Kokkos::DefaultExecutionSpace::memory_space;
  constexpr bool host_only = std::is_same_v<Space, Kokkos::HostSpace>;
  Kokkos::View<double**, Space> field("field", 2, 3);
  CHECK(device_of(field) == (host_only ? cpu() : gpu(0)));
  if (!host_only) CHECK(from_view(field).device() == gpu(0));
  // A space that is no kten device's (here the anonymous one a View of any space converts to).
  const Kokkos::View<float*, Kokkos::AnonymousSpace> anonymous = host;
  CHECK_THROWS_WITH(device_of(anonymous), Catch::Matchers::ContainsSubstring("memory space is on no kten device"));
  CHECK_THROWS_AS(device_of(anonymous), Error);
}

TEST_CASE("from_view refuses memory that the GPU runtime places on the other device", "[views][interop]") {
  // A View's type names its space whatever its pointer: an unmanaged View over another device's
  // memory. A real GPU's runtime tells both ways; an emulated GPU knows only its trapped memory.
  const Device d = test::device();
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  std::vector<float> host(4, 1.f);
  Kokkos::View<float*, Kokkos::HostSpace, Unmanaged> host_view(host.data(), 4);
  CHECK(from_view(host_view, cpu()).data() == host.data());  // host memory on cpu() is never refused
  // Where the memory cannot be told apart (cpu(), or an untrapped emulated GPU: plain host memory),
  // a GPU's own memory must not be refused on its device either.
  if (d.is_cpu() || (gpus_are_emulated() && !detail::emulated_memory_trapped())) {
    Tensor own = zeros({4}, d);
    Kokkos::View<float*, Kokkos::HostSpace, Unmanaged> own_view(static_cast<float*>(own.data()), 4);  // host memory here
    CHECK(from_view(own_view, d).data() == own.data());
    return;
  }
  Tensor t = zeros({4}, d);
  Kokkos::View<float*, Kokkos::HostSpace, Unmanaged> device_memory(static_cast<float*>(t.data()), 4);
  CHECK_THROWS_AS(from_view(device_memory, cpu()), DeviceMismatch);
  CHECK_THROWS_WITH(from_view(device_memory, cpu()), Catch::Matchers::ContainsSubstring("is GPU memory"));
  if (!gpus_are_emulated()) {
    Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space, Unmanaged> host_memory(host.data(), 4);
    CHECK_THROWS_WITH(from_view(host_memory, d), Catch::Matchers::ContainsSubstring("is host memory"));
  }
}

TEST_CASE("from_view takes a View in the default layout of the default memory space", "[views][interop]") {
  // LayoutLeft in a CUDA build (CudaSpace's default), LayoutRight on the host: this compiles in
  // both, and runs on every device whose memory space is the default one's.
  using Space = Kokkos::DefaultExecutionSpace::memory_space;
  const Device d = test::device();
  Kokkos::View<double**, Space> user("user", 4, 3);
  auto host = Kokkos::create_mirror_view(user);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) host(i, j) = i * 3 + j;
  Kokkos::deep_copy(user, host);
  const bool fits = d.is_cpu() ? std::is_same_v<Space, Kokkos::HostSpace> : !std::is_same_v<Space, Kokkos::HostSpace> || gpus_are_emulated();
  if (!fits) SKIP("the default memory space is not this device's");
  auto t = from_view(user, d);
  CHECK(t.shape() == Shape{4, 3});
  CHECK(t.strides() == Shape{static_cast<std::int64_t>(user.stride(0)), static_cast<std::int64_t>(user.stride(1))});
  CHECK(t.data() == user.data());
  std::vector<double> want(12);
  for (int k = 0; k < 12; ++k) want[k] = k;
  CHECK(t.to_vector<double>() == want);
  CHECK(sum(t, 0).to_vector<double>() == std::vector<double>{18, 22, 26});
  auto back = t.view<double**, Kokkos::LayoutStride, Space>();
  CHECK(back.data() == user.data());
  CHECK(back.stride(1) == user.stride(1));
}

namespace {

using DefaultMemory = Kokkos::DefaultExecutionSpace::memory_space;

// The application's own kernels on its instance.
struct FillIndex {
  Kokkos::View<double*, DefaultMemory> field;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const { field(i) = i; }
};
struct AddOne {
  Kokkos::View<double*, DefaultMemory> field;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const { field(i) += 1; }
};

}  // namespace

TEST_CASE("a StreamGuard makes kten enqueue on the application's instance, in order with its kernels", "[interop][stream]") {
  using Exec = Kokkos::DefaultExecutionSpace;
  const Device d = test::device();
  const bool fits = d.is_cpu() ? std::is_same_v<DefaultMemory, Kokkos::HostSpace>
                               : !std::is_same_v<DefaultMemory, Kokkos::HostSpace> || gpus_are_emulated();
  if (!fits) SKIP("the default execution space does not serve this device");
  // The application's own queue: a new stream in a GPU build, the host instance in a host build.
  const auto application = new_stream_instance();
  REQUIRE(application != nullptr);
  const int n = 1000;
  Kokkos::View<double*, DefaultMemory> field("field", n);
  CHECK(detail::guarded_instance() == nullptr);
  {
    const Exec space = *application;
    const StreamGuard guard(space);
    CHECK(detail::guarded_instance() != nullptr);
    // The application's kernel, kten's, the application's again, then kten's: one instance, and
    // no fence between them but the read of the result.
    Kokkos::parallel_for("fill", Kokkos::RangePolicy<Exec>(space, 0, n), FillIndex{field});
    const Tensor t = from_view(field, d);
    t.copy_from(t * 2.0);
    Kokkos::parallel_for("add one", Kokkos::RangePolicy<Exec>(space, 0, n), AddOne{field});
    const Tensor total = sum(t);
    CHECK(total.item<double>() == 2.0 * (n - 1) * n / 2 + n);
    {
      const StreamGuard inner(space);  // guards nest; they belong to the thread that made them
      CHECK(detail::guarded_instance() != nullptr);
      bool other_thread_unguarded = false;
      std::thread([&] { other_thread_unguarded = detail::guarded_instance() == nullptr; }).join();
      CHECK(other_thread_unguarded);
    }
    CHECK(detail::guarded_instance() != nullptr);  // the outer guard's again
  }
  CHECK(detail::guarded_instance() == nullptr);
}

TEST_CASE("kernels that assume contiguous operands refuse strided ones instead of writing elsewhere", "[views]") {
  const Device d = test::device();
  auto X = zeros({4, 3}, d);
  try {
    detail::fill(X.transpose(), 1.0);
    FAIL("a strided operand reached a contiguous kernel");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("strided view") != std::string::npos);
    CHECK(std::string(e.what()).find("contiguous()") != std::string::npos);
  }
  CHECK_THROWS_AS(detail::fill(X.narrow(1, 0, 2), 1.0), Error);
  detail::fill(X.select(0, 1), 2.0);  // contiguous with an offset: the kernel starts at row 1
  CHECK(X.to_vector<float>() == std::vector<float>{0, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 0});
}

namespace {

// set_check_saved(on) for one test, restored after it, by a failure too.
struct CheckSaved {
  bool previous = set_check_saved(true);
  ~CheckSaved() { set_check_saved(previous); }
};

}  // namespace

TEST_CASE("set_check_saved: a wrapped field written between forward and backward is an error, not a wrong gradient",
          "[views][interop][autograd]") {
  using Catch::Matchers::ContainsSubstring;
  using Space = Kokkos::DefaultExecutionSpace::memory_space;
  const Device d = test::device();
  const bool fits = d.is_cpu() ? std::is_same_v<Space, Kokkos::HostSpace> : !std::is_same_v<Space, Kokkos::HostSpace> || gpus_are_emulated();
  if (!fits) SKIP("the default memory space is not this device's");
  Kokkos::View<double*, Space> field("field", 12);
  Kokkos::deep_copy(field, 2.0);
  const Tensor u = from_view(field, d).view({4, 3});
  Tensor w = ones({4, 3}, d, float64).requires_grad_();
  const CheckSaved on;
  REQUIRE(check_saved_enabled());

  SECTION("unwritten, the backward runs and reads the saved values") {
    sum(u * w).backward();
    CHECK(w.grad().to_vector<double>() == std::vector<double>(12, 2.0));
  }
  SECTION("a NaN the field held all along is not a write") {
    Kokkos::deep_copy(Kokkos::subview(field, 5), std::numeric_limits<double>::quiet_NaN());
    sum(u * w).backward();
    CHECK(std::isnan(w.grad().to_vector<double>()[5]));
  }
  SECTION("written by the application (a Kokkos copy kten cannot see): the op, the input and the count are named") {
    Tensor loss = sum(u * w);
    Kokkos::deep_copy(Kokkos::subview(field, std::make_pair(0, 3)), 5.0);  // the solver's step, one too early
    CHECK_THROWS_WITH(loss.backward(), ContainsSubstring("going back through kten::mul, its input 0") &&
                                           ContainsSubstring("3 of 12 elements differ") &&
                                           ContainsSubstring("after backward()"));
    CHECK_FALSE(w.grad().defined());  // nothing half-accumulated
  }
  SECTION("through a strided view of the field, and with the sync debug mode at Error") {
    const Tensor column = u.select(1, 2);  // elements 2, 5, 8, 11: strided
    Tensor v = ones({4}, d, float64).requires_grad_();
    Tensor loss = sum(column * v);
    Kokkos::deep_copy(Kokkos::subview(field, 8), -1.0);
    const SyncDebug before = set_sync_debug_mode(SyncDebug::Error);
    CHECK_THROWS_WITH(loss.backward(), ContainsSubstring("1 of 4 elements differ"));
    set_sync_debug_mode(before);
  }
  SECTION("turned off, the same write goes unseen and the gradient is of the new values: why the check exists") {
    set_check_saved(false);
    Tensor loss = sum(u * w);
    Kokkos::deep_copy(field, 5.0);
    loss.backward();
    CHECK(w.grad().to_vector<double>() == std::vector<double>(12, 5.0));
  }
}
