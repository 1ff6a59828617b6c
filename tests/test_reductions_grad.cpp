// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reductions over several axes, softmax and its kin, and matmul on batches and vectors, on the
// device under test: values against PyTorch 1.13 (computed in float64 and printed to 17 digits;
// the expression is beside each table) or a float64 host reference, edge cases, and every gradient
// against central differences in float64.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>

#include "support.hpp"

using namespace kten;
using test::check_gradients;
using V = std::vector<Tensor>;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor of element type T on the device under test, from float64 host values.
template <class T>
Tensor make(const std::vector<double>& values, const Shape& shape) {
  return tensor(values, shape, test::device()).astype(dtype_of<T>());
}

// The tensor has this shape, lives on the device under test, and holds these values: NaN where
// want is NaN, the same infinity where want is infinite, within T's tolerance elsewhere.
template <class T>
void require_values(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  REQUIRE(got.shape() == shape);
  REQUIRE(got.device() == test::device());
  REQUIRE(got.dtype() == dtype_of<T>());
  const auto values = test::host_doubles<T>(got);
  REQUIRE(values.size() == want.size());
  std::vector<double> finite_got, finite_want;
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": got " << values[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(values[i]));
    } else if (std::isinf(want[i])) {
      CHECK(values[i] == want[i]);
    } else {
      finite_got.push_back(values[i]);
      finite_want.push_back(want[i]);
    }
  }
  test::require_allclose(finite_got, finite_want, test::tolerance<T>(), test::tolerance<T>());
}

template <class T>
void require_same_bits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  CHECK(a.to_vector<T>() == b.to_vector<T>());
}

// x = round(3 sin(1.7 i + 0.3), 2), i = 0 .. 23, shape 2x3x4: 24 distinct values.
const std::vector<double> kX = {0.89, 2.73,  -1.59, -2.32, 2.19, 1.75,  -2.64, -1.07, 2.92,  0.32, -3.0,  0.45,
                                2.88, -1.19, -2.58, 1.86,  2.1,  -2.4,  -1.48, 2.78,  0.76, -2.98, 0.0,   2.97};
const Shape kXShape = {2, 3, 4};

using Reduction = Tensor (*)(const Tensor&, const std::vector<int>&, bool);
struct Expected {
  std::vector<int> axes;
  const char* name;
  Reduction op;
  Shape shape;  // without keepdim
  std::vector<double> values;
};

// torch.sum, torch.mean, torch.amax, torch.amin, torch.linalg.vector_norm(x, 2, axes) and
// torch.var(x, axes) of kX, float64.
const std::vector<Expected>& expected_reductions() {
  static const std::vector<Expected> table = {
      {{0, 2}, "sum", sum, {3}, {0.6800000000000004, 1.2299999999999998, 1.4400000000000002}},
      {{0, 2}, "mean", mean, {3}, {0.08500000000000005, 0.15374999999999997, 0.18000000000000002}},
      {{0, 2}, "max", max, {3}, {2.88, 2.78, 2.97}},
      {{0, 2}, "min", min, {3}, {-2.58, -2.64, -3.0}},
      {{0, 2}, "norm", norm, {3}, {5.99849981245311, 6.005156117870709, 6.009176316268312}},
      {{0, 2}, "var", var, {3}, {5.132028571428572, 5.124683928571429, 5.121571428571429}},
      {{1}, "sum", sum, {2, 4}, {6.0, 4.800000000000001, -7.23, -2.9399999999999995, 5.74, -6.57, -4.0600000000000005, 7.609999999999999}},
      {{1}, "mean", mean, {2, 4},
       {2.0, 1.6000000000000003, -2.41, -0.9799999999999999, 1.9133333333333333, -2.19, -1.3533333333333335, 2.5366666666666666}},
      {{1}, "max", max, {2, 4}, {2.92, 2.73, -1.59, 0.45, 2.88, -1.19, 0.0, 2.97}},
      {{1}, "min", min, {2, 4}, {0.89, 0.32, -3.0, -2.32, 0.76, -2.98, -2.58, 1.86}},
      {{1}, "norm", norm, {2, 4},
       {3.7569402444010205, 3.2584965858505974, 4.300895255641551, 2.5941858067609576, 3.6444478319767453,
        4.007056276120913, 2.974357073385776, 4.47313089457485}},
      {{1}, "var", var, {2, 4},
       {1.0572999999999997, 1.4689000000000003, 0.5366999999999998, 1.9242999999999997, 1.1497333333333337,
        0.8341000000000001, 1.676133333333334, 0.35243333333333343}},
      {{-2, -1}, "sum", sum, {2}, {0.6300000000000008, 2.719999999999999}},
      {{-2, -1}, "mean", mean, {2}, {0.05250000000000007, 0.22666666666666657}},
      {{-2, -1}, "max", max, {2}, {2.92, 2.97}},
      {{-2, -1}, "min", min, {2}, {-3.0, -2.98}},
      {{-2, -1}, "norm", norm, {2}, {7.06823174492744, 7.628512305816908}},
      {{-2, -1}, "var", var, {2}, {4.538802272727273, 5.234333333333333}},
      {{}, "sum", sum, {}, {3.3499999999999988}},
      {{}, "mean", mean, {}, {0.13958333333333328}},
      {{}, "max", max, {}, {2.97}},
      {{}, "min", min, {}, {-3.0}},
      {{}, "norm", norm, {}, {10.399716342285494}},
      {{}, "var", var, {}, {4.682021557971015}},
  };
  return table;
}

