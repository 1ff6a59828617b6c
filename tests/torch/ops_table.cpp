// Every kten operation against PyTorch: one row each. Adding an op is adding its row:
//
//   op("cube", broadcast(1), KTEN(kten::cube(x[0])), TORCH(at::pow(x[0], 3))),
//
// with the input domain (.on(Domain::positive) for log-like ops, Domain::nonzero away from kinks at
// 0, Domain::distinct for max-like ops), .no_fd() where finite differences mean nothing (kinks,
// ties), .sums() for sums and products (tolerances relative to their terms), .tol32(rtol, atol)
// for transcendental ops that need it, .float64_reference("why") where PyTorch's own float32 result
// is less accurate than that, and .no_special_grad("why") where PyTorch's gradient at NaN or inf is
// an accident of its formula rather than a definition. harness.hpp says what each means.
#include "harness.hpp"

namespace kten::torch_harness {
namespace {

// The lambdas of a row: x is the vector of inputs.
#define KTEN(expr) [](const KtenArgs& x) -> kten::Tensor { return (expr); }
#define TORCH(expr) [](const TorchArgs& x) -> at::Tensor { return (expr); }

Row op(std::string name, ShapeGen shapes, KtenFn k, TorchFn t) {
  return Row(std::move(name), std::move(shapes), std::move(k), std::move(t));
}

// kten axes and PyTorch dims for view rows computed from the input's shape.
std::vector<int> reversed_axes(int n) {
  std::vector<int> v;
  for (int i = n - 1; i >= 0; --i) v.push_back(i);
  return v;
}
std::vector<std::int64_t> reversed_dims(std::int64_t n) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = n - 1; i >= 0; --i) v.push_back(i);
  return v;
}
template <class Sizes>
Shape reversed_shape(const Sizes& sizes) {
  return Shape(sizes.rbegin(), sizes.rend());
}
// Each extent of 1 stretched to 3, and a new leading axis of 2.
template <class Sizes>
Shape stretched(const Sizes& sizes) {
  Shape s{2};
  for (auto e : sizes) s.push_back(e == 1 ? 3 : e);
  return s;
}
// narrow's start and length: from 1 to the end (nothing when the axis is empty).
// PyTorch 1.13's amax backward is (result == x) * g / count along the axis: where the maximum is
// NaN that mask is empty and 0/0 puts NaN on every element of the slice. kten, like torch.max() over
// all elements, shares the gradient among the NaN elements; values are compared all the same.
const char* const kAmaxAtNaN = "PyTorch's amax gives NaN to the whole slice whose maximum is NaN, kten shares the gradient among the NaNs as torch.max() does";

// PyTorch 1.13's float32 vector_norm on the CPU is off by up to 1.2e-5 (relative) at 10^4 elements.
const char* const kNorm32 = "PyTorch's float32 norm is off by up to 1.2e-5 at 10^4 elements";

std::int64_t narrow_start(std::int64_t n) { return n > 0 ? 1 : 0; }

kten::DType other(kten::DType d) { return d == kten::float32 ? kten::float64 : kten::float32; }
at::ScalarType other(at::ScalarType d) { return d == at::kFloat ? at::kDouble : at::kFloat; }

}  // namespace

