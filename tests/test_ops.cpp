// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Operations on the device under test, checked against float64 host references.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include <catch2/catch_template_test_macros.hpp>

#include "support.hpp"

using namespace kten;
using test::host_doubles;
using test::require_allclose;

namespace {

template <class F>
std::vector<double> map_ref(const std::vector<double>& x, F f) {
  std::vector<double> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), f);
  return out;
}

// Row-major broadcasting reference for 2-D outputs: a and b are (ra x ca) and (rb x cb).
std::vector<double> broadcast_ref(const std::vector<double>& a, Shape sa, const std::vector<double>& b, Shape sb,
                                  const std::function<double(double, double)>& f) {
  while (sa.size() < 2) sa.insert(sa.begin(), 1);
  while (sb.size() < 2) sb.insert(sb.begin(), 1);
  const auto rows = std::max(sa[0], sb[0]), cols = std::max(sa[1], sb[1]);
  std::vector<double> out;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      out.push_back(f(a[(sa[0] == 1 ? 0 : i) * sa[1] + (sa[1] == 1 ? 0 : j)],
                      b[(sb[0] == 1 ? 0 : i) * sb[1] + (sb[1] == 1 ? 0 : j)]));
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("elementwise arithmetic with tensors and scalars stays on the device", "[ops]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  auto x = uniform({5, 7}, 0.5, 2.0, d, 1, t);
  auto y = uniform({5, 7}, 0.5, 2.0, d, 2, t);
  const auto hx = host_doubles<TestType>(x), hy = host_doubles<TestType>(y);
  auto sum_xy = x + y;
  CHECK(sum_xy.device() == d);
  CHECK(sum_xy.dtype() == t);
  require_allclose<TestType>(sum_xy, broadcast_ref(hx, {5, 7}, hy, {5, 7}, std::plus<>()));
  require_allclose<TestType>(x - y, broadcast_ref(hx, {5, 7}, hy, {5, 7}, std::minus<>()));
  require_allclose<TestType>(x * y, broadcast_ref(hx, {5, 7}, hy, {5, 7}, std::multiplies<>()));
  require_allclose<TestType>(x / y, broadcast_ref(hx, {5, 7}, hy, {5, 7}, std::divides<>()));
  require_allclose<TestType>(x + 2.0, map_ref(hx, [](double v) { return v + 2; }));
  require_allclose<TestType>(2.0 + x, map_ref(hx, [](double v) { return 2 + v; }));
  require_allclose<TestType>(x - 2.0, map_ref(hx, [](double v) { return v - 2; }));
  require_allclose<TestType>(2.0 - x, map_ref(hx, [](double v) { return 2 - v; }));
  require_allclose<TestType>(x * 3.0, map_ref(hx, [](double v) { return v * 3; }));
  require_allclose<TestType>(3.0 * x, map_ref(hx, [](double v) { return 3 * v; }));
  require_allclose<TestType>(x / 4.0, map_ref(hx, [](double v) { return v / 4; }));
  require_allclose<TestType>(4.0 / x, map_ref(hx, [](double v) { return 4 / v; }));
  require_allclose<TestType>(-x, map_ref(hx, [](double v) { return -v; }));
}

TEMPLATE_TEST_CASE("binary operations broadcast like NumPy", "[ops]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4}}, {{3, 4}, {3, 1}}, {{1, 4}, {3, 1}}, {{3, 1}, {1}}, {{4}, {3, 4}}, {{}, {2, 3}}, {{2, 3}, {}}};
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : cases) {
    CAPTURE(shape_str(sa), shape_str(sb));
    auto a = rand(sa, d, seed++, t), b = rand(sb, d, seed++, t);
    auto out = a * b - a;
    const auto ref = broadcast_ref(host_doubles<TestType>(a), sa, host_doubles<TestType>(b), sb,
                                   [](double u, double v) { return u * v - u; });
    require_allclose<TestType>(out, ref);
  }
  CHECK((rand({2, 3, 4}, d, 1, t) + rand({3, 1}, d, 2, t)).shape() == Shape{2, 3, 4});
  CHECK((zeros({0, 3}, d, t) + ones({3}, d, t)).shape() == Shape{0, 3});
  CHECK_THROWS_AS(ones({2, 3}, d, t) + ones({4}, d, t), ShapeError);
  CHECK_THROWS_AS(ones({2, 3}, d, t) * ones({3, 2}, d, t), ShapeError);
}

