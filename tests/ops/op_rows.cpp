// Every registered op (src/ops/registry.hpp), at least one row each, run against kten on cpu() in
// float64 (kten-op-tests, every build) and against PyTorch (kten-torch-harness, where libtorch is
// found). Adding an op is adding its row:
//
//   reg("cube", broadcast(1), TORCH(at::pow(x[0], 3))),
//
// which calls the registry's forward for "cube"; a form with arguments gives them as attributes,
// reg("pow_scalar", "pow(x, 2.5)", broadcast(1), reals({2.5}), TORCH(...)), and a row whose kten
// side builds its own inputs (an index tensor, a condition) is op(...) with .covers("name"). The
// registry gives each input's domain and whether the op has a gradient; a row may change the
// input domain (.on(Domain::positive) for log-like ops, Domain::nonzero away from kinks at
// 0, Domain::distinct for max-like ops), .no_fd() where finite differences mean nothing (kinks,
// ties), .sums() for sums and products (tolerances relative to their terms), .tol32(rtol, atol)
// for transcendental ops that need it, .float64_reference("why") where PyTorch's own float32 result
// is less accurate than that, and .no_special_grad("why") where PyTorch's gradient at NaN or inf is
// an accident of its formula rather than a definition. harness.hpp says what each means.
#include "harness.hpp"

namespace kten::harness {
namespace {

Row op(std::string name, ShapeGen shapes, KtenFn k, TorchFn t) {
  return Row(std::move(name), std::move(shapes), std::move(k), std::move(t));
}

// A row of a registered op, by its name, with the op's non-tensor arguments.
Row reg(const std::string& name, ShapeGen shapes, TorchFn t) { return registered(name, "", std::move(shapes), {}, std::move(t)); }
Row reg(const std::string& name, std::string label, ShapeGen shapes, ops::OpAttrs attrs, TorchFn t) {
  return registered(name, std::move(label), std::move(shapes), std::move(attrs), std::move(t));
}
ops::OpAttrs reals(std::vector<double> v) { return ops::OpAttrs::of_reals(std::move(v)); }
ops::OpAttrs ints(std::vector<std::int64_t> v, bool keepdim = false) { return ops::OpAttrs::of_ints(std::move(v), keepdim); }
ops::OpAttrs on_device(const kten::Device& d) {
  ops::OpAttrs a;
  a.device = d;
  return a;
}

// One matrix (m, k).
ShapeGen matrix() {
  return {1, [](Rng& rng, const ShapeOptions& o) { return std::vector<Shape>{matmul_shapes().make(rng, o)[0]}; }};
}

// kten axes and PyTorch dims for view rows computed from the input's shape.
std::vector<int> reversed_axes(int n) {
  std::vector<int> v;
  for (int i = n - 1; i >= 0; --i) v.push_back(i);
  return v;
}
#ifdef KTEN_HARNESS_TORCH
std::vector<std::int64_t> reversed_dims(std::int64_t n) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = n - 1; i >= 0; --i) v.push_back(i);
  return v;
}
#endif
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
#ifdef KTEN_HARNESS_TORCH
at::ScalarType other(at::ScalarType d) { return d == at::kFloat ? at::kDouble : at::kFloat; }
#endif