// `shape` with the reduced axes (all of them for none) kept as extent 1.
Shape keepdim_shape(Shape shape, const std::vector<int>& axes) {
  if (axes.empty()) return Shape(shape.size(), 1);
  const int n = static_cast<int>(shape.size());
  for (int a : axes) shape[a < 0 ? a + n : a] = 1;
  return shape;
}

}  // namespace

TEMPLATE_TEST_CASE("reductions over several axes match PyTorch, with and without keepdim", "[reductions-grad]", float, double) {
  const Tensor x = make<TestType>(kX, kXShape);
  // The same values laid out as a 4x3x2 tensor, seen through a permutation: a strided input.
  const Tensor strided = x.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
  REQUIRE_FALSE(strided.is_contiguous());
  for (const Expected& e : expected_reductions()) {
    CAPTURE(e.name, e.axes);
    require_values<TestType>(e.op(x, e.axes, false), e.shape, e.values);
    require_values<TestType>(e.op(x, e.axes, true), keepdim_shape(kXShape, e.axes), e.values);
    require_values<TestType>(e.op(strided, e.axes, false), e.shape, e.values);
    require_same_bits<TestType>(e.op(strided, e.axes, true), e.op(x, e.axes, true));
  }
  // The braced forms pick these overloads: {} is every axis, {1} keeps the axis with keepdim.
  require_same_bits<TestType>(sum(x, {}), sum(x));
  CHECK(mean(x, {}, true).shape() == Shape{1, 1, 1});
  CHECK(max(x, {1}, true).shape() == Shape{2, 1, 4});
  CHECK(norm(x, {0, 2}).shape() == Shape{3});
  // One axis in a list is the one-axis reduction; the one-axis forms and members are there for min and var too.
  require_same_bits<TestType>(sum(x, {1}), sum(x, 1));
  require_same_bits<TestType>(min(x, {-2}), x.min(1));
  require_same_bits<TestType>(var(x, {1}), x.var(-2));
  require_same_bits<TestType>(min(x), x.min());
  require_same_bits<TestType>(var(x), x.var());
}

