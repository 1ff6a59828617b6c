// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Differentiable elementwise ops (pow, maximum, minimum, clamp, sin, cos, log1p, expm1, erf,
// softplus, gelu, silu): values and gradients against numbers printed by PyTorch 1.13 (float64)
// at the edges (0, +-inf, NaN, ties, masks), and gradients against central finite differences in
// float64 on random inputs, broadcast and transposed ones included.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch_template_test_macros.hpp>

#include "support.hpp"

using namespace kten;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

using Inputs = std::vector<Tensor>;
using Op = std::function<Tensor(const Inputs&)>;
using UnaryOp = std::function<Tensor(const Tensor&)>;

/// A 1-D tensor of dtype T on the device under test.
template <class T>
Tensor on_device(const std::vector<double>& values) {
  return tensor(std::vector<T>(values.begin(), values.end()), test::device());
}

/// t against PyTorch's values: NaN where PyTorch has NaN, the same infinities, the rest within
/// the dtype's tolerance.
template <class T>
void require_torch_values(const Tensor& t, std::vector<double> want) {
  std::vector<double> got = test::host_doubles<T>(t);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(want[i])) continue;
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
    got[i] = want[i] = 0;
  }
  test::require_allclose(got, want, test::tolerance<T>(), test::tolerance<T>());
}

/// op's output and each input's gradient for 1-D inputs of dtype T, with incoming gradient g
/// (ones when empty), both against PyTorch's.
template <class T>
void require_torch_results(const Op& op, const std::vector<std::vector<double>>& inputs, const std::vector<double>& value,
                           const std::vector<std::vector<double>>& grads, const std::vector<double>& g = {}) {
  Inputs xs;
  for (const auto& x : inputs) xs.push_back(on_device<T>(x).requires_grad_());
  const Tensor out = op(xs);
  require_torch_values<T>(out, value);
  out.backward(g.empty() ? ones(out.shape(), out.device(), out.dtype()) : on_device<T>(g));
  for (std::size_t k = 0; k < xs.size(); ++k) {
    INFO("the gradient of input " << k);
    require_torch_values<T>(xs[k].grad(), grads[k]);
  }
}

/// The gradient of sum(op(inputs) * w), w fixed random weights, against central differences
/// (h = 1e-6) in float64, for every input (a view too: its gradient has the view's shape).
void check_gradients(const Op& op, Inputs inputs) {
  const Device d = test::device();
  for (Tensor& x : inputs) x.requires_grad_();
  const Tensor out = op(inputs);
  const Tensor w = randn(out.shape(), d, 99, float64);
  sum(out * w).backward();

  NoGradGuard no_grad;
  Inputs plain;
  for (const Tensor& x : inputs) plain.push_back(x.detach());
  const auto loss = [&] { return sum(op(plain) * w).item<double>(); };
  const double h = 1e-6;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k << " of shape " << shape_str(inputs[k].shape()));
    REQUIRE(inputs[k].grad().defined());
    REQUIRE(inputs[k].grad().shape() == inputs[k].shape());
    std::vector<double> values = test::host_doubles<double>(inputs[k]), numeric(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double keep = values[i];
      values[i] = keep + h;
      plain[k] = tensor(values, inputs[k].shape(), d);
      const double up = loss();
      values[i] = keep - h;
      plain[k] = tensor(values, inputs[k].shape(), d);
      numeric[i] = (up - loss()) / (2 * h);
      values[i] = keep;
    }
    plain[k] = inputs[k].detach();
    test::require_allclose(test::host_doubles<double>(inputs[k].grad()), numeric, 1e-6, 1e-8);
  }
}

/// check_gradients of a unary op on inputs in [lo, hi): contiguous, transposed, and broadcast (a
/// 1x3 input expanded to 2x3, so its gradient sums over the copies).
void check_unary_gradients(const UnaryOp& f, double lo, double hi) {
  const Device d = test::device();
  const Op plain = [&](const Inputs& x) { return f(x[0]); };
  check_gradients(plain, {uniform({2, 3}, lo, hi, d, 1, float64)});
  check_gradients(plain, {uniform({3, 2}, lo, hi, d, 2, float64).transpose()});
  check_gradients([&](const Inputs& x) { return f(x[0].expand({2, 3})); }, {uniform({1, 3}, lo, hi, d, 3, float64)});
}

