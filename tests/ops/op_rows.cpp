// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
#include <algorithm>
#include <cmath>

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
// PyTorch's float32 linear, bilinear and trilinear compute their scale in float32, so a source
// index near a whole number may fall on the other side of it; kten computes the sources in double
// in both dtypes (and reads the taps float64 reads).
const char* const kLinear32 = "PyTorch's float32 linear interpolation computes its scale in float32, kten in double";
// Pooling and resampling (issue 31 item 2): interpolate's scale with its mode and align_corners.
ops::OpAttrs reals_and_ints(std::vector<double> r, std::vector<std::int64_t> i) {
  ops::OpAttrs a = ops::OpAttrs::of_reals(std::move(r));
  a.ints = std::move(i);
  return a;
}
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

// --- issue 31 (normalisation): running statistics of C channels, fixed values of x's dtype:
// mean 0.1 c - 0.2, variance 0.5 + 0.25 c (fresh ones each call, as training changes them).
std::vector<double> running_values(std::int64_t channels, double base, double step) {
  std::vector<double> v;
  for (std::int64_t c = 0; c < channels; ++c) v.push_back(base + step * static_cast<double>(c));
  return v;
}
kten::Tensor kten_running(const kten::Tensor& x, double base, double step) {
  return kten::tensor(running_values(x.size(1), base, step), x.device()).astype(x.dtype());
}
#ifdef KTEN_HARNESS_TORCH
at::Tensor torch_running(const at::Tensor& x, double base, double step) {
  return at::tensor(running_values(x.size(1), base, step), at::kDouble).to(x.scalar_type());
}
#endif

kten::DType other(kten::DType d) { return d == kten::float32 ? kten::float64 : kten::float32; }
#ifdef KTEN_HARNESS_TORCH
at::ScalarType other(at::ScalarType d) { return d == at::kFloat ? at::kDouble : at::kFloat; }
#endif


// --- Convolutions and padding (issue 31) ---------------------------------------------------------

// One convolution row's sizes (one value for every spatial axis).
struct ConvCase {
  int dims;
  std::int64_t k = 3, stride = 1, pad = 0, dil = 1, groups = 1, out_pad = 0;
  bool transposed = false;
  bool depthwise = false;  // one input channel per group
  std::int64_t channels = 0;  // per group, in and out, with rows 16 to 40 long: cpu()'s direct path (0: a few)
};

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }

// --- Attention (issue 52) -----------------------------------------------------------------------

// Query (..., L, E), key (..., S, E), value (..., S, Ev), with `masked` a float mask (L, S); the
// batch axes (none, (B) or (B, H)) shared, or the key and value's one head for every query head.
ShapeGen attention_shapes(bool masked) {
  return {masked ? 4 : 3, [masked](Rng& rng, const ShapeOptions& o) {
            std::int64_t e[4];  // L, S, E, Ev
            for (auto& x : e) x = o.large ? pick(rng, 16, 40) : pick(rng, 1, o.small ? 2 : 4);
            if (o.empty) e[pick(rng, 0, 3)] = 0;
            Shape batch;
            const std::int64_t axes = o.small ? pick(rng, 0, 1) : pick(rng, 0, 2);
            for (std::int64_t a = 0; a < axes; ++a) batch.push_back(o.large ? 2 : pick(rng, 1, 2));
            const auto with = [&](Shape b, std::int64_t rows, std::int64_t columns) {
              b.push_back(rows);
              b.push_back(columns);
              return b;
            };
            Shape kv_batch = batch;
            if (kv_batch.size() == 2 && pick(rng, 0, 1) == 0) kv_batch[1] = 1;  // one key/value head for all
            std::vector<Shape> shapes{with(batch, e[0], e[2]), with(kv_batch, e[1], e[2]), with(kv_batch, e[1], e[3])};
            if (masked) shapes.push_back({e[0], e[1]});
            return shapes;
          }};
}
// float32 attention: softmax's exponentials carry |score| u relative error into every weight, and
// the gradients of equal keys or values cancel to rounding noise of the terms' size.
constexpr double kAttentionRtol32 = 1e-4, kAttentionAtol32 = 1e-5;
// A boolean mask (L, S) that lets query i attend to key 0 and to keys j with (i + j) % 3 != 0.
kten::Tensor kten_allowed(const kten::Tensor& q, const kten::Tensor& k) {
  const kten::Tensor i = kten::arange(0, static_cast<double>(q.size(-2)), 1, q.device()).reshape({-1, 1});
  const kten::Tensor j = kten::arange(0, static_cast<double>(k.size(-2)), 1, q.device()).reshape({1, -1});
  const kten::Tensor r = (i + j) - kten::floor((i + j) / 3.0) * 3.0;
  return kten::gt(kten::eq(j, 0.0).astype(kten::float32) + kten::ne(r, 0.0).astype(kten::float32), 0.0);
}
#ifdef KTEN_HARNESS_TORCH
// PyTorch 1.13 has no F.scaled_dot_product_attention: its MultiheadAttention's arithmetic, the
// scale on the queries, a float bias added to the scores.
at::Tensor torch_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias) {
  const at::Tensor scores = at::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), k.transpose(-2, -1));
  return at::matmul(at::softmax(bias.defined() ? scores + bias : scores, -1), v);
}
at::Tensor torch_blocked(const at::Tensor& allowed, const at::Tensor& like) {
  return at::where(allowed, at::zeros({}, like.options()), at::full({}, -INFINITY, like.options()));
}
at::Tensor torch_allowed(const at::Tensor& q, const at::Tensor& k) {
  const at::Tensor i = at::arange(q.size(-2)).reshape({-1, 1}), j = at::arange(k.size(-2)).reshape({1, -1});
  return at::logical_or(j == 0, at::fmod(i + j, 3) != 0);
}
#endif