// --- Graph ops (scatter, index_add, embedding) -------------------------------------------------
// x (N, F) and src (E, F), or (2, N, F) and (2, E, F), scattered along the axis before the last
// (N nodes, E edges, F features); E > N, so destinations repeat. The empty case has no features.
ShapeGen scatter_shapes(int rank) {
  return {2, [rank](Rng& rng, const ShapeOptions& o) {
            const auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
            std::int64_t n = pick(1, o.small ? 2 : 4), f = pick(1, 2), e = pick(1, o.small ? 3 : 6);
            if (o.large) n = pick(60, 120), f = pick(20, 40), e = pick(200, 400) / rank;
            if (o.empty) f = 0;
            if (rank == 2) return std::vector<Shape>{{n, f}, {e, f}};
            return std::vector<Shape>{{2, n, f}, {2, e, f}};
          }};
}
// The index of every source element (a shape like src's): position p (row-major) goes to
// (3 p + 1) mod N, so each fiber has its own pattern.
std::vector<std::int64_t> scatter_index(std::int64_t elements, std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(elements));
  for (std::int64_t p = 0; p < elements; ++p) v[p] = (3 * p + 1) % n;
  return v;
}
// An edge list: edge i goes to node (3 i + 1) mod N; one index per edge, broadcast over the other
// axes (stride 0), as index.unsqueeze(-1).expand_as(src) in PyTorch.
Shape edge_list_shape(const Shape& src) {
  Shape s(src.size(), 1);
  s[src.size() - 2] = src[src.size() - 2];
  return s;
}
kten::Tensor kten_scatter_index(const kten::Tensor& x, const kten::Tensor& src, bool edges) {
  const std::int64_t n = x.size(-2);
  if (edges) return kten::tensor(scatter_index(src.size(-2), n), edge_list_shape(src.shape()), x.device()).expand(src.shape());
  return kten::tensor(scatter_index(src.numel(), n), src.shape(), x.device());
}
// Embedding's indices for a (num, dim) weight: (2, num + 1), every row used.
kten::Tensor kten_embedding_indices(const kten::Tensor& w) {
  return kten::tensor(scatter_index(2 * (w.size(0) + 1), w.size(0)), {2, w.size(0) + 1}, w.device());
}
// A (num, dim) weight: num rows of up to 4 features (the empty case: none).
ShapeGen embedding_shapes() {
  return {1, [](Rng& rng, const ShapeOptions& o) {
            const auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
            if (o.large) return std::vector<Shape>{{pick(40, 80), pick(40, 60)}};
            return std::vector<Shape>{{pick(1, 3), o.empty ? 0 : pick(1, o.small ? 2 : 4)}};
          }};
}
#ifdef KTEN_HARNESS_TORCH
at::Tensor torch_scatter_index(const at::Tensor& x, const at::Tensor& src, bool edges) {
  const std::int64_t n = x.size(-2);
  if (edges) {
    const Shape s = edge_list_shape(Shape(src.sizes().begin(), src.sizes().end()));
    return at::tensor(scatter_index(src.size(-2), n), at::kLong).reshape(s).expand(src.sizes());
  }
  return at::tensor(scatter_index(src.numel(), n), at::kLong).reshape(src.sizes());
}
at::Tensor torch_embedding_indices(const at::Tensor& w) {
  return at::tensor(scatter_index(2 * (w.size(0) + 1), w.size(0)), at::kLong).reshape({2, w.size(0) + 1});
}
#endif
// PyTorch 1.13 splits amax/amin's gradient among the elements equal to the result: where that is
// NaN none is, and 0 * (g / 0) puts NaN on x and the sources alike; an accident of the formula.
const char* const kScatterAmaxAtNaN = "PyTorch's amax/amin scatter gradient at a NaN result is 0 * (g / 0), an accident of its formula";
// --- end of graph ops -------------------------------------------------------------------------
}  // namespace