std::vector<Row> op_table() {
  const Domain nonzero = Domain::nonzero;
  return {
      // Arithmetic with NumPy broadcasting.
      op("add", broadcast(2), KTEN(x[0] + x[1]), TORCH(x[0] + x[1])),
      op("sub", broadcast(2), KTEN(x[0] - x[1]), TORCH(x[0] - x[1])),
      op("mul", broadcast(2), KTEN(x[0] * x[1]), TORCH(x[0] * x[1])),
      op("div", broadcast(2), KTEN(x[0] / x[1]), TORCH(x[0] / x[1])).on({Domain::normal, nonzero}),
      op("fma", same_shape(3), KTEN(kten::fma(x[0], x[1], x[2])), TORCH(at::addcmul(x[2], x[0], x[1]))),
      // With scalars.
      op("x + s", broadcast(1), KTEN(x[0] + 2.5), TORCH(x[0] + 2.5)),
      op("s + x", broadcast(1), KTEN(2.5 + x[0]), TORCH(2.5 + x[0])),
      op("x - s", broadcast(1), KTEN(x[0] - 1.5), TORCH(x[0] - 1.5)),
      op("s - x", broadcast(1), KTEN(1.5 - x[0]), TORCH(at::rsub(x[0], 1.5))),
      op("x * s", broadcast(1), KTEN(x[0] * 0.75), TORCH(x[0] * 0.75)),
      op("s * x", broadcast(1), KTEN(-2.0 * x[0]), TORCH(x[0] * -2.0)),
      op("x / s", broadcast(1), KTEN(x[0] / 1.25), TORCH(x[0] / 1.25)),
      op("s / x", broadcast(1), KTEN(2.0 / x[0]), TORCH(at::full_like(x[0], 2.0) / x[0])).on(nonzero),
      // Elementwise functions.
      op("neg", broadcast(1), KTEN(kten::neg(x[0])), TORCH(at::neg(x[0]))),
      op("-x", broadcast(1), KTEN(-x[0]), TORCH(-x[0])),
      op("exp", broadcast(1), KTEN(kten::exp(x[0])), TORCH(at::exp(x[0]))),
      op("log", broadcast(1), KTEN(kten::log(x[0])), TORCH(at::log(x[0]))).on(Domain::positive),
      op("sqrt", broadcast(1), KTEN(kten::sqrt(x[0])), TORCH(at::sqrt(x[0]))).on(Domain::positive),
      op("abs", broadcast(1), KTEN(kten::abs(x[0])), TORCH(at::abs(x[0]))).on(nonzero),
      op("abs at 0", broadcast(1), KTEN(kten::abs(x[0])), TORCH(at::abs(x[0]))).on(Domain::zeros).no_fd(),
      op("relu", broadcast(1), KTEN(kten::relu(x[0])), TORCH(at::relu(x[0]))).on(nonzero),
      op("relu at 0", broadcast(1), KTEN(kten::relu(x[0])), TORCH(at::relu(x[0]))).on(Domain::zeros).no_fd(),
      op("sigmoid", broadcast(1), KTEN(kten::sigmoid(x[0])), TORCH(at::sigmoid(x[0]))),
      op("tanh", broadcast(1), KTEN(kten::tanh(x[0])), TORCH(at::tanh(x[0]))),
      op("sin", broadcast(1), KTEN(kten::sin(x[0])), TORCH(at::sin(x[0]))),
      op("cos", broadcast(1), KTEN(kten::cos(x[0])), TORCH(at::cos(x[0]))),
      op("log1p", broadcast(1), KTEN(kten::log1p(x[0])), TORCH(at::log1p(x[0]))).on(Domain::positive),
      op("expm1", broadcast(1), KTEN(kten::expm1(x[0])), TORCH(at::expm1(x[0]))),
      op("erf", broadcast(1), KTEN(kten::erf(x[0])), TORCH(at::erf(x[0]))),
      op("softplus", broadcast(1), KTEN(kten::softplus(x[0])), TORCH(at::softplus(x[0], 1, 20))),
      op("softplus(beta 2, threshold 1)", broadcast(1), KTEN(kten::softplus(x[0], 2, 1)), TORCH(at::softplus(x[0], 2, 1))).on(nonzero),
      op("gelu", broadcast(1), KTEN(kten::gelu(x[0])), TORCH(at::gelu(x[0]))),
      op("silu", broadcast(1), KTEN(kten::silu(x[0])), TORCH(at::silu(x[0]))),
      op("pow(x, 2.5)", broadcast(1), KTEN(kten::pow(x[0], 2.5)), TORCH(at::pow(x[0], 2.5))).on(Domain::positive),
      op("pow(x, 2)", broadcast(1), KTEN(kten::pow(x[0], 2.0)), TORCH(at::pow(x[0], 2.0))),
      op("pow(x, -0.5)", broadcast(1), KTEN(kten::pow(x[0], -0.5)), TORCH(at::pow(x[0], -0.5))).on(Domain::positive),
      op("pow(a, b)", broadcast(2), KTEN(kten::pow(x[0], x[1])), TORCH(at::pow(x[0], x[1]))).on({Domain::positive, Domain::normal}),
      op("maximum", broadcast(2), KTEN(kten::maximum(x[0], x[1])), TORCH(at::maximum(x[0], x[1]))).on(Domain::distinct),
      op("minimum", broadcast(2), KTEN(kten::minimum(x[0], x[1])), TORCH(at::minimum(x[0], x[1]))).on(Domain::distinct),
      op("maximum with ties", broadcast(2), KTEN(kten::maximum(x[0], x[1])), TORCH(at::maximum(x[0], x[1]))).on(Domain::ties).no_fd(),
      op("clamp(-0.5, 0.7)", broadcast(1), KTEN(kten::clamp(x[0], -0.5, 0.7)), TORCH(at::clamp(x[0], -0.5, 0.7))).on(Domain::distinct).no_fd(),
      op("where(x > 0, x, y)", broadcast(2), KTEN(kten::where(kten::gt(x[0], 0.0), x[0], x[1])),
         TORCH(at::where(x[0] > 0, x[0], x[1]))).on(nonzero),
      op("x * x + exp(x)", broadcast(1), KTEN(x[0] * x[0] + kten::exp(x[0])), TORCH(x[0] * x[0] + at::exp(x[0]))),
      // Reductions: all elements (a 0-d result) and one axis.
      op("sum", broadcast(1), KTEN(kten::sum(x[0])), TORCH(x[0].sum())).sums(),
      op("sum(0)", broadcast(1, 1), KTEN(kten::sum(x[0], 0)), TORCH(x[0].sum(0))).sums(),
      op("sum(1)", broadcast(1, 2), KTEN(kten::sum(x[0], 1)), TORCH(x[0].sum(1))).sums(),
      op("sum(-1)", broadcast(1, 1), KTEN(kten::sum(x[0], -1)), TORCH(x[0].sum(-1))).sums(),
      op("mean", broadcast(1), KTEN(kten::mean(x[0])), TORCH(x[0].mean())).sums(),
      op("mean(0)", broadcast(1, 1), KTEN(kten::mean(x[0], 0)), TORCH(x[0].mean(0))).sums(),
      op("mean(-1)", broadcast(1, 1), KTEN(kten::mean(x[0], -1)), TORCH(x[0].mean(-1))).sums(),
      op("max", broadcast(1), KTEN(kten::max(x[0])), TORCH(x[0].max())).on(Domain::distinct),
      op("max(0)", broadcast(1, 1), KTEN(kten::max(x[0], 0)), TORCH(at::amax(x[0], {0}))).on(Domain::distinct).no_special_grad(kAmaxAtNaN),
      op("max(-1)", broadcast(1, 1), KTEN(kten::max(x[0], -1)), TORCH(at::amax(x[0], {-1}))).on(Domain::distinct).no_special_grad(kAmaxAtNaN),
      op("max with ties", broadcast(1), KTEN(kten::max(x[0])), TORCH(x[0].max())).on(Domain::ties).no_fd(),
      op("max(-1) with ties", broadcast(1, 1), KTEN(kten::max(x[0], -1)), TORCH(at::amax(x[0], {-1}))).on(Domain::ties).no_fd().no_special_grad(kAmaxAtNaN),
      op("norm", broadcast(1), KTEN(kten::norm(x[0])), TORCH(at::linalg_vector_norm(x[0]))).sums().float64_reference(kNorm32),
      op("norm(0)", broadcast(1, 1), KTEN(kten::norm(x[0], 0)), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{0}))).sums().float64_reference(kNorm32),
      op("norm(-1)", broadcast(1, 1), KTEN(kten::norm(x[0], -1)), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{-1}))).sums().float64_reference(kNorm32),
      op("norm(-1) at 0", broadcast(1, 1), KTEN(kten::norm(x[0], -1)), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{-1}))).on(Domain::zeros).no_fd().sums().float64_reference(kNorm32),
      op("min", broadcast(1), KTEN(kten::min(x[0])), TORCH(x[0].min())).on(Domain::distinct),
      op("min(-1)", broadcast(1, 1), KTEN(kten::min(x[0], -1)), TORCH(at::amin(x[0], {-1}))).on(Domain::distinct).no_special_grad(kAmaxAtNaN),
      op("sum({0, -1}, keepdim)", broadcast(1, 2), KTEN(kten::sum(x[0], {0, -1}, true)), TORCH(x[0].sum(at::IntArrayRef{0, -1}, true))).sums(),
      op("mean({0, -1})", broadcast(1, 2), KTEN(kten::mean(x[0], {0, -1})), TORCH(x[0].mean(at::IntArrayRef{0, -1}))).sums(),
      op("max({0, -1})", broadcast(1, 2), KTEN(kten::max(x[0], {0, -1})), TORCH(at::amax(x[0], at::IntArrayRef{0, -1}))).on(Domain::distinct).no_special_grad(kAmaxAtNaN),
      op("min({0}, keepdim)", broadcast(1, 1), KTEN(kten::min(x[0], {0}, true)), TORCH(at::amin(x[0], at::IntArrayRef{0}, true))).on(Domain::distinct).no_special_grad(kAmaxAtNaN),
      op("norm({0, -1})", broadcast(1, 2), KTEN(kten::norm(x[0], {0, -1})), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{0, -1}))).sums().float64_reference(kNorm32),
      // var over at least 2 elements (x joined with 0.5 x + 1): with one, PyTorch's own backward
      // gives inf or throws, and the unbiased variance is NaN anyway.
      op("var", broadcast(1), KTEN(kten::var(kten::cat({x[0].reshape({-1}), x[0].reshape({-1}) * 0.5 + 1.0}))),
         TORCH(at::cat({x[0].reshape({-1}), x[0].reshape({-1}) * 0.5 + 1.0}).var())).sums(),
      op("var({-1}, keepdim)", broadcast(1, 1), KTEN(kten::var(kten::cat({x[0], x[0] * 0.5 + 1.0}, -1), {-1}, true)),
         TORCH(at::cat({x[0], x[0] * 0.5 + 1.0}, -1).var(at::IntArrayRef{-1}, true, true))).sums(),
      op("softmax(-1)", broadcast(1, 1), KTEN(kten::softmax(x[0], -1)), TORCH(at::softmax(x[0], -1))),
      op("softmax(0)", broadcast(1, 1), KTEN(kten::softmax(x[0], 0)), TORCH(at::softmax(x[0], 0))),
      op("log_softmax(-1)", broadcast(1, 1), KTEN(kten::log_softmax(x[0], -1)), TORCH(at::log_softmax(x[0], -1))),
      op("logsumexp(-1)", broadcast(1, 1), KTEN(kten::logsumexp(x[0], -1)), TORCH(at::logsumexp(x[0], {-1}))).sums(),
      op("logsumexp(0, keepdim)", broadcast(1, 1), KTEN(kten::logsumexp(x[0], 0, true)), TORCH(at::logsumexp(x[0], {0}, true))).sums(),
      op("index_select(-1, [last, 0, last])", broadcast(1, 1), KTEN(kten::index_select(x[0], -1, kten::tensor(std::vector<std::int64_t>{x[0].size(-1) - 1, 0, x[0].size(-1) - 1}, x[0].device()))),
         TORCH(at::index_select(x[0], -1, at::tensor(std::vector<std::int64_t>{x[0].size(-1) - 1, 0, x[0].size(-1) - 1})))).no_empty(),
      op("gather(0, zeros)", broadcast(1, 1), KTEN(kten::gather(x[0], 0, kten::zeros(x[0].shape(), x[0].device(), kten::int64))),
         TORCH(at::gather(x[0], 0, at::zeros(x[0].sizes(), at::kLong)))).no_empty(),
      // Matrix products.
      op("matmul", matmul_shapes(), KTEN(kten::matmul(x[0], x[1])), TORCH(at::matmul(x[0], x[1]))).sums(),
      op("matmul (batches, broadcast)", batched_matmul_shapes(), KTEN(kten::matmul(x[0], x[1])), TORCH(at::matmul(x[0], x[1]))).sums(),
      op("matmul (vector-matrix)", matvec_shapes(), KTEN(kten::matmul(x[1], x[0].transpose())), TORCH(at::matmul(x[1], x[0].t()))).sums(),
      op("matmul (matrix-vector)", matvec_shapes(), KTEN(kten::matmul(x[0], x[1])), TORCH(at::matmul(x[0], x[1]))).sums(),
      op("matmul(a, b.transpose())", matmul_shapes(), KTEN(kten::matmul(x[0], x[1].transpose().contiguous().transpose())),
         TORCH(at::matmul(x[0], x[1].t().contiguous().t()))).sums(),
      // Views (results share storage) and copies.
      op("transpose()", same_shape(1, 2), KTEN(x[0].ndim() == 2 ? x[0].transpose() : x[0].transpose(0, 1)), TORCH(x[0].transpose(0, 1))),
      op("transpose(0, -1)", broadcast(1, 2), KTEN(x[0].transpose(0, -1)), TORCH(x[0].transpose(0, -1))),
      op("permute(reversed)", broadcast(1), KTEN(x[0].permute(reversed_axes(x[0].ndim()))), TORCH(x[0].permute(reversed_dims(x[0].dim())))),
      op("narrow(-1, 1, n - 1)", broadcast(1, 1), KTEN(x[0].narrow(-1, narrow_start(x[0].size(-1)), x[0].size(-1) - narrow_start(x[0].size(-1)))),
         TORCH(x[0].narrow(-1, narrow_start(x[0].size(-1)), x[0].size(-1) - narrow_start(x[0].size(-1))))),
      op("select(0, n / 2)", broadcast(1, 1), KTEN(x[0].select(0, x[0].size(0) / 2)), TORCH(x[0].select(0, x[0].size(0) / 2))),
      op("unsqueeze(0)", broadcast(1), KTEN(x[0].unsqueeze(0)), TORCH(x[0].unsqueeze(0))),
      op("unsqueeze(-1)", broadcast(1), KTEN(x[0].unsqueeze(-1)), TORCH(x[0].unsqueeze(-1))),
      op("squeeze()", broadcast(1), KTEN(x[0].squeeze()), TORCH(x[0].squeeze())),
      op("squeeze(0)", broadcast(1, 1), KTEN(x[0].squeeze(0)), TORCH(x[0].squeeze(0))),
      op("expand", broadcast(1), KTEN(x[0].expand(stretched(x[0].shape()))), TORCH(x[0].expand(stretched(x[0].sizes())))),
      op("reshape(-1)", broadcast(1), KTEN(x[0].reshape({-1})), TORCH(x[0].reshape({-1}))),
      op("reshape(reversed)", broadcast(1), KTEN(x[0].reshape(reversed_shape(x[0].shape()))), TORCH(x[0].reshape(reversed_shape(x[0].sizes())))),
      op("contiguous", broadcast(1), KTEN(x[0].contiguous()), TORCH(x[0].contiguous())),
      op("cat(0)", cat_shapes(2, 0), KTEN(kten::cat({x[0], x[1]}, 0)), TORCH(at::cat({x[0], x[1]}, 0))),
      op("cat(-1) of 3", cat_shapes(3, -1), KTEN(kten::cat({x[0], x[1], x[2]}, -1)), TORCH(at::cat({x[0], x[1], x[2]}, -1))),
      op("stack(0)", same_shape(2), KTEN(kten::stack({x[0], x[1]}, 0)), TORCH(at::stack({x[0], x[1]}, 0))),
      op("stack(-1) of 3", same_shape(3), KTEN(kten::stack({x[0], x[1], x[2]}, -1)), TORCH(at::stack({x[0], x[1], x[2]}, -1))),
      op("astype(other dtype)", broadcast(1), KTEN(x[0].astype(other(x[0].dtype()))), TORCH(x[0].to(other(x[0].scalar_type()))))
          .no_fd(),  // float64 -> float32 loses the finite differences in rounding
      op("copyto(cpu())", broadcast(1), KTEN(x[0].copyto(kten::cpu())), TORCH(x[0].clone())),
  };
}

}  // namespace kten::torch_harness