// x (N, C, spatial...), the weight ((C_out, C_in/g, k...), or (C_in, C_out/g, k...) transposed) and
// the bias (C_out): one item of one channel per group when small, 6,000 to 20,000 input elements
// when large, a batch of 0 when empty.
ShapeGen conv_shapes(ConvCase c, int arity = 3) {
  return {arity, [c, arity](Rng& rng, const ShapeOptions& o) {
            const std::int64_t span = c.dil * (c.k - 1) + 1;
            const std::int64_t least = c.transposed ? 1 : std::max<std::int64_t>(1, span - 2 * c.pad);
            std::int64_t n = o.small ? 1 : pick(rng, 1, 2), cin_g = o.small || c.depthwise ? 1 : pick(rng, 1, 3),
                         cout_g = o.small ? 1 : pick(rng, 1, 3);
            if (o.large) n = 2, cin_g = c.depthwise ? 1 : 4, cout_g = 4;
            std::int64_t extent = least + (o.small ? 0 : pick(rng, 0, 3)), last = extent + 1;
            if (c.channels > 0 && !o.small) {  // rows 16, 27 or 40 long: most take cpu()'s direct path on any ISA (direct_applies)
              cin_g = cout_g = c.channels;
              extent = least + pick(rng, 0, 1);
              last = std::vector<std::int64_t>{16, 27, 40}[static_cast<std::size_t>(pick(rng, 0, 2))];
            }
            if (o.large && c.channels == 0) {
              const double per_item = static_cast<double>(pick(rng, 6000, 20000)) / static_cast<double>(n * cin_g * c.groups);
              extent = std::max<std::int64_t>(least, static_cast<std::int64_t>(std::pow(per_item, 1.0 / c.dims)));
            }
            if (o.empty) n = 0;
            Shape x{n, cin_g * c.groups}, w{c.transposed ? cin_g * c.groups : cout_g * c.groups, c.transposed ? cout_g : cin_g};
            for (int a = 0; a < c.dims; ++a) {
              x.push_back(a == c.dims - 1 && !o.small && (!o.large || c.channels > 0) ? last : extent);
              w.push_back(c.k);
            }
            std::vector<Shape> shapes{x, w, {cout_g * c.groups}};
            shapes.resize(static_cast<std::size_t>(arity));
            return shapes;
          }};
}
// The registry's attributes of a ConvCase (see conv_ops() in src/ops/conv.cpp).
ops::OpAttrs conv_attrs(const ConvCase& c) {
  std::vector<std::int64_t> v;
  const auto add = [&](std::int64_t value) { v.insert(v.end(), static_cast<std::size_t>(c.dims), value); };
  add(c.stride);
  add(c.pad);
  if (c.transposed) {
    add(c.out_pad);
    v.push_back(c.groups);
    add(c.dil);
  } else {
    add(c.dil);
    v.push_back(c.groups);
  }
  return ints(v);
}
// A convolution multiplies the zero padding (and a transposed one the stride's gaps) by the weight,
// as the definition and PyTorch's float64 im2col path do: an infinite or NaN weight there gives NaN.
// PyTorch's oneDNN (float32) and its input gradient's col2im (and so conv_transpose) add nothing
// for those taps instead. Special values go into the data input only.
const char* const kConvSpecials = "a NaN or infinite weight times the zero padding is NaN in kten (as im2col), skipped by PyTorch's oneDNN and col2im";