TEST_CASE("mixed dtypes are refused, never promoted silently", "[ops]") {
  const Device d = test::device();
  CHECK_THROWS_AS(ones({2}, d, float32) + ones({2}, d, float64), DTypeError);
  CHECK_THROWS_AS(matmul(ones({2, 2}, d, float32), ones({2, 2}, d, float64)), DTypeError);
}

TEMPLATE_TEST_CASE("unary functions match the host's", "[ops]", float, double) {
  const Device d = test::device();
  auto x = uniform({3, 33}, -3.0, 3.0, d, 7, dtype_of<TestType>());
  const auto hx = host_doubles<TestType>(x);
  auto p = abs(x) + 0.1;
  const auto hp = map_ref(hx, [](double v) { return std::fabs(v) + 0.1; });
  require_allclose<TestType>(x.exp(), map_ref(hx, [](double v) { return std::exp(v); }));
  require_allclose<TestType>(p.log(), map_ref(hp, [](double v) { return std::log(v); }));
  require_allclose<TestType>(p.sqrt(), map_ref(hp, [](double v) { return std::sqrt(v); }));
  require_allclose<TestType>(x.abs(), map_ref(hx, [](double v) { return std::fabs(v); }));
  require_allclose<TestType>(neg(x), map_ref(hx, [](double v) { return -v; }));
  require_allclose<TestType>(x.relu(), map_ref(hx, [](double v) { return v > 0 ? v : 0.0; }));
  require_allclose<TestType>(x.sigmoid(), map_ref(hx, [](double v) { return 1 / (1 + std::exp(-v)); }));
  require_allclose<TestType>(x.tanh(), map_ref(hx, [](double v) { return std::tanh(v); }));
}

namespace {

// Units in the last place between two finite non-negative values of one type (subnormals included):
// their bit patterns, read as integers, count the representable values between them.
template <class T>
std::int64_t ulps_apart(T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  Bits ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return ia > ib ? std::int64_t(ia) - ib : std::int64_t(ib) - ia;
}

// e^x rounded to T, from the host's long double exp (more precise than T).
template <class T>
T exp_ref(T x) {
  return static_cast<T>(std::exp(static_cast<long double>(x)));
}

}  // namespace

TEMPLATE_TEST_CASE("exp is within 1 ulp from overflow down to the smallest subnormal, with inf, 0 and NaN beyond",
                   "[ops]", float, double) {
  using T = TestType;
  using limits = std::numeric_limits<T>;
  const Device d = test::device();
  const bool f32 = sizeof(T) == 4;
  // The largest x whose e^x is finite, the smallest whose e^x is normal, the smallest whose e^x
  // is not 0 (e^x is then the smallest subnormal), and the values the issue found wrong.
  const T top = f32 ? T(88.72283172607421875) : T(709.7827128933839731);
  const T lowest_normal = f32 ? T(-87.33654022216796875) : T(-708.39641853226408);
  const T lowest_nonzero = f32 ? T(-103.972076416015625) : T(-745.13321910194111);
  std::vector<T> x = {top, lowest_normal, lowest_nonzero, f32 ? T(88.72281) : T(709.78),
                      f32 ? T(-87.3365) : T(-708.39), f32 ? T(-100) : T(-740)};
  // A sweep over the whole finite range, subnormal results included.
  const auto sweep = kten::arange(double(lowest_nonzero), double(top), (double(top) - lowest_nonzero) / 20000, d,
                                  dtype_of<T>()).template to_vector<T>();
  x.insert(x.end(), sweep.begin(), sweep.end());
  const auto got = exp(kten::tensor(x, d)).template to_vector<T>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i, x[i], got[i], exp_ref(x[i]));
    REQUIRE(std::isfinite(got[i]));
    REQUIRE(got[i] > 0);
    REQUIRE(ulps_apart(got[i], exp_ref(x[i])) <= 1);
  }
  CHECK(got[0] > limits::max() / 2);      // the largest finite result
  CHECK(got[1] >= limits::min());         // still normal
  CHECK(got[2] == limits::denorm_min());  // the smallest subnormal

  const std::vector<T> edges = {std::nextafter(top, limits::infinity()), std::nextafter(lowest_nonzero, -limits::infinity()),
                                limits::infinity(), -limits::infinity(), limits::quiet_NaN(), f32 ? T(100) : T(1000),
                                f32 ? T(-200) : T(-2000), f32 ? T(88.99) : T(709.99)};
  const auto e = exp(kten::tensor(edges, d)).template to_vector<T>();
  CHECK(e[0] == limits::infinity());
  CHECK(e[1] == 0);
  CHECK(e[2] == limits::infinity());
  CHECK(e[3] == 0);
  CHECK(std::isnan(e[4]));
  CHECK(e[5] == limits::infinity());
  CHECK(e[6] == 0);
  CHECK(e[7] == limits::infinity());  // overflows by itself, inside the clamp
}