std::vector<Row> op_table() {
  const Domain nonzero = Domain::nonzero;
  return {
      // Arithmetic with NumPy broadcasting.
      reg("add", broadcast(2), TORCH(x[0] + x[1])),
      reg("sub", broadcast(2), TORCH(x[0] - x[1])),
      reg("mul", broadcast(2), TORCH(x[0] * x[1])),
      reg("div", broadcast(2), TORCH(x[0] / x[1])),
      reg("fma", same_shape(3), TORCH(at::addcmul(x[2], x[0], x[1]))),
      // With scalars.
      reg("add_scalar", "x + s", broadcast(1), reals({2.5}), TORCH(x[0] + 2.5)),
      reg("radd_scalar", "s + x", broadcast(1), reals({2.5}), TORCH(2.5 + x[0])),
      reg("sub_scalar", "x - s", broadcast(1), reals({1.5}), TORCH(x[0] - 1.5)),
      reg("rsub_scalar", "s - x", broadcast(1), reals({1.5}), TORCH(at::rsub(x[0], 1.5))),
      reg("mul_scalar", "x * s", broadcast(1), reals({0.75}), TORCH(x[0] * 0.75)),
      reg("rmul_scalar", "s * x", broadcast(1), reals({-2.0}), TORCH(x[0] * -2.0)),
      reg("div_scalar", "x / s", broadcast(1), reals({1.25}), TORCH(x[0] / 1.25)),
      reg("rdiv_scalar", "s / x", broadcast(1), reals({2.0}), TORCH(at::full_like(x[0], 2.0) / x[0])),
      // Elementwise functions.
      reg("neg", broadcast(1), TORCH(at::neg(x[0]))),
      reg("negate", "-x", broadcast(1), {}, TORCH(-x[0])),
      reg("exp", broadcast(1), TORCH(at::exp(x[0]))),
      reg("log", broadcast(1), TORCH(at::log(x[0]))),
      reg("sqrt", broadcast(1), TORCH(at::sqrt(x[0]))),
      reg("abs", broadcast(1), TORCH(at::abs(x[0]))),
      reg("abs", "abs at 0", broadcast(1), {}, TORCH(at::abs(x[0]))).on(Domain::zeros).no_fd(),
      reg("relu", broadcast(1), TORCH(at::relu(x[0]))),
      reg("relu", "relu at 0", broadcast(1), {}, TORCH(at::relu(x[0]))).on(Domain::zeros).no_fd(),
      reg("sigmoid", broadcast(1), TORCH(at::sigmoid(x[0]))),
      reg("tanh", broadcast(1), TORCH(at::tanh(x[0]))),
      reg("sin", broadcast(1), TORCH(at::sin(x[0]))),
      reg("cos", broadcast(1), TORCH(at::cos(x[0]))),
      reg("log1p", broadcast(1), TORCH(at::log1p(x[0]))),
      reg("expm1", broadcast(1), TORCH(at::expm1(x[0]))),
      reg("erf", broadcast(1), TORCH(at::erf(x[0]))),
      reg("softplus", broadcast(1), TORCH(at::softplus(x[0], 1, 20))),
      reg("softplus", "softplus(beta 2, threshold 1)", broadcast(1), reals({2, 1}), TORCH(at::softplus(x[0], 2, 1))).on(nonzero),
      reg("gelu", broadcast(1), TORCH(at::gelu(x[0]))),
      reg("silu", broadcast(1), TORCH(at::silu(x[0]))),
      reg("pow_scalar", "pow(x, 2.5)", broadcast(1), reals({2.5}), TORCH(at::pow(x[0], 2.5))),
      reg("pow_scalar", "pow(x, 2)", broadcast(1), reals({2.0}), TORCH(at::pow(x[0], 2.0))).on(Domain::normal),
      reg("pow_scalar", "pow(x, -0.5)", broadcast(1), reals({-0.5}), TORCH(at::pow(x[0], -0.5))),
      reg("pow", "pow(a, b)", broadcast(2), {}, TORCH(at::pow(x[0], x[1]))),
      reg("maximum", broadcast(2), TORCH(at::maximum(x[0], x[1]))),
      reg("minimum", broadcast(2), TORCH(at::minimum(x[0], x[1]))),
      reg("maximum", "maximum with ties", broadcast(2), {}, TORCH(at::maximum(x[0], x[1]))).on(Domain::ties).no_fd(),
      reg("clamp", "clamp(-0.5, 0.7)", broadcast(1), reals({-0.5, 0.7}), TORCH(at::clamp(x[0], -0.5, 0.7))).no_fd(),
      op("x * x + exp(x)", broadcast(1), KTEN(x[0] * x[0] + kten::exp(x[0])), TORCH(x[0] * x[0] + at::exp(x[0]))),
      // Comparisons (values only: boolean results) and selection.
      reg("eq", "eq with ties", broadcast(2), {}, TORCH(at::eq(x[0], x[1]))).on(Domain::ties),
      reg("ne", "ne with ties", broadcast(2), {}, TORCH(at::ne(x[0], x[1]))).on(Domain::ties),
      reg("lt", "lt with ties", broadcast(2), {}, TORCH(at::lt(x[0], x[1]))).on(Domain::ties),
      reg("le", "le with ties", broadcast(2), {}, TORCH(at::le(x[0], x[1]))).on(Domain::ties),
      reg("gt", "gt with ties", broadcast(2), {}, TORCH(at::gt(x[0], x[1]))).on(Domain::ties),
      reg("ge", "ge with ties", broadcast(2), {}, TORCH(at::ge(x[0], x[1]))).on(Domain::ties),
      reg("eq_scalar", "eq(x, 1)", broadcast(1), reals({1}), TORCH(at::eq(x[0], 1.0))).on(Domain::ties),
      reg("ne_scalar", "ne(x, 1)", broadcast(1), reals({1}), TORCH(at::ne(x[0], 1.0))).on(Domain::ties),
      reg("lt_scalar", "lt(x, 1)", broadcast(1), reals({1}), TORCH(at::lt(x[0], 1.0))).on(Domain::ties),
      reg("le_scalar", "le(x, 1)", broadcast(1), reals({1}), TORCH(at::le(x[0], 1.0))).on(Domain::ties),
      reg("gt_scalar", "gt(x, 1)", broadcast(1), reals({1}), TORCH(at::gt(x[0], 1.0))).on(Domain::ties),
      reg("ge_scalar", "ge(x, 1)", broadcast(1), reals({1}), TORCH(at::ge(x[0], 1.0))).on(Domain::ties),
      op("where(x > 0, x, y)", broadcast(2), KTEN(kten::where(kten::gt(x[0], 0.0), x[0], x[1])),
         TORCH(at::where(x[0] > 0, x[0], x[1]))).on(nonzero).covers("where"),
      op("where(x > 0, x, 0.5)", broadcast(1), KTEN(kten::where(kten::gt(x[0], 0.0), x[0], 0.5)),
         TORCH(at::where(x[0] > 0, x[0], at::scalar_tensor(0.5, x[0].options())))).on(nonzero).covers("where_scalar_b"),
      op("where(x > 0, -0.5, x)", broadcast(1), KTEN(kten::where(kten::gt(x[0], 0.0), -0.5, x[0])),
         TORCH(at::where(x[0] > 0, at::scalar_tensor(-0.5, x[0].options()), x[0]))).on(nonzero).covers("where_scalar_a"),
      reg("argmax", broadcast(1), TORCH(at::argmax(x[0]))).no_empty(),
      reg("argmax_axis", "argmax(-1)", broadcast(1, 1), ints({-1}), TORCH(at::argmax(x[0], -1))).no_empty(),
      reg("argmax_axis", "argmax(0, keepdim)", broadcast(1, 1), ints({0}, true), TORCH(at::argmax(x[0], 0, true))).no_empty(),
      // Reductions: all elements (a 0-d result), one axis and several.
      reg("sum", broadcast(1), TORCH(x[0].sum())).sums(),
      reg("sum_axis", "sum(0)", broadcast(1, 1), ints({0}), TORCH(x[0].sum(0))).sums(),
      reg("sum_axis", "sum(1)", broadcast(1, 2), ints({1}), TORCH(x[0].sum(1))).sums(),
      reg("sum_axis", "sum(-1)", broadcast(1, 1), ints({-1}), TORCH(x[0].sum(-1))).sums(),
      reg("mean", broadcast(1), TORCH(x[0].mean())).sums(),
      reg("mean_axis", "mean(0)", broadcast(1, 1), ints({0}), TORCH(x[0].mean(0))).sums(),
      reg("mean_axis", "mean(-1)", broadcast(1, 1), ints({-1}), TORCH(x[0].mean(-1))).sums(),
      reg("max", broadcast(1), TORCH(x[0].max())),
      reg("max_axis", "max(0)", broadcast(1, 1), ints({0}), TORCH(at::amax(x[0], {0}))).no_special_grad(kAmaxAtNaN),
      reg("max_axis", "max(-1)", broadcast(1, 1), ints({-1}), TORCH(at::amax(x[0], {-1}))).no_special_grad(kAmaxAtNaN),
      reg("max", "max with ties", broadcast(1), {}, TORCH(x[0].max())).on(Domain::ties).no_fd(),
      reg("max_axis", "max(-1) with ties", broadcast(1, 1), ints({-1}), TORCH(at::amax(x[0], {-1}))).on(Domain::ties).no_fd().no_special_grad(kAmaxAtNaN),
      reg("norm", broadcast(1), TORCH(at::linalg_vector_norm(x[0]))).sums().float64_reference(kNorm32),
      reg("norm_axis", "norm(0)", broadcast(1, 1), ints({0}), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{0}))).sums().float64_reference(kNorm32),
      reg("norm_axis", "norm(-1)", broadcast(1, 1), ints({-1}), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{-1}))).sums().float64_reference(kNorm32),
      reg("norm_axis", "norm(-1) at 0", broadcast(1, 1), ints({-1}), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{-1}))).on(Domain::zeros).no_fd().sums().float64_reference(kNorm32),
      reg("min", broadcast(1), TORCH(x[0].min())),
      reg("min_axis", "min(-1)", broadcast(1, 1), ints({-1}), TORCH(at::amin(x[0], {-1}))).no_special_grad(kAmaxAtNaN),
      reg("sum_axes", "sum({0, -1}, keepdim)", broadcast(1, 2), ints({0, -1}, true), TORCH(x[0].sum(at::IntArrayRef{0, -1}, true))).sums(),
      reg("mean_axes", "mean({0, -1})", broadcast(1, 2), ints({0, -1}), TORCH(x[0].mean(at::IntArrayRef{0, -1}))).sums(),
      reg("max_axes", "max({0, -1})", broadcast(1, 2), ints({0, -1}), TORCH(at::amax(x[0], at::IntArrayRef{0, -1}))).no_special_grad(kAmaxAtNaN),
      reg("min_axes", "min({0}, keepdim)", broadcast(1, 1), ints({0}, true), TORCH(at::amin(x[0], at::IntArrayRef{0}, true))).no_special_grad(kAmaxAtNaN),
      reg("norm_axes", "norm({0, -1})", broadcast(1, 2), ints({0, -1}), TORCH(at::linalg_vector_norm(x[0], 2, at::IntArrayRef{0, -1}))).sums().float64_reference(kNorm32),
      // var over at least 2 elements (x joined with 0.5 x + 1): with one, PyTorch's own backward
      // gives inf or throws, and the unbiased variance is NaN anyway.
      op("var", broadcast(1), KTEN(kten::var(kten::cat({x[0].reshape({-1}), x[0].reshape({-1}) * 0.5 + 1.0}))),
         TORCH(at::cat({x[0].reshape({-1}), x[0].reshape({-1}) * 0.5 + 1.0}).var())).sums().covers("var"),
      op("var(-1)", broadcast(1, 1), KTEN(kten::var(kten::cat({x[0], x[0] * 0.5 + 1.0}, -1), -1)),
         TORCH(at::cat({x[0], x[0] * 0.5 + 1.0}, -1).var(-1))).sums().covers("var_axis"),
      op("var({-1}, keepdim)", broadcast(1, 1), KTEN(kten::var(kten::cat({x[0], x[0] * 0.5 + 1.0}, -1), {-1}, true)),
         TORCH(at::cat({x[0], x[0] * 0.5 + 1.0}, -1).var(at::IntArrayRef{-1}, true, true))).sums().covers("var_axes"),
      reg("softmax", "softmax(-1)", broadcast(1, 1), ints({-1}), TORCH(at::softmax(x[0], -1))),
      reg("softmax", "softmax(0)", broadcast(1, 1), ints({0}), TORCH(at::softmax(x[0], 0))),
      reg("log_softmax", "log_softmax(-1)", broadcast(1, 1), ints({-1}), TORCH(at::log_softmax(x[0], -1))),
      reg("logsumexp", "logsumexp(-1)", broadcast(1, 1), ints({-1}), TORCH(at::logsumexp(x[0], {-1}))).sums(),
      reg("logsumexp", "logsumexp(0, keepdim)", broadcast(1, 1), ints({0}, true), TORCH(at::logsumexp(x[0], {0}, true))).sums(),
      op("index_select(-1, [last, 0, last])", broadcast(1, 1), KTEN(kten::index_select(x[0], -1, kten::tensor(std::vector<std::int64_t>{x[0].size(-1) - 1, 0, x[0].size(-1) - 1}, x[0].device()))),
         TORCH(at::index_select(x[0], -1, at::tensor(std::vector<std::int64_t>{x[0].size(-1) - 1, 0, x[0].size(-1) - 1})))).no_empty().covers("index_select"),
      op("gather(0, zeros)", broadcast(1, 1), KTEN(kten::gather(x[0], 0, kten::zeros(x[0].shape(), x[0].device(), kten::int64))),
         TORCH(at::gather(x[0], 0, at::zeros(x[0].sizes(), at::kLong)))).no_empty().covers("gather"),
      // Matrix products.
      reg("matmul", matmul_shapes(), TORCH(at::matmul(x[0], x[1]))).sums(),
      reg("matmul", "matmul (batches, broadcast)", batched_matmul_shapes(), {}, TORCH(at::matmul(x[0], x[1]))).sums(),
      op("matmul (vector-matrix)", matvec_shapes(), KTEN(kten::matmul(x[1], x[0].transpose())), TORCH(at::matmul(x[1], x[0].t()))).sums(),
      reg("matmul", "matmul (matrix-vector)", matvec_shapes(), {}, TORCH(at::matmul(x[0], x[1]))).sums(),
      op("matmul(a, b.transpose())", matmul_shapes(), KTEN(kten::matmul(x[0], x[1].transpose().contiguous().transpose())),
         TORCH(at::matmul(x[0], x[1].t().contiguous().t()))).sums(),
      // Views (results share storage) and copies.
      reg("transpose", "transpose(x)", matrix(), {}, TORCH(x[0].t())),
      reg("Tensor::transpose", "transpose(0, -1)", broadcast(1, 2), ints({0, -1}), TORCH(x[0].transpose(0, -1))),
      op("permute(reversed)", broadcast(1), KTEN(x[0].permute(reversed_axes(x[0].ndim()))), TORCH(x[0].permute(reversed_dims(x[0].dim()))))
          .covers("Tensor::permute"),
      op("narrow(-1, 1, n - 1)", broadcast(1, 1), KTEN(x[0].narrow(-1, narrow_start(x[0].size(-1)), x[0].size(-1) - narrow_start(x[0].size(-1)))),
         TORCH(x[0].narrow(-1, narrow_start(x[0].size(-1)), x[0].size(-1) - narrow_start(x[0].size(-1))))).covers("Tensor::narrow"),
      op("select(0, n / 2)", broadcast(1, 1), KTEN(x[0].select(0, x[0].size(0) / 2)), TORCH(x[0].select(0, x[0].size(0) / 2)))
          .covers("Tensor::select"),
      reg("Tensor::unsqueeze", "unsqueeze(0)", broadcast(1), ints({0}), TORCH(x[0].unsqueeze(0))),
      reg("Tensor::unsqueeze", "unsqueeze(-1)", broadcast(1), ints({-1}), TORCH(x[0].unsqueeze(-1))),
      reg("Tensor::squeeze", "squeeze()", broadcast(1), {}, TORCH(x[0].squeeze())),
      reg("Tensor::squeeze_axis", "squeeze(0)", broadcast(1, 1), ints({0}), TORCH(x[0].squeeze(0))),
      op("expand", broadcast(1), KTEN(x[0].expand(stretched(x[0].shape()))), TORCH(x[0].expand(stretched(x[0].sizes()))))
          .covers("Tensor::expand"),
      reg("Tensor::reshape", "reshape(-1)", broadcast(1), ints({-1}), TORCH(x[0].reshape({-1}))),
      op("reshape(reversed)", broadcast(1), KTEN(x[0].reshape(reversed_shape(x[0].shape()))), TORCH(x[0].reshape(reversed_shape(x[0].sizes())))),
      reg("Tensor::contiguous", "contiguous", broadcast(1), {}, TORCH(x[0].contiguous())),
      reg("cat", "cat(0)", cat_shapes(2, 0), ints({0}), TORCH(at::cat({x[0], x[1]}, 0))),
      reg("cat", "cat(-1) of 3", cat_shapes(3, -1), ints({-1}), TORCH(at::cat({x[0], x[1], x[2]}, -1))),
      reg("stack", "stack(0)", same_shape(2), ints({0}), TORCH(at::stack({x[0], x[1]}, 0))),
      reg("stack", "stack(-1) of 3", same_shape(3), ints({-1}), TORCH(at::stack({x[0], x[1], x[2]}, -1))),
      op("astype(other dtype)", broadcast(1), KTEN(x[0].astype(other(x[0].dtype()))), TORCH(x[0].to(other(x[0].scalar_type()))))
          .no_fd()  // float64 -> float32 loses the finite differences in rounding
          .covers("Tensor::astype"),
      reg("Tensor::copyto", "copyto(cpu())", broadcast(1), on_device(kten::cpu()), TORCH(x[0].clone())),
      reg("Tensor::to", "to(cpu())", broadcast(1), on_device(kten::cpu()), TORCH(x[0].clone())),
      reg("Tensor::detach", "detach", broadcast(1), {}, TORCH(x[0].detach())),
      // --- Graph ops (scatter, index_add, embedding): every destination receives several sources.
      op("scatter_add(-2, index)", scatter_shapes(2), KTEN(kten::scatter_add(x[0], -2, kten_scatter_index(x[0], x[1], false), x[1])),
         TORCH(at::scatter_add(x[0], -2, torch_scatter_index(x[0], x[1], false), x[1]))).sums().covers("scatter_add"),
      op("scatter_add(1, edge list) 3-D", scatter_shapes(3), KTEN(kten::scatter_add(x[0], 1, kten_scatter_index(x[0], x[1], true), x[1])),
         TORCH(at::scatter_add(x[0], 1, torch_scatter_index(x[0], x[1], true), x[1]))).sums().covers("scatter_add"),
      op("index_add(0, edges)", scatter_shapes(2),
         KTEN(kten::index_add(x[0], 0, kten::tensor(scatter_index(x[1].size(0), x[0].size(0)), x[0].device()), x[1])),
         TORCH(at::index_add(x[0], 0, at::tensor(scatter_index(x[1].size(0), x[0].size(0)), at::kLong), x[1]))).sums().covers("index_add"),
      op("index_add(1, edges) 3-D", scatter_shapes(3),
         KTEN(kten::index_add(x[0], 1, kten::tensor(scatter_index(x[1].size(1), x[0].size(1)), x[0].device()), x[1])),
         TORCH(at::index_add(x[0], 1, at::tensor(scatter_index(x[1].size(1), x[0].size(1)), at::kLong), x[1]))).sums().covers("index_add"),
      op("scatter_reduce(sum)", scatter_shapes(2), KTEN(kten::scatter_reduce(x[0], -2, kten_scatter_index(x[0], x[1], false), x[1], "sum")),
         TORCH(at::scatter_reduce(x[0], -2, torch_scatter_index(x[0], x[1], false), x[1], "sum"))).sums().covers("scatter_reduce"),
      op("scatter_reduce(sum, include_self=false)", scatter_shapes(3),
         KTEN(kten::scatter_reduce(x[0], 1, kten_scatter_index(x[0], x[1], true), x[1], "sum", false)),
         TORCH(at::scatter_reduce(x[0], 1, torch_scatter_index(x[0], x[1], true), x[1], "sum", false))).sums().covers("scatter_reduce"),
      op("scatter_reduce(mean)", scatter_shapes(2), KTEN(kten::scatter_reduce(x[0], -2, kten_scatter_index(x[0], x[1], true), x[1], "mean")),
         TORCH(at::scatter_reduce(x[0], -2, torch_scatter_index(x[0], x[1], true), x[1], "mean"))).sums().covers("scatter_reduce"),
      op("scatter_reduce(mean, include_self=false)", scatter_shapes(3),
         KTEN(kten::scatter_reduce(x[0], 1, kten_scatter_index(x[0], x[1], false), x[1], "mean", false)),
         TORCH(at::scatter_reduce(x[0], 1, torch_scatter_index(x[0], x[1], false), x[1], "mean", false))).sums().covers("scatter_reduce"),
      op("scatter_reduce(amax)", scatter_shapes(2), KTEN(kten::scatter_reduce(x[0], -2, kten_scatter_index(x[0], x[1], false), x[1], "amax")),
         TORCH(at::scatter_reduce(x[0], -2, torch_scatter_index(x[0], x[1], false), x[1], "amax")))
          .on(Domain::distinct).no_special_grad(kScatterAmaxAtNaN).covers("scatter_reduce"),
      op("scatter_reduce(amax, include_self=false)", scatter_shapes(3),
         KTEN(kten::scatter_reduce(x[0], 1, kten_scatter_index(x[0], x[1], true), x[1], "amax", false)),
         TORCH(at::scatter_reduce(x[0], 1, torch_scatter_index(x[0], x[1], true), x[1], "amax", false)))
          .on(Domain::distinct).no_special_grad(kScatterAmaxAtNaN).covers("scatter_reduce"),
      op("scatter_reduce(amin)", scatter_shapes(3), KTEN(kten::scatter_reduce(x[0], 1, kten_scatter_index(x[0], x[1], true), x[1], "amin")),
         TORCH(at::scatter_reduce(x[0], 1, torch_scatter_index(x[0], x[1], true), x[1], "amin")))
          .on(Domain::distinct).no_special_grad(kScatterAmaxAtNaN).covers("scatter_reduce"),
      op("scatter_reduce(amin, include_self=false)", scatter_shapes(2),
         KTEN(kten::scatter_reduce(x[0], -2, kten_scatter_index(x[0], x[1], false), x[1], "amin", false)),
         TORCH(at::scatter_reduce(x[0], -2, torch_scatter_index(x[0], x[1], false), x[1], "amin", false)))
          .on(Domain::distinct).no_special_grad(kScatterAmaxAtNaN).covers("scatter_reduce"),
      op("embedding(weight, (2, num + 1))", embedding_shapes(), KTEN(kten::embedding(x[0], kten_embedding_indices(x[0]))),
         TORCH(at::embedding(x[0], torch_embedding_indices(x[0])))).sums().covers("embedding"),
      // --- end of graph ops
  };
}

}  // namespace kten::harness