Row conv_row(const std::string& label, const ConvCase& c) {
  const std::string name = (c.transposed ? "conv_transpose" : "conv") + std::to_string(c.dims) + "d";
#ifdef KTEN_HARNESS_TORCH
  TorchFn torch = [c](const TorchArgs& x) -> at::Tensor {
    const at::IntArrayRef s(c.stride), p(c.pad), d(c.dil), op(c.out_pad);
    if (c.transposed)
      return c.dims == 1 ? at::conv_transpose1d(x[0], x[1], x[2], s, p, op, c.groups, d)
             : c.dims == 2 ? at::conv_transpose2d(x[0], x[1], x[2], s, p, op, c.groups, d)
                           : at::conv_transpose3d(x[0], x[1], x[2], s, p, op, c.groups, d);
    return c.dims == 1 ? at::conv1d(x[0], x[1], x[2], s, p, d, c.groups)
           : c.dims == 2 ? at::conv2d(x[0], x[1], x[2], s, p, d, c.groups)
                         : at::conv3d(x[0], x[1], x[2], s, p, d, c.groups);
  };
#else
  TorchFn torch = nullptr;
#endif
  return reg(name, name + " " + label, conv_shapes(c), conv_attrs(c), std::move(torch)).sums().specials_in({0}, kConvSpecials);
}