TEST_CASE("float32 erf is within 2 ulp of erf, odd, and 1 beyond 4; gelu follows it", "[ops]") {
  using limits = std::numeric_limits<float>;
  const Device d = test::device();
  // A sweep over [-6, 6] (both halves of the approximation and the switch between them at
  // 0.921875), then tiny magnitudes down to the smallest subnormal, where erf(x) ~ 2x/sqrt(pi).
  std::vector<float> x = kten::arange(-6.0, 6.0, 12.0 / 40000, d, kten::float32).to_vector<float>();
  for (int e = -149; e < -6; ++e)
    for (float m : {1.f, 1.37f, 1.81f}) {
      x.push_back(std::ldexp(m, e));
      x.push_back(-std::ldexp(m, e));
    }
  const float split = 0.921875f;
  for (float s : {split, std::nextafter(split, 0.f), std::nextafter(split, 1.f)}) {
    x.push_back(s);
    x.push_back(-s);
  }
  const auto got = erf(kten::tensor(x, d)).to_vector<float>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float ref = static_cast<float>(std::erf(static_cast<double>(x[i])));
    CAPTURE(i, x[i], got[i], ref);
    REQUIRE(ulps_apart(got[i], ref) <= 2);
  }
  const std::vector<float> edges = {limits::infinity(), -limits::infinity(), limits::quiet_NaN(), 0.f, -0.f, 4.f, 1e30f};
  const auto e = erf(kten::tensor(edges, d)).to_vector<float>();
  CHECK(e[0] == 1.f);
  CHECK(e[1] == -1.f);
  CHECK(std::isnan(e[2]));
  CHECK((e[3] == 0.f && !std::signbit(e[3])));
  CHECK((e[4] == 0.f && std::signbit(e[4])));
  CHECK(e[5] == 1.f);
  CHECK(e[6] == 1.f);
  // gelu(x) = x/2 (1 + erf(x / sqrt 2)): a few ulp of the result, plus, for x < 0, where 1 + erf
  // cancels, erf's own error (2 ulp of 1) times x/2.
  const std::vector<float> gx = kten::arange(-6.0, 6.0, 12.0 / 4000, d, kten::float32).to_vector<float>();
  const auto g = gelu(kten::tensor(gx, d)).to_vector<float>();
  for (std::size_t i = 0; i < gx.size(); ++i) {
    const double xd = gx[i], ref = 0.5 * xd * (1 + std::erf(xd / std::sqrt(2.0)));
    const double ulp = std::nextafter(std::abs(static_cast<float>(ref)), limits::infinity()) - std::abs(static_cast<float>(ref));
    CAPTURE(i, gx[i], g[i], ref);
    REQUIRE(std::abs(g[i] - ref) <= 4 * ulp + (xd < 0 ? 0x1p-23 * std::abs(xd) : 0.0));
  }
}