TEMPLATE_TEST_CASE("reductions over several axes name each axis once and keep PyTorch's edge cases", "[reductions-grad]", float, double) {
  const Tensor x = make<TestType>(kX, kXShape);
  CHECK_THROWS_AS(sum(x, {0, -3}), ShapeError);  // one axis named twice
  CHECK_THROWS_AS(mean(x, {1, 1}), ShapeError);
  CHECK_THROWS_AS(var(x, {3}), ShapeError);
  CHECK_THROWS_AS(norm(x, {0, -4}), ShapeError);
  // A 0-d tensor takes axis 0 or -1, as PyTorch; its unbiased variance divides 0 by 0.
  const Tensor s = make<TestType>({3.0}, {});
  require_values<TestType>(sum(s, {0}), {}, {3.0});
  require_values<TestType>(max(s, {-1}, true), {}, {3.0});
  require_values<TestType>(s.min(0), {}, {3.0});
  require_values<TestType>(var(s), {}, {kNaN});
  CHECK_THROWS_AS(sum(s, {1}), ShapeError);
  // Empty: a sum of nothing is 0, a mean or variance NaN, a norm 0; max and min of nothing throw,
  // but a reduction whose result is empty is fine.
  const Tensor e = make<TestType>({}, {2, 0, 3});
  require_values<TestType>(sum(e, {1}), {2, 3}, std::vector<double>(6, 0.0));
  require_values<TestType>(mean(e, {0, 1}, true), {1, 1, 3}, std::vector<double>(3, kNaN));
  require_values<TestType>(var(e, {1}), {2, 3}, std::vector<double>(6, kNaN));
  require_values<TestType>(norm(e, {1}), {2, 3}, std::vector<double>(6, 0.0));
  CHECK_THROWS_AS(max(e, {1}), ShapeError);
  CHECK_THROWS_AS(min(e, {0, 1}), ShapeError);
  CHECK_THROWS_AS(min(e), ShapeError);
  CHECK(max(e, {0, 2}).shape() == Shape{0});
  CHECK(min(e, {2}, true).shape() == Shape{2, 0, 1});
  // One element per result: the unbiased variance is NaN (0 / 0), as torch.var.
  require_values<TestType>(var(make<TestType>({1, 2, 3}, {3, 1}), {1}), {3}, {kNaN, kNaN, kNaN});
  // NaN propagates into every result that folds it, infinities as arithmetic says.
  const Tensor special = make<TestType>({1, kNaN, 3, 4, -kInf, 6, kInf, 8}, {2, 2, 2});
  // (torch.amax, amin, sum, var, linalg.vector_norm and amin of it, float64.)
  require_values<TestType>(max(special, {0, 2}), {2}, {kNaN, kInf});
  require_values<TestType>(min(special, {0, 2}), {2}, {kNaN, 3});
  require_values<TestType>(sum(special, {1, 2}), {2}, {kNaN, kNaN});
  require_values<TestType>(var(special, {0, 1}), {2}, {kNaN, kNaN});
  require_values<TestType>(norm(special, {0}), {2, 2}, {kInf, kNaN, kInf, 8.94427190999916});
  require_values<TestType>(min(special, {1}), {2, 2}, {1, kNaN, -kInf, 6});
}