// (N, C, spatial...) of `dims` spatial axes, each longer than `least` (reflect needs pad < size).
ShapeGen pad_shapes(int dims, std::int64_t least) {
  return {1, [dims, least](Rng& rng, const ShapeOptions& o) {
            Shape x{o.empty ? 0 : o.small ? 1 : o.large ? 2 : pick(rng, 1, 2), o.small ? 1 : o.large ? 3 : pick(rng, 1, 3)};
            for (int a = 0; a < dims; ++a) x.push_back(o.large ? (dims == 1 ? 1500 : dims == 2 ? 40 : 12) : least + (o.small ? 0 : pick(rng, 0, 3)));
            return std::vector<Shape>{x};
          }};
}
Row pad_row(int dims, std::vector<std::int64_t> pads, kten::nn::PaddingMode mode, double value = 0) {
  static const char* const names[] = {"constant", "reflect", "replicate", "circular"};
  const char* name = names[static_cast<int>(mode)];
  std::int64_t largest = 0;
  for (std::int64_t p : pads) largest = std::max(largest, p);
  ops::OpAttrs a = ints(pads);
  a.reals = {static_cast<double>(static_cast<int>(mode)), value};
  std::string label = std::string("pad ") + name + " " + std::to_string(dims) + "-d";
#ifdef KTEN_HARNESS_TORCH
  TorchFn torch = [pads, name, mode, value](const TorchArgs& x) {
    return mode == kten::nn::PaddingMode::zeros ? at::pad(x[0], pads, name, value) : at::pad(x[0], pads, name);
  };
#else
  TorchFn torch = nullptr;
  (void)value;
#endif
  return reg("pad", std::move(label), pad_shapes(dims, largest + 1), std::move(a), std::move(torch));
}

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
      reg("atan", broadcast(1), TORCH(at::atan(x[0]))),
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
      // Rounding (steps: a zero gradient, no finite differences) and remainders (no finite
      // differences: a jump wherever a / b is whole). kten's sign keeps NaN (NumPy's and ONNX's;
      // PyTorch 1.13 gives 0): its reference says so.
      reg("floor", broadcast(1), TORCH(at::floor(x[0]))).no_fd(),
      reg("ceil", broadcast(1), TORCH(at::ceil(x[0]))).no_fd(),
      reg("trunc", broadcast(1), TORCH(at::trunc(x[0]))).no_fd(),
      reg("round", broadcast(1), TORCH(at::round(x[0]))).no_fd(),
      reg("round", "round at halves", broadcast(1), {}, TORCH(at::round(x[0]))).on(Domain::ties).no_fd(),
      reg("sign", broadcast(1), TORCH(at::where(at::isnan(x[0]), x[0].detach(), at::sign(x[0])))).no_fd(),
      reg("fmod", broadcast(2), TORCH(at::fmod(x[0], x[1]))).no_fd(),
      reg("remainder", broadcast(2), TORCH(at::remainder(x[0], x[1]))).no_fd(),
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
      reg("argmin", broadcast(1), TORCH(at::argmin(x[0]))).no_empty(),
      reg("argmin_axis", "argmin(-1)", broadcast(1, 1), ints({-1}), TORCH(at::argmin(x[0], -1))).no_empty(),
      reg("argmin_axis", "argmin(0, keepdim)", broadcast(1, 1), ints({0}, true), TORCH(at::argmin(x[0], 0, true))).no_empty(),
      // Along one axis: running sums, and the k first in order (distinct values: PyTorch orders
      // ties as it likes, kten by index).
      reg("cumsum", "cumsum(-1)", broadcast(1, 1), ints({-1}), TORCH(at::cumsum(x[0], -1))).sums(),
      reg("cumsum", "cumsum(0)", broadcast(1, 1), ints({0}), TORCH(at::cumsum(x[0], 0))).sums(),
      op("topk(min(2, n), -1)", broadcast(1, 1), KTEN(std::get<0>(kten::topk(x[0], std::min<std::int64_t>(2, x[0].size(-1)), -1))),
         TORCH(std::get<0>(at::topk(x[0], std::min<std::int64_t>(2, x[0].size(-1)), -1)))).on(Domain::distinct).covers("topk"),
      op("topk(n, 0, smallest)", broadcast(1, 1), KTEN(std::get<0>(kten::topk(x[0], x[0].size(0), 0, false))),
         TORCH(std::get<0>(at::topk(x[0], x[0].size(0), 0, false)))).on(Domain::distinct).covers("topk")
          .no_special_grad("the planted infinities tie, and PyTorch orders ties as it likes: the same values, other positions"),
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
      op("einsum(ij,jk->ik)", matmul_shapes(), KTEN(kten::einsum("ij,jk->ik", {x[0], x[1]})), TORCH(at::einsum("ij,jk->ik", {x[0], x[1]})))
          .sums().covers("einsum"),
      op("einsum(...ij,jk->...ik)", batched_matmul_shapes(), KTEN(kten::einsum("...ij,jk->...ik", {x[0], x[1].ndim() == 2 ? x[1] : x[1].select(0, 0)})),
         TORCH(at::einsum("...ij,jk->...ik", {x[0], x[1].dim() == 2 ? x[1] : x[1].select(0, 0)}))).sums().covers("einsum"),
      op("einsum(...ij,...ij->...i)", same_shape(2, 2), KTEN(kten::einsum("...ij,...ij->...i", {x[0], x[1]})),
         TORCH(at::einsum("...ij,...ij->...i", {x[0], x[1]})))
          .sums().covers("einsum"),
      op("einsum(ii->i, ij->ji, ij)", matmul_shapes(),
         KTEN(kten::einsum("ii->i", {kten::matmul(x[0], x[0].transpose())}) + kten::einsum("ij->", {x[1]}) + kten::sum(kten::einsum("ij->ji", {x[0]}), 1)),
         TORCH(at::einsum("ii->i", {at::matmul(x[0], x[0].t())}) + at::einsum("ij->", {x[1]}) + at::einsum("ij->ji", {x[0]}).sum(1)))
          .sums().covers("einsum"),
      op("matmul(a, b.transpose())", matmul_shapes(), KTEN(kten::matmul(x[0], x[1].transpose().contiguous().transpose())),
         TORCH(at::matmul(x[0], x[1].t().contiguous().t()))).sums(),
      // Attention (issue 52): made of matmul and softmax; the reference is PyTorch's arithmetic.
      // Equal keys or values (expanded inputs) make gradients that are zero but for rounding,
      // |terms| u of the scores and softmax's sums: up to 2e-6 in float32 (kAttention32).
      reg("scaled_dot_product_attention", "scaled_dot_product_attention", attention_shapes(false), {},
          TORCH(torch_attention(x[0], x[1], x[2], {}))).sums().tol32(kAttentionRtol32, kAttentionAtol32),
      reg("scaled_dot_product_attention", "scaled_dot_product_attention(is_causal)", attention_shapes(false), reals_and_ints({0.0}, {1}),
          TORCH(torch_attention(x[0], x[1], x[2], torch_blocked(at::ones({x[0].size(-2), x[1].size(-2)}, at::kBool).tril(), x[0])))).sums().tol32(kAttentionRtol32, kAttentionAtol32),
      op("scaled_dot_product_attention(float mask)", attention_shapes(true), KTEN(kten::scaled_dot_product_attention(x[0], x[1], x[2], x[3])),
         TORCH(torch_attention(x[0], x[1], x[2], x[3]))).sums().tol32(kAttentionRtol32, kAttentionAtol32).covers("scaled_dot_product_attention"),
      op("scaled_dot_product_attention(boolean mask)", attention_shapes(false),
         KTEN(kten::scaled_dot_product_attention(x[0], x[1], x[2], kten_allowed(x[0], x[1]))),
         TORCH(torch_attention(x[0], x[1], x[2], torch_blocked(torch_allowed(x[0], x[1]), x[0])))).sums().tol32(kAttentionRtol32, kAttentionAtol32).covers("scaled_dot_product_attention"),
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
      reg("Tensor::view", "view(-1)", broadcast(1), ints({-1}), TORCH(x[0].view({-1}))),
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
      // --- Convolutions and padding (issue 31) ---
      conv_row("k3 pad 1", {1, 3, 1, 1}),
      conv_row("k3 stride 2 dilation 2 groups 2", {1, 3, 2, 0, 2, 2}),
      conv_row("3x3 pad 1", {2, 3, 1, 1}),
      conv_row("2x2 stride 2", {2, 2, 2, 0}),
      conv_row("3x3 pad 2 dilation 2 groups 3", {2, 3, 1, 2, 2, 3}),
      conv_row("depthwise 3x3 pad 1", {2, 3, 1, 1, 1, 4, 0, false, true}),
      conv_row("2x2x2 pad 1", {3, 2, 1, 1}),
      conv_row("3x3x3 pad 1 stride 2", {3, 3, 2, 1}),
      conv_row("stride 2 pad 1 output_padding 1", {1, 3, 2, 1, 1, 1, 1, true}),
      conv_row("k4 dilation 2 groups 2", {1, 4, 1, 0, 2, 2, 0, true}),
      conv_row("3x3 stride 2 pad 1 output_padding 1", {2, 3, 2, 1, 1, 1, 1, true}),
      conv_row("2x2 stride 2 groups 2", {2, 2, 2, 0, 1, 2, 0, true}),
      conv_row("2x2x2 stride 2", {3, 2, 2, 0, 1, 1, 0, true}),
      conv_row("3x3x3 pad 1 dilation 2 output_padding 1", {3, 3, 1, 1, 2, 1, 1, true}),
      // cpu()'s direct path: the forward and the transposed forward, with their input gradients
      conv_row("k5 pad 2 dilation 2 groups 2, 8 channels a group", {1, 5, 1, 2, 2, 2, 0, false, false, 8}),
      conv_row("3x3 pad 1, 8 channels", {2, 3, 1, 1, 1, 1, 0, false, false, 8}),
      conv_row("3x3x3 pad 1, 8 channels", {3, 3, 1, 1, 1, 1, 0, false, false, 8}),
      conv_row("3x3 pad 1, 9 channels", {2, 3, 1, 1, 1, 1, 0, true, false, 9}),
      conv_row("2x2x2 pad 0, 8 channels", {3, 2, 1, 0, 1, 1, 0, true, false, 8}),
      conv_row("3x3 pad 3, 8 channels (the input gradient crops dY)", {2, 3, 1, 3, 1, 1, 0, false, false, 8}),
      // cpu()'s Winograd path (at least 32 channels): the forward and input gradient, transposed too
      conv_row("3x3 pad 1, 32 channels", {2, 3, 1, 1, 1, 1, 0, false, false, 32}),
      conv_row("3x3x3 pad 1, 32 channels", {3, 3, 1, 1, 1, 1, 0, false, false, 32}),
      conv_row("3x3 pad 1, 32 channels", {2, 3, 1, 1, 1, 1, 0, true, false, 32}),
      op("conv2d stride 2 along rows, 8 channels", conv_shapes({2, 3, 1, 1, 1, 1, 0, false, false, 8}),
         KTEN(kten::conv2d(x[0], x[1], x[2], {2, 1}, {1})), TORCH(at::conv2d(x[0], x[1], x[2], {2, 1}, 1)))
          .sums().specials_in({0}, kConvSpecials).covers("conv2d"),
      op("conv2d without bias", conv_shapes({2, 3, 1, 1}, 2), KTEN(kten::conv2d(x[0], x[1], {}, {1}, {1})),
         TORCH(at::conv2d(x[0], x[1], {}, 1, 1))).sums().specials_in({0}, kConvSpecials).covers("conv2d"),
      op("conv_transpose2d without bias", conv_shapes({2, 3, 2, 1, 1, 1, 1, true}, 2),
         KTEN(kten::conv_transpose2d(x[0], x[1], {}, {2}, {1}, {1})), TORCH(at::conv_transpose2d(x[0], x[1], {}, 2, 1, 1)))
          .sums().specials_in({0}, kConvSpecials).covers("conv_transpose2d"),
      op("conv2d (rows, columns: stride, padding per axis)", conv_shapes({2, 3, 1, 0}), KTEN(kten::conv2d(x[0], x[1], x[2], {1, 2}, {1, 0})),
         TORCH(at::conv2d(x[0], x[1], x[2], {1, 2}, {1, 0}))).sums().specials_in({0}, kConvSpecials).covers("conv2d"),
      pad_row(1, {2, 1}, kten::nn::PaddingMode::zeros, 0.5),
      pad_row(2, {1, 2, 0, 1}, kten::nn::PaddingMode::zeros),
      pad_row(1, {2, 1}, kten::nn::PaddingMode::reflect),
      pad_row(2, {1, 2, 2, 1}, kten::nn::PaddingMode::reflect),
      pad_row(3, {1, 1, 1, 1, 1, 1}, kten::nn::PaddingMode::reflect),
      pad_row(1, {3, 1}, kten::nn::PaddingMode::replicate),
      pad_row(2, {1, 2, 2, 1}, kten::nn::PaddingMode::replicate),
      pad_row(3, {1, 0, 2, 1, 0, 1}, kten::nn::PaddingMode::replicate),
      pad_row(1, {2, 1}, kten::nn::PaddingMode::circular),
      pad_row(2, {1, 2, 2, 1}, kten::nn::PaddingMode::circular),
      pad_row(3, {1, 1, 1, 0, 1, 1}, kten::nn::PaddingMode::circular),
      // Pooling and resampling (issue 31 item 2): kernel, stride and padding as ints, then
      // avg_pool's ceil_mode and count_include_pad; interpolate's size (or scale) then mode and
      // align_corners. Max pooling draws distinct values (the registry's domain), and a row with ties.
      reg("max_pool1d", "max_pool1d(3, 2, 1)", grid_shapes(1, 2, true), ints({3, 2, 1}), TORCH(at::max_pool1d(x[0], {3}, {2}, {1}))),
      reg("max_pool2d", "max_pool2d(2)", grid_shapes(2, 2, true), ints({2, 2, 0}), TORCH(at::max_pool2d(x[0], {2, 2}, {2, 2}, {0, 0}))),
      reg("max_pool2d", "max_pool2d((3, 2), 1, (1, 0))", grid_shapes(2, 3, true), ints({3, 2, 1, 1, 1, 0}),
          TORCH(at::max_pool2d(x[0], {3, 2}, {1, 1}, {1, 0}))),
      reg("max_pool2d", "max_pool2d(2, 1) with ties", grid_shapes(2, 2), ints({2, 1, 0}), TORCH(at::max_pool2d(x[0], {2, 2}, {1, 1}, {0, 0})))
          .on(Domain::ties).no_fd(),
      reg("max_pool3d", "max_pool3d(2, (1, 2, 2), 1)", grid_shapes(3, 2, true), ints({2, 2, 2, 1, 2, 2, 1, 1, 1}),
          TORCH(at::max_pool3d(x[0], {2, 2, 2}, {1, 2, 2}, {1, 1, 1}))),
      reg("avg_pool1d", "avg_pool1d(3, 2, 1)", grid_shapes(1, 2, true), ints({3, 2, 1, 0, 1}),
          TORCH(at::avg_pool1d(x[0], {3}, {2}, {1}, false, true))),
      reg("avg_pool1d", "avg_pool1d(3, 2, 1, ceil_mode, exclude pad)", grid_shapes(1, 2, true), ints({3, 2, 1, 1, 0}),
          TORCH(at::avg_pool1d(x[0], {3}, {2}, {1}, true, false))),
      reg("avg_pool2d", "avg_pool2d(2)", grid_shapes(2, 2, true), ints({2, 2, 0, 0, 1}),
          TORCH(at::avg_pool2d(x[0], {2, 2}, {2, 2}, {0, 0}, false, true))),
      reg("avg_pool2d", "avg_pool2d(3, 2, 1, ceil_mode)", grid_shapes(2, 2, true), ints({3, 2, 1, 1, 1}),
          TORCH(at::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true, true))),
      reg("avg_pool2d", "avg_pool2d((3, 2), (2, 1), (1, 0), exclude pad)", grid_shapes(2, 3, true), ints({3, 2, 2, 1, 1, 0, 0, 0}),
          TORCH(at::avg_pool2d(x[0], {3, 2}, {2, 1}, {1, 0}, false, false))),
      reg("avg_pool3d", "avg_pool3d(2, 2, 1, ceil_mode, exclude pad)", grid_shapes(3, 2, true), ints({2, 2, 1, 1, 0}),
          TORCH(at::avg_pool3d(x[0], {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, true, false))),
      reg("avg_pool3d", "avg_pool3d(2, 1)", grid_shapes(3, 2, true), ints({2, 1, 0, 0, 1}),
          TORCH(at::avg_pool3d(x[0], {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, false, true))),
      reg("adaptive_avg_pool1d", "adaptive_avg_pool1d(3)", grid_shapes(1, 1, true), ints({3}), TORCH(at::adaptive_avg_pool1d(x[0], {3}))).sums(),
      reg("adaptive_avg_pool2d", "adaptive_avg_pool2d((2, 3))", grid_shapes(2, 1, true), ints({2, 3}),
          TORCH(at::adaptive_avg_pool2d(x[0], {2, 3}))).sums(),
      reg("adaptive_avg_pool2d", "adaptive_avg_pool2d(1)", grid_shapes(2, 1, true), ints({1}), TORCH(at::adaptive_avg_pool2d(x[0], {1, 1}))).sums(),
      reg("adaptive_avg_pool3d", "adaptive_avg_pool3d((2, 1, 3))", grid_shapes(3, 1, true), ints({2, 1, 3}),
          TORCH(at::adaptive_avg_pool3d(x[0], {2, 1, 3}))).sums(),
      reg("interpolate_size", "interpolate(size 5, nearest)", grid_shapes(1, 1), ints({5, 0, 0}), TORCH(at::upsample_nearest1d(x[0], at::IntArrayRef{5}))),
      reg("interpolate_size", "interpolate(size (3, 5), nearest)", grid_shapes(2, 1), ints({3, 5, 0, 0}),
          TORCH(at::upsample_nearest2d(x[0], at::IntArrayRef{3, 5}))),
      reg("interpolate_scale", "interpolate(scale 2, nearest)", grid_shapes(2, 1), reals_and_ints({2.0}, {0, 0}),
          TORCH(at::upsample_nearest2d(x[0], c10::nullopt, at::ArrayRef<double>({2.0, 2.0})))),
      reg("interpolate_scale", "interpolate(scale (1.5, 0.7, 2.5), nearest)", grid_shapes(3, 2), reals_and_ints({1.5, 0.7, 2.5}, {0, 0}),
          TORCH(at::upsample_nearest3d(x[0], c10::nullopt, at::ArrayRef<double>({1.5, 0.7, 2.5})))),
      reg("interpolate_size", "interpolate(size 7, linear)", grid_shapes(1, 1), ints({7, 1, 0}), TORCH(at::upsample_linear1d(x[0], at::IntArrayRef{7}, false))).float64_reference(kLinear32),
      reg("interpolate_size", "interpolate(size 7, linear, align_corners)", grid_shapes(1, 1), ints({7, 1, 1}),
          TORCH(at::upsample_linear1d(x[0], at::IntArrayRef{7}, true))).float64_reference(kLinear32),
      reg("interpolate_scale", "interpolate(scale 2, bilinear)", grid_shapes(2, 1), reals_and_ints({2.0}, {2, 0}),
          TORCH(at::upsample_bilinear2d(x[0], c10::nullopt, false, at::ArrayRef<double>({2.0, 2.0})))).float64_reference(kLinear32),
      reg("interpolate_scale", "interpolate(scale (0.6, 1.7), bilinear)", grid_shapes(2, 2), reals_and_ints({0.6, 1.7}, {2, 0}),
          TORCH(at::upsample_bilinear2d(x[0], c10::nullopt, false, at::ArrayRef<double>({0.6, 1.7})))).float64_reference(kLinear32),
      reg("interpolate_size", "interpolate(size (4, 3), bilinear, align_corners)", grid_shapes(2, 1), ints({4, 3, 2, 1}),
          TORCH(at::upsample_bilinear2d(x[0], at::IntArrayRef{4, 3}, true))).float64_reference(kLinear32),
      reg("interpolate_size", "interpolate(size (3, 4, 2), trilinear)", grid_shapes(3, 1), ints({3, 4, 2, 3, 0}),
          TORCH(at::upsample_trilinear3d(x[0], at::IntArrayRef{3, 4, 2}, false))).float64_reference(kLinear32),
      reg("interpolate_scale", "interpolate(scale 1.5, trilinear, align_corners)", grid_shapes(3, 2), reals_and_ints({1.5}, {3, 1}),
          TORCH(at::upsample_trilinear3d(x[0], c10::nullopt, true, at::ArrayRef<double>({1.5, 1.5, 1.5})))).float64_reference(kLinear32),
      // --- issue 31 (normalisation): x (N, C, ...), weight and bias (C); running statistics built
      // per call (kten_running), so that training's in-place updates start afresh.
      normalisation(op("batch_norm (training)", channels_first(2, 5),
         KTEN(kten::batch_norm(x[0], kten_running(x[0], -0.2, 0.1), kten_running(x[0], 0.5, 0.25), x[1], x[2], true, 0.1, 1e-5)),
         TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_running(x[0], -0.2, 0.1), torch_running(x[0], 0.5, 0.25), true, 0.1, 1e-5, false)))
          .covers("batch_norm")),
      normalisation(op("batch_norm (training, no affine, no running statistics)", input_only(channels_first(2, 4)),
         KTEN(kten::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)), TORCH(at::batch_norm(x[0].contiguous(), {}, {}, {}, {}, true, 0.1, 1e-5, false)))
          .covers("batch_norm")),
      normalisation(op("batch_norm (eval)", channels_first(2, 5),
         KTEN(kten::batch_norm(x[0], kten_running(x[0], -0.2, 0.1), kten_running(x[0], 0.5, 0.25), x[1], x[2], false, 0.1, 1e-5)),
         TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_running(x[0], -0.2, 0.1), torch_running(x[0], 0.5, 0.25), false, 0.1, 1e-5, false)))
          .covers("batch_norm")),
      normalisation(op("group_norm(2 groups)", channels_first(2, 5, 2), KTEN(kten::group_norm(x[0], 2, x[1], x[2], 1e-5)),
         TORCH(at::group_norm(x[0], 2, x[1], x[2], 1e-5, false))).covers("group_norm")),
      normalisation(op("group_norm(1 group, eps 0.1)", channels_first(3, 4), KTEN(kten::group_norm(x[0], 1, x[1], x[2], 0.1)),
         TORCH(at::group_norm(x[0], 1, x[1], x[2], 0.1, false))).covers("group_norm")),
      // PyTorch 1.13's instance_norm throws on an empty batch (select() out of range); kten returns
      // the empty result, so those cases are left out.
      normalisation(op("instance_norm", channels_first(3, 5),
         KTEN(kten::instance_norm(x[0], kten_running(x[0], -0.2, 0.1), kten_running(x[0], 0.5, 0.25), x[1], x[2], true, 0.1, 1e-5)),
         TORCH(at::instance_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_running(x[0], -0.2, 0.1), torch_running(x[0], 0.5, 0.25), true, 0.1, 1e-5, false)))
          .covers("instance_norm")).no_empty(),
      normalisation(op("instance_norm (running statistics)", channels_first(3, 4),
         KTEN(kten::instance_norm(x[0], kten_running(x[0], -0.2, 0.1), kten_running(x[0], 0.5, 0.25), x[1], x[2], false, 0.1, 1e-5)),
         TORCH(at::instance_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_running(x[0], -0.2, 0.1), torch_running(x[0], 0.5, 0.25), false, 0.1, 1e-5, false)))
          .covers("instance_norm")).no_empty(),
      reg("leaky_relu", broadcast(1), TORCH(at::leaky_relu(x[0], 0.01))),
      reg("leaky_relu", "leaky_relu(0.2)", broadcast(1), reals({0.2}), TORCH(at::leaky_relu(x[0], 0.2))),
      reg("leaky_relu", "leaky_relu at 0", broadcast(1), reals({0.2}), TORCH(at::leaky_relu(x[0], 0.2))).on(Domain::zeros).no_fd(),
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