TEMPLATE_TEST_CASE("relu propagates NaN like NumPy's maximum(x, 0)", "[ops]", float, double) {
  using T = TestType;
  using limits = std::numeric_limits<T>;
  const std::vector<T> x = {limits::quiet_NaN(), -1, 0, 2, limits::infinity(), -limits::infinity()};
  const auto y = relu(kten::tensor(x, test::device())).template to_vector<T>();
  CHECK(std::isnan(y[0]));
  CHECK(std::vector<T>(y.begin() + 1, y.end()) == std::vector<T>{0, 0, 2, limits::infinity(), 0});
}

TEMPLATE_TEST_CASE("whole-tensor reductions return 0-d tensors on the device", "[ops][reduce]", float, double) {
  const Device d = test::device();
  for (std::int64_t n : {1, 7, 1000, 100003}) {
    CAPTURE(n);
    auto x = uniform({n}, -1.0, 1.0, d, static_cast<std::uint64_t>(n), dtype_of<TestType>());
    const auto hx = host_doubles<TestType>(x);
    double s = 0, sq = 0, mx = -HUGE_VAL;
    for (double v : hx) s += v, sq += v * v, mx = std::max(mx, v);
    const double rtol = sizeof(TestType) == 4 ? 1e-4 : 1e-10;
    auto total = sum(x);
    CHECK(total.device() == d);
    CHECK(total.ndim() == 0);
    require_allclose<TestType>(total, {s}, rtol, rtol);
    require_allclose<TestType>(x.mean(), {s / n}, rtol, rtol);
    require_allclose<TestType>(x.norm(), {std::sqrt(sq)}, rtol, rtol);
    CHECK(x.max().template item<TestType>() == static_cast<TestType>(mx));
  }
  CHECK(sum(zeros({0}, d, dtype_of<TestType>())).template item<TestType>() == 0);
  CHECK_THROWS_AS(max(zeros({0}, d, dtype_of<TestType>())), ShapeError);
}

TEMPLATE_TEST_CASE("reductions along an axis remove that axis", "[ops][reduce]", float, double) {
  const Device d = test::device();
  // Short axes; then rows long enough for the host's vector lanes (67), columns folded in tiles of
  // 64 rows and a page of columns: one tile down (axis 0 of 3 x 70 x 67), two (axis 1), three with a
  // partial last one, across two tiles of columns with a partial last one (axis 0 of 130 x 2 x 600).
  // A GPU folds columns by levels of 64-row tiles: axis 0 of 4200 x 2 x 3 takes three (4200 rows,
  // then 66 partial results, then 2).
  for (const Shape& shape : {Shape{3, 5, 4}, Shape{3, 70, 67}, Shape{130, 2, 600}, Shape{4200, 2, 3}}) {
    CAPTURE(shape_str(shape));
    auto x = uniform(shape, -1.0, 1.0, d, 3, dtype_of<TestType>());
    const auto hx = host_doubles<TestType>(x);
    for (int axis : {0, 1, 2, -1}) {
      CAPTURE(axis);
      const int a = axis < 0 ? axis + 3 : axis;
      Shape out_shape = shape;
      out_shape.erase(out_shape.begin() + a);
      std::vector<double> s, m, mx, nr;
      // Reference: iterate output coordinates in row-major order.
      std::int64_t outer = 1, inner = 1;
      for (int k = 0; k < a; ++k) outer *= shape[k];
      for (int k = a + 1; k < 3; ++k) inner *= shape[k];
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
          double acc = 0, sq = 0, best = -HUGE_VAL;
          for (std::int64_t k = 0; k < shape[a]; ++k) {
            const double v = hx[(o * shape[a] + k) * inner + i];
            acc += v, sq += v * v, best = std::max(best, v);
          }
          s.push_back(acc), m.push_back(acc / shape[a]), mx.push_back(best), nr.push_back(std::sqrt(sq));
        }
      auto r = sum(x, axis);
      CHECK(r.shape() == out_shape);
      CHECK(r.device() == d);
      require_allclose<TestType>(r, s);
      require_allclose<TestType>(mean(x, axis), m);
      require_allclose<TestType>(max(x, axis), mx);
      require_allclose<TestType>(norm(x, axis), nr);
    }
  }
  auto x = zeros({3, 5, 4}, d, dtype_of<TestType>());
  CHECK_THROWS_AS(sum(x, 3), ShapeError);
  CHECK_THROWS_AS(sum(x, -4), ShapeError);
  CHECK_THROWS_AS(max(zeros({2, 0}, d), 1), ShapeError);
}