TEMPLATE_TEST_CASE("softmax, log_softmax and logsumexp match PyTorch and stay finite for large inputs", "[reductions-grad]", float,
                   double) {
  // torch.softmax(S, 1), torch.log_softmax(S, 1), torch.logsumexp(S, 1): exp(1000) overflows,
  // exp(x - max) does not.
  const Tensor S = make<TestType>({1000, 1001, 999, 1000.5, -3, 0.5, 2, -1, 0.1, 0.2, -0.3, 0.4}, {3, 4});
  const std::vector<double> softmax_s = {
      0.17437148764032928,  0.47399084625407806, 0.06414768542935739, 0.2874899806762354,
      0.005265439571540645, 0.17436741117275167, 0.7814605208760645,  0.0389066283796432,
      0.24240368825526148,  0.26789750669399043, 0.16248805147047565, 0.32721075358027246};
  const std::vector<double> log_softmax_s = {
      -1.746567269173791,  -0.7465672691737911, -2.746567269173791,  -1.246567269173791,
      -5.246590647509799,  -1.7465906475097992, -0.24659064750979923, -3.2465906475097994,
      -1.4171508093282223, -1.3171508093282223, -1.8171508093282223, -1.1171508093282223};
  const std::vector<double> logsumexp_s = {1001.7465672691737, 2.2465906475097994, 1.5171508093282222};
  for (int axis : {1, -1}) {
    require_values<TestType>(softmax(S, axis), {3, 4}, softmax_s);
    require_values<TestType>(log_softmax(S, axis), {3, 4}, log_softmax_s);
    require_values<TestType>(logsumexp(S, axis), {3}, logsumexp_s);
    require_values<TestType>(logsumexp(S, axis, true), {3, 1}, logsumexp_s);
  }
  // Along axis 0 of the transposed view: the same numbers, strided.
  const Tensor St = S.transpose();
  require_values<TestType>(softmax(St, 0).transpose().contiguous(), {3, 4}, softmax_s);
  require_values<TestType>(log_softmax(St, 0).transpose().contiguous(), {3, 4}, log_softmax_s);
  require_values<TestType>(logsumexp(St, 0), {3}, logsumexp_s);

  // The middle axis of a 3-D tensor: torch.softmax(x, 1), torch.log_softmax(x, 1), torch.logsumexp(x, 1).
  const Tensor x = make<TestType>(kX, kXShape);
  require_values<TestType>(
      softmax(x, 1), kXShape,
      {0.08141079683429385, 0.6825349706950818,  0.6273206817970692,  0.048902201885270835, 0.29872036553230163,
       0.25616294985607896, 0.21952318735894172, 0.17068545595463225, 0.6198688376334045,   0.061302079448839183,
       0.1531561308439891,  0.7804123421600968,  0.633537857166242,   0.6825205035925423,   0.05813512680934609,
       0.15281993776748445, 0.2904175621144355,  0.20352575732641282, 0.17464757275845494,  0.38346960123061163,
       0.07604458071932269, 0.11395373908104493, 0.7672173004321989,  0.46371046100190394});
  require_values<TestType>(
      log_softmax(x, -2), kXShape,
      {-2.50824737552751,   -0.3819415141220277, -0.46629741487554666, -3.0179328551864084, -1.20824737552751,
       -1.3619415141220277, -1.5162974148755466, -1.7679328551864084,  -0.47824737552751007, -2.791941514122028,
       -1.8762974148755465, -0.2479328551864085, -0.45643552225939854, -0.38196271048043595, -2.8449852055730513,
       -1.8784949279903582, -1.2364355222593983, -1.591962710480436,   -1.744985205573051,   -0.9584949279903586,
       -2.5764355222593984, -2.171962710480436,  -0.2649852055730511,  -0.7684949279903582});
  require_values<TestType>(logsumexp(x, 1), {2, 4},
                           {3.39824737552751, 3.1119415141220275, -1.1237025851244535, 0.6979328551864086,
                            3.336435522259398, -0.808037289519564, 0.2649852055730511, 3.7384949279903585});
}

TEMPLATE_TEST_CASE("softmax, log_softmax and logsumexp give PyTorch's infinities, NaNs and empties", "[reductions-grad]", float,
                   double) {
  // Rows: only -inf; -inf and 0; +inf and 1; +inf and -inf; NaN and 1.
  const Tensor x = make<TestType>({-kInf, -kInf, -kInf, 0, kInf, 1, kInf, -kInf, kNaN, 1}, {5, 2});
  require_values<TestType>(logsumexp(x, 1), {5}, {-kInf, 0, kInf, kInf, kNaN});
  require_values<TestType>(softmax(x, 1), {5, 2}, {kNaN, kNaN, 0, 1, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN});
  require_values<TestType>(log_softmax(x, 1), {5, 2}, {kNaN, kNaN, -kInf, 0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN});
  // An empty axis: logsumexp is log(0) = -inf; softmax of nothing is nothing.
  const Tensor e = make<TestType>({}, {3, 0});
  require_values<TestType>(logsumexp(e, 1), {3}, {-kInf, -kInf, -kInf});
  require_values<TestType>(logsumexp(e, 0, true), {1, 0}, {});
  CHECK(softmax(e, 1).shape() == Shape{3, 0});
  CHECK(log_softmax(e, 0).shape() == Shape{3, 0});
  // A 0-d tensor is its own axis: softmax 1, log_softmax 0, logsumexp itself.
  const Tensor s = make<TestType>({2.5}, {});
  require_values<TestType>(softmax(s, 0), {}, {1});
  require_values<TestType>(log_softmax(s, -1), {}, {0});
  require_values<TestType>(logsumexp(s, 0, true), {}, {2.5});
  CHECK_THROWS_AS(softmax(x, 2), ShapeError);
  CHECK_THROWS_AS(logsumexp(x, -3), ShapeError);
  CHECK_THROWS_AS(log_softmax(Tensor(), 0), Error);
}