/// check_gradients of a binary op on a in [lo, hi) and b in [lo_b, hi_b): equal shapes, b
/// broadcast along rows, a transposed with b broadcast along columns.
void check_binary_gradients(const std::function<Tensor(const Tensor&, const Tensor&)>& f, double lo, double hi,
                            double lo_b, double hi_b) {
  const Device d = test::device();
  const Op op = [&](const Inputs& x) { return f(x[0], x[1]); };
  check_gradients(op, {uniform({2, 3}, lo, hi, d, 4, float64), uniform({2, 3}, lo_b, hi_b, d, 5, float64)});
  check_gradients(op, {uniform({2, 3}, lo, hi, d, 6, float64), uniform({3}, lo_b, hi_b, d, 7, float64)});
  check_gradients(op, {uniform({3, 2}, lo, hi, d, 8, float64).transpose(), uniform({2, 1}, lo_b, hi_b, d, 9, float64)});
}

/// A unary op with its values and gradients (incoming 1) at kUnaryInputs, printed by PyTorch 1.13:
/// torch.sin, ..., F.softplus, F.softplus(beta=2, threshold=5), F.gelu, F.silu.
struct UnaryCase {
  std::string name;
  UnaryOp op;
  std::vector<double> value, grad;
};
const std::vector<double> kUnaryInputs{-inf, -30.0, -1.0, -0.0, 0.0, 0.5, 1.0, 25.0, inf, NaN};
const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases{
      {"sin", [](const Tensor& x) { return sin(x); },
       {NaN, 0.9880316240928618, -0.8414709848078965, -0.0, 0.0, 0.479425538604203, 0.8414709848078965, -0.13235175009777303, NaN, NaN},
       {NaN, 0.15425144988758405, 0.5403023058681398, 1.0, 1.0, 0.8775825618903728, 0.5403023058681398, 0.9912028118634736, NaN, NaN}},
      {"cos", [](const Tensor& x) { return cos(x); },
       {NaN, 0.15425144988758405, 0.5403023058681398, 1.0, 1.0, 0.8775825618903728, 0.5403023058681398, 0.9912028118634736, NaN, NaN},
       {NaN, -0.9880316240928618, 0.8414709848078965, 0.0, -0.0, -0.479425538604203, -0.8414709848078965, 0.13235175009777303, NaN, NaN}},
      {"log1p", [](const Tensor& x) { return log1p(x); },
       {NaN, NaN, -inf, -0.0, 0.0, 0.4054651081081644, 0.6931471805599453, 3.258096538021482, inf, NaN},
       {-0.0, -0.034482758620689655, inf, 1.0, 1.0, 0.6666666666666666, 0.5, 0.038461538461538464, 0.0, NaN}},
      {"expm1", [](const Tensor& x) { return expm1(x); },
       {-1.0, -0.9999999999999064, -0.6321205588285577, -0.0, 0.0, 0.6487212707001282, 1.7182818284590453, 72004899336.38588, inf, NaN},
       {0.0, 9.35918009759007e-14, 0.36787944117144233, 1.0, 1.0, 1.6487212707001282, 2.7182818284590455, 72004899337.38588, inf, NaN}},
      {"erf", [](const Tensor& x) { return erf(x); },
       {-1.0, -1.0, -0.8427007929497149, -0.0, 0.0, 0.5204998778130465, 0.8427007929497149, 1.0, 1.0, NaN},
       {0.0, 0.0, 0.4151074974205947, 1.1283791670955126, 1.1283791670955126, 0.8787825789354448, 0.4151074974205947, 4.1534010636398965e-272, 0.0, NaN}},
      {"softplus", [](const Tensor& x) { return softplus(x); },
       {0.0, 9.357622968839737e-14, 0.31326168751822286, 0.6931471805599453, 0.6931471805599453, 0.9740769841801067, 1.3132616875182228, 25.0, inf, NaN},
       {0.0, 9.3576229688393e-14, 0.2689414213699951, 0.5, 0.5, 0.6224593312018546, 0.7310585786300049, 1.0, 1.0, NaN}},
      {"softplus(beta 2, threshold 5)", [](const Tensor& x) { return softplus(x, 2, 5); },
       {0.0, 4.37825538134826e-27, 0.06346400552148625, 0.34657359027997264, 0.34657359027997264, 0.6566308437591114, 1.0634640055214863, 25.0, inf, NaN},
       {0.0, 8.75651076269652e-27, 0.11920292202211755, 0.5, 0.5, 0.7310585786300049, 0.8807970779778824, 1.0, 1.0, NaN}},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       {NaN, -0.0, -0.15865525393145702, -0.0, 0.0, 0.34573123063700656, 0.841344746068543, 25.0, inf, NaN},
       {NaN, -4.420938404635643e-195, -0.08331547058768635, 0.5, 0.5, 0.8674951246561629, 1.0833154705876864, 1.0, NaN, NaN}},
      {"silu", [](const Tensor& x) { return silu(x); },
       {NaN, -2.8072868906517896e-12, -0.2689414213699951, -0.0, 0.0, 0.3112296656009273, 0.7310585786300049, 24.9999999996528, inf, NaN},
       {NaN, -2.713710660963134e-12, 0.07232948812851325, 0.5, 0.5, 0.7399611873026519, 0.9276705118714869, 1.000000000333312, NaN, NaN}},
  };
  return cases;
}

}  // namespace