TEMPLATE_TEST_CASE("matmul and transpose are right on odd shapes", "[ops][matmul]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  for (auto [m, k, n] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 1}, {3, 4, 5}, {17, 33, 15}, {64, 1, 31}, {5, 70, 1}, {129, 65, 40}, {2, 0, 3}}) {
    CAPTURE(m, k, n);
    auto A = uniform({m, k}, -1.0, 1.0, d, 1, t), B = uniform({k, n}, -1.0, 1.0, d, 2, t);
    const auto ha = host_doubles<TestType>(A), hb = host_doubles<TestType>(B);
    std::vector<double> ref(m * n, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p = 0; p < k; ++p) ref[i * n + j] += ha[i * k + p] * hb[p * n + j];
    auto C = matmul(A, B);
    CHECK(C.shape() == Shape{m, n});
    CHECK(C.device() == d);
    require_allclose<TestType>(C, ref, 1e-4 * (sizeof(TestType) == 4), sizeof(TestType) == 4 ? 1e-4 : 1e-12);
    auto v = uniform({k}, -1.0, 1.0, d, 3, t);
    const auto hv = host_doubles<TestType>(v);
    std::vector<double> mv(m, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t p = 0; p < k; ++p) mv[i] += ha[i * k + p] * hv[p];
    auto y = matmul(A, v);
    CHECK(y.shape() == Shape{m});
    require_allclose<TestType>(y, mv, 1e-4 * (sizeof(TestType) == 4), sizeof(TestType) == 4 ? 1e-4 : 1e-12);
    auto At = transpose(A);
    CHECK(At.shape() == Shape{k, m});
    std::vector<double> ht(k * m);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t p = 0; p < k; ++p) ht[p * m + i] = ha[i * k + p];
    CHECK(At.template to_vector<TestType>() == std::vector<TestType>(ht.begin(), ht.end()));
  }
  CHECK_THROWS_AS(matmul(ones({2, 3}, d, t), ones({2, 3}, d, t)), ShapeError);
  CHECK_THROWS_AS(matmul(ones({3}, d, t), ones({4, 2}, d, t)), ShapeError);
  CHECK_THROWS_AS(transpose(ones({3}, d, t)), ShapeError);
}

TEST_CASE("the contract's example computes on one device", "[ops]") {
  const Device d = test::device();
  auto X = ones({2, 3}, d);
  auto Y = rand({2, 3}, d, 42);
  auto Z = X.copyto(d);
  auto S = (Z + 2.f).exp() * Y;
  CHECK(S.device() == d);
  const auto hy = host_doubles<float>(Y);
  require_allclose<float>(S, map_ref(hy, [](double y) { return std::exp(3.0) * y; }));
  auto n2 = norm(S);
  CHECK(n2.device() == d);
  double sq = 0;
  for (double y : hy) sq += std::exp(6.0) * y * y;
  CHECK(std::fabs(n2.item<float>() - std::sqrt(sq)) < 1e-4 * std::sqrt(sq));
}

TEMPLATE_TEST_CASE("fma computes a * b + c in one pass", "[ops]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  auto a = uniform({37, 3}, -2.0, 2.0, d, 1, t), b = uniform({37, 3}, -2.0, 2.0, d, 2, t),
       c = uniform({37, 3}, -2.0, 2.0, d, 3, t);
  const auto ha = host_doubles<TestType>(a), hb = host_doubles<TestType>(b), hc = host_doubles<TestType>(c);
  std::vector<double> ref(ha.size());
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = ha[i] * hb[i] + hc[i];
  auto out = kten::fma(a, b, c);
  CHECK(out.device() == d);
  require_allclose<TestType>(out, ref);
  CHECK_THROWS_AS(kten::fma(a, b, ones({3}, d, t)), ShapeError);
}