namespace {

// torch.matmul on float64 host values: vectors promoted (a row on the left, a column on the
// right) and dropped from the result, batch axes broadcast.
std::vector<double> matmul_reference(const std::vector<double>& a, Shape sa, const std::vector<double>& b, Shape sb,
                                     Shape& out_shape) {
  const bool row = sa.size() == 1, column = sb.size() == 1;
  if (row) sa.insert(sa.begin(), 1);
  if (column) sb.push_back(1);
  const std::size_t rank = std::max(sa.size(), sb.size());
  while (sa.size() < rank) sa.insert(sa.begin(), 1);
  while (sb.size() < rank) sb.insert(sb.begin(), 1);
  const std::int64_t m = sa[rank - 2], k = sa[rank - 1], n = sb[rank - 1];
  Shape batch(rank - 2);
  std::int64_t batches = 1;
  for (std::size_t d = 0; d + 2 < rank; ++d) batches *= (batch[d] = sa[d] == 1 ? sb[d] : sa[d]);
  std::vector<double> out;
  for (std::int64_t i = 0; i < batches; ++i) {
    std::int64_t ia = 0, ib = 0, rest = i, step_a = m * k, step_b = k * n;
    for (int d = static_cast<int>(rank) - 3; d >= 0; --d) {
      const std::int64_t c = rest % batch[d];
      rest /= batch[d];
      ia += (sa[d] == 1 ? 0 : c) * step_a;
      ib += (sb[d] == 1 ? 0 : c) * step_b;
      step_a *= sa[d];
      step_b *= sb[d];
    }
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (std::int64_t p = 0; p < k; ++p) acc += a[ia + r * k + p] * b[ib + p * n + c];
        out.push_back(acc);
      }
  }
  out_shape = batch;
  if (!row) out_shape.push_back(m);
  if (!column) out_shape.push_back(n);
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("matmul follows torch.matmul: vectors, batches and broadcast batch axes", "[reductions-grad]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},          {{4}, {4, 3}},       {{5, 4}, {4}},          {{2, 5, 4}, {4}},    {{4}, {2, 4, 3}},
      {{2, 5, 4}, {4, 3}}, {{5, 4}, {2, 4, 3}}, {{2, 1, 5, 4}, {3, 4, 6}}, {{3, 2, 4}, {3, 4, 2}}, {{1, 2, 3}, {4, 3, 1}},
      {{0, 2, 3}, {3, 4}}, {{2, 3, 0}, {0, 4}}, {{0}, {0}},             {{2, 0, 3}, {2, 3, 5}}};
  std::uint64_t seed = 30;
  for (const auto& [sa, sb] : cases) {
    CAPTURE(shape_str(sa), shape_str(sb));
    const Tensor a = uniform(sa, -1.0, 1.0, d, seed++, t), b = uniform(sb, -1.0, 1.0, d, seed++, t);
    Shape out_shape;
    const auto ref = matmul_reference(test::host_doubles<TestType>(a), sa, test::host_doubles<TestType>(b), sb, out_shape);
    const Tensor c = matmul(a, b);
    CHECK(c.shape() == out_shape);
    CHECK(c.device() == d);
    test::require_allclose<TestType>(c, ref, 1e-4 * (sizeof(TestType) == 4), sizeof(TestType) == 4 ? 1e-5 : 1e-13);
  }
  // Strided batches: transposed matrices and a permuted batch axis are read in place; matrices
  // neither row- nor column-major (strides 8 and 2) are gathered once for the whole batch.
  const Tensor A = uniform({3, 4, 5}, -1.0, 1.0, d, 60, t), B = uniform({5, 3, 4}, -1.0, 1.0, d, 61, t);
  const Tensor At = A.transpose(1, 2), Bp = B.permute({1, 0, 2}), odd = uniform({3, 5, 4, 2}, -1.0, 1.0, d, 62, t).select(3, 1);
  reset_stats();
  const Tensor transposed = matmul(At, A), permuted = matmul(Bp, A);
  CHECK(stats().contiguous_copies == 0);
  const Tensor gathered = matmul(odd, A);
  CHECK(stats().contiguous_copies == 1);
  test::require_allclose<TestType>(transposed, test::host_doubles<TestType>(matmul(At.contiguous(), A)));
  test::require_allclose<TestType>(permuted, test::host_doubles<TestType>(matmul(Bp.contiguous(), A)));
  require_same_bits<TestType>(gathered, matmul(odd.contiguous(), A));