TEMPLATE_TEST_CASE("sin cos log1p expm1 erf softplus gelu silu match PyTorch at 0, +-inf and NaN", "[ops-grad]", float, double) {
  for (const UnaryCase& c : unary_cases()) {
    INFO(c.name);
    require_torch_results<TestType>([&](const Inputs& x) { return c.op(x[0]); }, {kUnaryInputs}, c.value, {c.grad});
    const Tensor empty_out = c.op(empty({0, 3}, test::device(), dtype_of<TestType>()));
    CHECK(empty_out.shape() == Shape{0, 3});
  }
}

TEMPLATE_TEST_CASE("pow(x, e) matches PyTorch, sqrt and reciprocal exponents included", "[ops-grad]", float, double) {
  // torch.pow(x, e) and its gradient: 0.5 and -0.5 are computed as sqrt and 1/sqrt (so -0 gives -0
  // and -inf NaN), x^0 is 1 everywhere with gradient 0, x^1 is x.
  const std::vector<double> x{-0.0, 0.0, -inf, inf, NaN, -2.0, 4.0, 1.0};
  const std::vector<std::tuple<double, std::vector<double>, std::vector<double>>> cases{
      {0.5, {-0.0, 0.0, NaN, inf, NaN, NaN, 2.0, 1.0}, {-inf, inf, NaN, 0.0, NaN, NaN, 0.25, 0.5}},
      {-0.5, {-inf, inf, NaN, 0.0, NaN, NaN, 0.5, 1.0}, {-inf, -inf, -0.0, -0.0, NaN, NaN, -0.0625, -0.5}},
      {2.0, {0.0, 0.0, inf, inf, NaN, 4.0, 16.0, 1.0}, {-0.0, 0.0, -inf, inf, NaN, -4.0, 8.0, 2.0}},
      {3.0, {-0.0, 0.0, -inf, inf, NaN, -8.0, 64.0, 1.0}, {0.0, 0.0, inf, inf, NaN, 12.0, 48.0, 3.0}},
      {-1.0, {-inf, inf, -0.0, 0.0, NaN, -0.5, 0.25, 1.0}, {-inf, -inf, -0.0, -0.0, NaN, -0.25, -0.0625, -1.0}},
      {-2.0, {inf, inf, 0.0, 0.0, NaN, 0.25, 0.0625, 1.0}, {inf, -inf, 0.0, -0.0, NaN, 0.25, -0.03125, -2.0}},
      {0.0, {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
      {1.0, {-0.0, 0.0, -inf, inf, NaN, -2.0, 4.0, 1.0}, {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}},
      {2.5, {0.0, 0.0, inf, inf, NaN, NaN, 32.0, 1.0}, {0.0, 0.0, inf, inf, NaN, NaN, 20.0, 2.5}},
      {1.5, {0.0, 0.0, inf, inf, NaN, NaN, 8.0, 1.0}, {-0.0, 0.0, NaN, inf, NaN, NaN, 3.0, 1.5}},
  };
  for (const auto& [e, value, grad] : cases) {
    INFO("exponent " << e);
    require_torch_results<TestType>([e = e](const Inputs& t) { return pow(t[0], e); }, {x}, value, {grad});
  }
  // PyTorch's gradient of x^0 is zeros, whatever the incoming gradient.
  require_torch_results<TestType>([](const Inputs& t) { return t[0].pow(0.0); }, {{1.0, 2.0}}, {1.0, 1.0}, {{0.0, 0.0}},
                                  {NaN, inf});
}

TEMPLATE_TEST_CASE("pow(a, b) matches PyTorch, with its masks at a == 0 and b == 0", "[ops-grad]", float, double) {
  // d/da is 0 where b == 0; d/db = a^b log(a) is 0 where a == 0 and b >= 0.
  require_torch_results<TestType>(
      [](const Inputs& t) { return pow(t[0], t[1]); },
      {{0.0, 0.0, 0.0, 2.0, -2.0, NaN, 1.0, 2.0, -8.0, inf}, {2.5, 0.0, -1.0, 0.0, 2.0, 1.0, NaN, 0.5, 1.0 / 3, -1.0}},
      {0.0, 1.0, inf, 1.0, 4.0, NaN, 1.0, 1.4142135623730951, NaN, 0.0},
      {{0.0, 0.0, -inf, 0.0, -4.0, 1.0, NaN, 0.35355339059327373, NaN, -0.0},
       {0.0, 0.0, -inf, 0.6931471805599453, NaN, NaN, 0.0, 0.9802581434685472, NaN, NaN}});
  // The mask on d/da holds against a NaN incoming gradient (torch.where), d/db multiplies it.
  require_torch_results<TestType>([](const Inputs& t) { return t[0].pow(t[1]); }, {{0.0, 2.0, 0.0}, {0.0, 0.0, 2.5}},
                                  {1.0, 1.0, 0.0}, {{0.0, 0.0, NaN}, {NaN, NaN, NaN}}, {NaN, NaN, NaN});
}

TEMPLATE_TEST_CASE("maximum and minimum propagate NaN and split the gradient at ties", "[ops-grad]", float, double) {
  const std::vector<std::vector<double>> ab{{1.0, 2.0, 3.0, NaN, 1.0, -0.0, inf, -inf}, {1.0, 1.0, 4.0, 1.0, NaN, 0.0, inf, -inf}};
  require_torch_results<TestType>([](const Inputs& t) { return maximum(t[0], t[1]); }, ab,
                                  {1.0, 2.0, 4.0, NaN, NaN, 0.0, inf, -inf},
                                  {{0.5, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5}, {0.5, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5}});
  require_torch_results<TestType>([](const Inputs& t) { return minimum(t[0], t[1]); }, ab,
                                  {1.0, 1.0, 3.0, NaN, NaN, 0.0, inf, -inf},
                                  {{0.5, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5}, {0.5, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5}});
  // The input that is not the result gets 0 even from a NaN or infinite incoming gradient.
  const std::vector<std::vector<double>> small{{1.0, 2.0, 3.0}, {1.0, 1.0, 4.0}};
  require_torch_results<TestType>([](const Inputs& t) { return t[0].maximum(t[1]); }, small, {1.0, 2.0, 4.0},
                                  {{NaN, inf, 0.0}, {NaN, 0.0, NaN}}, {NaN, inf, NaN});
  require_torch_results<TestType>([](const Inputs& t) { return t[0].minimum(t[1]); }, small, {1.0, 1.0, 3.0},
                                  {{NaN, 0.0, NaN}, {NaN, inf, 0.0}}, {NaN, inf, NaN});
}

TEMPLATE_TEST_CASE("clamp passes the gradient between its bounds, bounds included", "[ops-grad]", float, double) {
  const std::vector<double> x{-2.0, -1.0, 0.0, 2.0, 3.0, NaN, -inf, inf};
  const auto clamp_by = [](double lo, double hi) { return [lo, hi](const Inputs& t) { return clamp(t[0], lo, hi); }; };
  require_torch_results<TestType>(clamp_by(-1, 2), {x}, {-1.0, -1.0, 0.0, 2.0, 2.0, NaN, -1.0, 2.0},
                                  {{0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0}});
  require_torch_results<TestType>(clamp_by(-1, 2), {x}, {-1.0, -1.0, 0.0, 2.0, 2.0, NaN, -1.0, 2.0},
                                  {{0.0, NaN, NaN, NaN, 0.0, 0.0, 0.0, 0.0}}, std::vector<double>(8, NaN));
  // lo > hi gives hi everywhere (min(max(x, lo), hi)); a NaN bound gives NaN everywhere.
  const std::vector<double> zeros(8, 0.0), nans(8, NaN);
  require_torch_results<TestType>(clamp_by(2, -1), {x}, {-1.0, -1.0, -1.0, -1.0, -1.0, NaN, -1.0, -1.0}, {zeros});
  require_torch_results<TestType>(clamp_by(NaN, 1), {x}, nans, {zeros});
  require_torch_results<TestType>([](const Inputs& t) { return t[0].clamp(0, NaN); }, {x}, nans, {zeros});
}

TEST_CASE("softplus compares beta x with its threshold in the tensor's dtype, as PyTorch", "[ops-grad]") {
  // At beta x == threshold the log1p form still applies (the test is >).
  require_torch_results<double>([](const Inputs& t) { return softplus(t[0], 2, 5); }, {{2.5, 2.5000001}},
                                {2.503357674244559, 2.5000001}, {{0.9933071490757152, 1.0}});
  // Below a large threshold e^(beta x) overflows float32 but not float64.
  const Op large = [](const Inputs& t) { return softplus(t[0], 1, 1000); };
  require_torch_results<float>(large, {{100.0, 800.0}}, {inf, inf}, {{NaN, NaN}});
  require_torch_results<double>(large, {{100.0, 800.0}}, {100.0, inf}, {{1.0, NaN}});
}

TEST_CASE("the ops' gradients match finite differences in float64", "[ops-grad]") {
  for (const double e : {2.5, -1.7, 0.5, -0.5, 2.0, 3.0, -1.0, -2.0, 1.0, 0.0}) {
    INFO("pow(x, " << e << ")");
    check_unary_gradients([e](const Tensor& x) { return pow(x, e); }, 0.5, 2);
  }
  check_unary_gradients([](const Tensor& x) { return pow(x, 3.0); }, -2, 2);
  for (const UnaryCase& c : unary_cases()) {
    INFO(c.name);
    const bool positive_domain = c.name == "log1p";  // log1p needs x > -1
    check_unary_gradients(c.op, positive_domain ? -0.9 : -4, 4);
  }
  {
    INFO("clamp");
    check_unary_gradients([](const Tensor& x) { return clamp(x, -1, 1.5); }, -2, 2);
  }
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> binary{
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }}};
  for (const auto& [name, f] : binary) {
    INFO(name);
    check_binary_gradients(f, -1, 1, -1, 1);
  }
  INFO("pow(a, b)");
  check_binary_gradients([](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2, -2, 2);
}

TEST_CASE("binary ops give a gradient only to the inputs that require one", "[ops-grad]") {
  const Device d = test::device();
  for (const auto& f : std::vector<std::function<Tensor(const Tensor&, const Tensor&)>>{
           [](const Tensor& a, const Tensor& b) { return pow(a, b); },
           [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
           [](const Tensor& a, const Tensor& b) { return minimum(a, b); }}) {
    Tensor a = uniform({2, 3}, 0.5, 2, d, 1, float64), b = uniform({3}, 0.5, 2, d, 2, float64);
    b.requires_grad_();
    sum(f(a, b)).backward();
    CHECK_FALSE(a.grad().defined());
    CHECK(b.grad().shape() == Shape{3});
  }
}

TEST_CASE("pow, maximum and minimum refuse mixed dtypes", "[ops-grad]") {
  const Device d = test::device();
  const Tensor f = ones({2}, d, float32), g = ones({2}, d, float64);
  CHECK_THROWS_AS(pow(f, g), DTypeError);
  CHECK_THROWS_AS(maximum(g, f), DTypeError);
  CHECK_THROWS_AS(minimum(f, g), DTypeError);
}