  // torch.matmul(A, B) of A (2x1x2x3) and B (3x3x2), float64.
  const Tensor pa = make<TestType>({1.0, 0.62, -0.23, -0.9, -0.9, -0.21, 0.63, 1.0, 0.61, -0.24, -0.91, -0.89}, {2, 1, 2, 3});
  const Tensor pb = make<TestType>(
      {0.84, 0.99, 0.68, 0.04, -0.61, -0.98, -0.88, -0.37, 0.31, 0.85, 0.99, 0.66, 0.02, -0.63, -0.98, -0.88, -0.36, 0.33},
      {3, 3, 2});
  require_values<TestType>(matmul(pa, pb), {2, 3, 2, 2},
                           {1.4019000000000001, 1.2402, -1.2399, -0.7212000000000001, -0.9155, 0.00520000000000001,
                            0.30510000000000004, -0.5706, -0.5048, -1.2515, 0.9396, 1.2897, 0.8371000000000001,
                            0.06590000000000007, -0.27749999999999997, 0.5982000000000001, 0.3595, 1.0195, -0.952,
                            -1.2721, -1.187, -1.0756, 1.2074, 0.6583000000000001});

  CHECK_THROWS_AS(matmul(ones({}, d, t), ones({3}, d, t)), ShapeError);       // 0-d
  CHECK_THROWS_AS(matmul(ones({3}, d, t), ones({4}, d, t)), ShapeError);      // k differs
  CHECK_THROWS_AS(matmul(ones({2, 3}, d, t), ones({2, 4, 5}, d, t)), ShapeError);
  CHECK_THROWS_AS(matmul(ones({2, 2, 3}, d, t), ones({3, 3, 4}, d, t)), ShapeError);  // batches 2 and 3
}

TEST_CASE("gradients of reductions over several axes match finite differences", "[reductions-grad][grad]") {
  const Tensor x = tensor(kX, kXShape);  // check_gradients puts it on the device
  for (const Expected& e : expected_reductions()) {
    CAPTURE(e.axes);
    check_gradients(e.name, [&](const V& in) { return e.op(in[0], e.axes, false); }, {x});
    // With keepdim, through a strided view of the input.
    check_gradients(e.name, [&](const V& in) { return e.op(in[0].transpose(0, 2), e.axes, true); }, {x});
  }
  check_gradients("min(axis)", [](const V& in) { return min(in[0], 2); }, {x});
  check_gradients("var(axis)", [](const V& in) { return var(in[0], -1); }, {x});
  check_gradients("var", [](const V& in) { return var(in[0]); }, {x});
}

TEST_CASE("max and min share their gradient evenly among ties; var's is NaN for one element", "[reductions-grad][grad]") {
  const Device d = test::device();
  // torch.amin([1, 1, 0]) sends the gradient to the 0; torch.amax([[1, 1], [0, 3]], [0, 1]) to the 3;
  // ties share: amax([[2, 2], [2, 1]], [0, 1]) gives each 2 a third.
  Tensor a = tensor({1.0, 1.0, 0.0}, d).requires_grad_();
  min(a, {0}).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0, 1});
  Tensor b = tensor(std::vector<double>{2.0, 2.0, 2.0, 1.0}, {2, 2}, d).requires_grad_();
  max(b, {0, 1}, true).backward(full({1, 1}, 3.0, d, float64));
  // Element by element: GCC 12.2 at -O3 with AVX-512 (-mavx512f) can miscompile the literal
  // std::vector<double>{1, 1, 1, 0}, its SLP vectoriser storing 1 for the trailing 0.
  const std::vector<double> gb = b.grad().to_vector<double>();
  REQUIRE(gb.size() == 4);
  CHECK((gb[0] == 1 && gb[1] == 1 && gb[2] == 1 && gb[3] == 0));
  Tensor c = tensor(std::vector<double>{5.0, -1.0, 5.0, -1.0}, {2, 2}, d).requires_grad_();
  min(c, {1}).backward(tensor({2.0, 4.0}, d));
  CHECK(c.grad().to_vector<double>() == std::vector<double>{0, 2, 0, 4});
  Tensor one = tensor({2.0}, d).requires_grad_();
  var(one, {0}).backward();
  CHECK(std::isnan(one.grad().to_vector<double>()[0]));
}

TEST_CASE("gradients of softmax, log_softmax and logsumexp match finite differences", "[reductions-grad][grad]") {
  const Tensor x = tensor(kX, kXShape);  // check_gradients puts it on the device
  for (int axis : {0, 1, -1}) {
    CAPTURE(axis);
    check_gradients("softmax", [&](const V& in) { return softmax(in[0], axis); }, {x});
    check_gradients("log_softmax", [&](const V& in) { return log_softmax(in[0], axis); }, {x});
    check_gradients("logsumexp", [&](const V& in) { return logsumexp(in[0], axis); }, {x});
    check_gradients("logsumexp (strided, keepdim)", [&](const V& in) { return logsumexp(in[0].permute({1, 2, 0}), axis, true); },
                    {x});
  }
  // Large values: the gradients come from the shifted exponentials too.
  const Tensor big = tensor(std::vector<double>{1000.0, 1001.0, 999.0, 1000.5, -3.0, 0.5}, {2, 3}, test::device());
  check_gradients("softmax (large)", [](const V& in) { return softmax(in[0], 1); }, {big});
  check_gradients("log_softmax (large)", [](const V& in) { return log_softmax(in[0], 1); }, {big});
  check_gradients("logsumexp (large)", [](const V& in) { return logsumexp(in[0], 1); }, {big});
  // log_softmax at -inf: g - exp(y) sum(g), as PyTorch ([1, -1] for g = [1, 2]).
  Tensor m = tensor({-kInf, 0.0}, test::device()).requires_grad_();
  log_softmax(m, 0).backward(tensor({1.0, 2.0}, test::device()));
  CHECK(m.grad().to_vector<double>() == std::vector<double>{1, -1});
}

TEST_CASE("gradients of matmul on vectors and broadcast batches match finite differences", "[reductions-grad][grad]") {
  const Device d = test::device();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},          {{4}, {4, 3}},       {{5, 4}, {4}},       {{2, 5, 4}, {4}},          {{4}, {2, 4, 3}},
      {{2, 5, 4}, {4, 3}}, {{5, 4}, {2, 4, 3}}, {{3, 4}, {4, 2}},    {{2, 1, 3, 4}, {3, 4, 2}}, {{3, 2, 4}, {1, 4, 2}}};
  std::uint64_t seed = 70;
  for (const auto& [sa, sb] : cases) {
    CAPTURE(shape_str(sa), shape_str(sb));
    const Tensor a = uniform(sa, -1.0, 1.0, d, seed++, float64), b = uniform(sb, -1.0, 1.0, d, seed++, float64);
    check_gradients("matmul", [](const V& in) { return matmul(in[0], in[1]); }, {a, b});
  }
  // Strided batches: a transposed and a broadcast (expanded) operand.
  const Tensor a = uniform({2, 4, 3}, -1.0, 1.0, d, 90, float64), b = uniform({4, 2}, -1.0, 1.0, d, 91, float64);
  check_gradients("matmul (strided batches)", [](const V& in) { return matmul(in[0].transpose(1, 2), in[1].expand({2, 4, 2})); },
                  {a, b});
}

TEST_CASE("broadcast gradients fold back with one multi-axis sum", "[reductions-grad][grad]") {
  // sum_to: leading axes added by broadcasting and axes stretched from 1, together.
  const Device d = test::device();
  const Tensor a = uniform({2, 1, 4, 1}, -1.0, 1.0, d, 80, float64), b = uniform({3, 1, 5}, -1.0, 1.0, d, 81, float64);
  check_gradients("a * b + b", [](const V& in) { return in[0] * in[1] + in[1]; }, {a, b});
  check_gradients("expand", [](const V& in) { return in[0].expand({3, 2, 2, 4, 5}); }, {a});
}
