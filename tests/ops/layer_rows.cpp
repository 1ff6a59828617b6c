// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten's layers and losses against the reference (kten on cpu() in float64, or PyTorch): one row
// each, run by the same engine as the ops (values, gradients of every input, strided, empty,
// NaN/inf and large cases, finite differences). A layer's
// parameters are inputs of its row, copied into both sides: the kten layer's parameter slots take
// the harness's tensors, and PyTorch's functional form of torch::nn's module (at::layer_norm,
// at::linear, at::huber_loss, ...: what the module's forward calls) takes the same values.
#include <algorithm>
#include <random>

#include "harness.hpp"

namespace kten::harness {
namespace {

// `layer` on x[0]'s device with its parameters replaced by x[1], x[2], ... (named_parameters()
// order), so the harness's gradients reach them.
template <class Layer>
kten::Tensor apply(Layer layer, const KtenArgs& x) {
  layer.to(x[0].device());
  const auto params = layer.named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) params[i].slot->value = x[i + 1];
  return layer(x[0]);
}

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }

// Rows and columns of a 2-D input: up to 3 x 4 when small (finite differences), 6,000 to 20,000
// elements when large; an empty case has no rows (a layer with no features does not exist).
std::pair<std::int64_t, std::int64_t> rows_and_columns(Rng& rng, const ShapeOptions& o) {
  if (o.large) return {pick(rng, 100, 250), pick(rng, 60, 80)};
  return {o.empty ? 0 : pick(rng, 1, o.small ? 3 : 5), pick(rng, 1, o.small ? 4 : 6)};
}

// (..., F) with a batch of 0 to 2 axes, then LayerNorm's (F) weight and bias.
ShapeGen layer_norm_shapes() {
  return {3, [](Rng& rng, const ShapeOptions& o) {
            const auto [rows, features] = rows_and_columns(rng, o);
            Shape x{rows, features};
            if (!o.large && !o.small && pick(rng, 0, 2) == 0) x = {2, rows, features};
            if (!o.empty && pick(rng, 0, 3) == 0) x = {features};
            return std::vector<Shape>{x, {features}, {features}};
          }};
}

// (N, in), Linear's (out, in) weight and (out) bias.
ShapeGen linear_shapes() {
  return {3, [](Rng& rng, const ShapeOptions& o) {
            const auto [rows, in] = rows_and_columns(rng, o);
            const std::int64_t out = o.large ? pick(rng, 60, 80) : pick(rng, 1, o.small ? 3 : 5);
            return std::vector<Shape>{{rows, in}, {out, in}, {out}};
          }};
}

// (N, C) class scores.
ShapeGen class_scores() {
  return {1, [](Rng& rng, const ShapeOptions& o) {
            const auto [rows, classes] = rows_and_columns(rng, o);
            return std::vector<Shape>{{rows, classes}};
          }};
}

// The class of row i out of c: every class appears, in no simple order.
std::vector<std::int64_t> classes_for(std::int64_t rows, std::int64_t c) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < rows; ++i) out.push_back((3 * i + 1) % c);
  return out;
}
kten::Tensor kten_classes(const kten::Tensor& scores) {
  return kten::tensor(classes_for(scores.size(0), scores.size(1)), scores.device());
}
#ifdef KTEN_HARNESS_TORCH
at::Tensor torch_classes(const at::Tensor& scores) {
  return at::tensor(classes_for(scores.size(0), scores.size(1)), at::kLong);
}
#endif

// A row holding an infinity has an infinite or NaN mean, so (x - mean) / std is NaN throughout;
// PyTorch's fused x * scale + shift gives some elements +-inf instead, depending on the order of
// its operations.
// PyTorch 1.13's float32 layer_norm on the CPU computes x * scale + shift with scale = weight /
// sqrt(var + eps): for a constant row (var 0) the two terms cancel, and their rounding leaves up to
// about 2e-5 where the exact result is the bias (kten's, which subtracts the mean first).
const char* const kLayerNorm32 = "PyTorch's float32 layer_norm is off by up to 2e-5 on constant rows, where x * scale + shift cancels";
// float32 gradients of LayerNorm hold absolute errors of a few n u on terms of size 1: its weight
// and bias gradients are sums over up to 250 rows (the large cases), and its input gradient
// g - mean(g) - x^ mean(g x^) cancels to small values for few features.
constexpr double kLayerNormAtol32 = 5e-5;
const char* const kLayerNormAtInf = "a row holding an infinity normalises to NaN in kten; PyTorch's fused formula leaves some elements infinite";


// --- Convolution layers (issue 31) ---------------------------------------------------------------

// x (N, C_in, spatial...) of `dims` axes each at least `least`, the weight (C_out, C_in, k...), or
// (C_in, C_out, k...) transposed, and the bias (C_out).
ShapeGen conv_layer_shapes(int dims, std::int64_t k, std::int64_t least, bool transposed) {
  return {3, [=](Rng& rng, const ShapeOptions& o) {
            const std::int64_t n = o.empty ? 0 : o.small ? 1 : 2, cin = o.small ? 1 : pick(rng, 1, 3), cout = o.small ? 1 : pick(rng, 1, 3);
            std::int64_t extent = least + (o.small ? 0 : pick(rng, 0, 2));
            if (o.large) extent = std::max<std::int64_t>(least, dims == 1 ? 2000 : dims == 2 ? 45 : 13);
            Shape x{n, o.large ? 3 : cin}, w{transposed ? x[1] : cout, transposed ? cout : x[1]};
            for (int a = 0; a < dims; ++a) x.push_back(extent), w.push_back(k);
            return std::vector<Shape>{x, w, {transposed ? w[1] : w[0]}};
          }};
}

// A convolution multiplies the zero padding by the weight (NaN for an infinite or NaN weight), as
// im2col does; PyTorch's oneDNN and col2im skip those taps: special values go into x only.
const char* const kConvSpecials = "a NaN or infinite weight times the zero padding is NaN in kten (as im2col), skipped by PyTorch's oneDNN and col2im";

// The layer of `dims` axes for x[0] and x[1]'s channels and kernel, its parameters then replaced
// by x[1] and x[2].
kten::Tensor conv_layer(int dims, kten::nn::PaddingMode mode, std::int64_t stride, std::int64_t padding, const KtenArgs& x) {
  kten::nn::ConvOptions o;
  o.stride = {stride};
  o.padding = {padding};
  o.padding_mode = mode;
  o.dtype = x[0].dtype();
  o.seed = 0;
  const kten::Shape k{x[1].size(2)};
  if (dims == 1) return apply(kten::nn::Conv1d(x[0].size(1), x[1].size(0), k, o), x);
  if (dims == 2) return apply(kten::nn::Conv2d(x[0].size(1), x[1].size(0), k, o), x);
  return apply(kten::nn::Conv3d(x[0].size(1), x[1].size(0), k, o), x);
}
kten::Tensor conv_transpose_layer(int dims, std::int64_t stride, std::int64_t padding, std::int64_t output_padding, const KtenArgs& x) {
  kten::nn::ConvTransposeOptions o;
  o.stride = {stride};
  o.padding = {padding};
  o.output_padding = {output_padding};
  o.dtype = x[0].dtype();
  o.seed = 0;
  const kten::Shape k{x[1].size(2)};
  if (dims == 1) return apply(kten::nn::ConvTranspose1d(x[0].size(1), x[1].size(1), k, o), x);
  if (dims == 2) return apply(kten::nn::ConvTranspose2d(x[0].size(1), x[1].size(1), k, o), x);
  return apply(kten::nn::ConvTranspose3d(x[0].size(1), x[1].size(1), k, o), x);
}
// Pooling and resampling layers (issue 31 item 2): their options.
kten::nn::PoolOptions pool_options(Shape stride, Shape padding, bool ceil_mode, bool count_include_pad) {
  kten::nn::PoolOptions o;
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.ceil_mode = ceil_mode;
  o.count_include_pad = count_include_pad;
  return o;
}
kten::nn::UpsampleOptions upsample(Shape size, std::vector<double> scale, kten::nn::InterpolateMode mode, bool align_corners) {
  kten::nn::UpsampleOptions o;
  o.size = std::move(size);
  o.scale_factor = std::move(scale);
  o.mode = mode;
  o.align_corners = align_corners;
  return o;
}
using kten::nn::InterpolateMode;
// PyTorch's float32 linear, bilinear and trilinear compute their scale in float32, so a source
// index near a whole number may fall on the other side of it; kten computes the sources in double
// in both dtypes (and reads the taps float64 reads).
const char* const kLinear32 = "PyTorch's float32 linear interpolation computes its scale in float32, kten in double";
// --- issue 31 (normalisation and small layers) ---
// BatchNorm's options in the input's dtype.
kten::nn::BatchNormOptions batch_norm_options(const kten::Tensor& x) {
  kten::nn::BatchNormOptions o;
  o.dtype = x.dtype();
  return o;
}
// A BatchNorm layer of the input's channels, in evaluation mode (its running statistics 0 and 1).
template <class Layer>
Layer evaluating(Layer layer) {
  layer.eval();
  return layer;
}
#ifdef KTEN_HARNESS_TORCH
// A new layer's running statistics: zeros and ones of x's channels.
at::Tensor torch_zeros(const at::Tensor& x) { return at::zeros({x.size(1)}, x.options()); }
at::Tensor torch_ones(const at::Tensor& x) { return at::ones({x.size(1)}, x.options()); }
#endif

// --- Graph layers: Embedding ---------------------------------------------------------------------
// Embedding's table is x[0] (its "weight" parameter); the indices, (2, num + 1) with every row used,
// are built on each side: (3 p + 1) mod num at position p.
std::vector<std::int64_t> embedding_rows(std::int64_t num) {
  std::vector<std::int64_t> v;
  for (std::int64_t p = 0; p < 2 * (num + 1); ++p) v.push_back((3 * p + 1) % num);
  return v;
}
kten::Tensor apply_embedding(const KtenArgs& x) {
  kten::nn::Embedding layer(x[0].size(0), x[0].size(1), x[0].dtype(), 1);
  layer.to(x[0].device());
  layer.named_parameters()[0].slot->value = x[0];
  return layer(kten::tensor(embedding_rows(x[0].size(0)), {2, x[0].size(0) + 1}, x[0].device()));
}
// (num, dim): up to 3 rows of up to 4 features; large: up to 80 x 60; empty: no features.
ShapeGen embedding_table() {
  return {1, [](Rng& rng, const ShapeOptions& o) {
            if (o.large) return std::vector<Shape>{{pick(rng, 40, 80), pick(rng, 40, 60)}};
            return std::vector<Shape>{{pick(rng, 1, 3), o.empty ? 0 : pick(rng, 1, o.small ? 2 : 4)}};
          }};
}
// --- end of graph layers -------------------------------------------------------------------------

// --- Recurrent layers (issue 52) -------------------------------------------------------------------
// A recurrent layer's input, (L, N, in) ((N, L, in) batch_first), then per layer and direction its
// (gates H, in or directions H) weight_ih, (gates H, H) weight_hh and, with bias, two (gates H)
// biases: named_parameters()' order, and at::lstm's and at::gru's. Small: H = 1 (at most 12
// elements per input); empty: no batch.
ShapeGen recurrent_shapes(std::int64_t gates, int layers, int directions, bool bias, bool batch_first) {
  const int per_direction = bias ? 4 : 2;
  return {1 + per_direction * layers * directions, [=](Rng& rng, const ShapeOptions& o) {
            const std::int64_t steps = o.large ? pick(rng, 3, 5) : pick(rng, 1, o.small ? 2 : 4);
            const std::int64_t batch = o.large ? pick(rng, 30, 50) : o.empty ? 0 : pick(rng, 1, o.small ? 2 : 3);
            const std::int64_t in = o.large ? pick(rng, 20, 30) : pick(rng, 1, 3);
            const std::int64_t hidden = o.large ? pick(rng, 16, 24) : o.small ? 1 : pick(rng, 1, 3);
            std::vector<Shape> shapes{batch_first ? Shape{batch, steps, in} : Shape{steps, batch, in}};
            for (int layer = 0; layer < layers; ++layer)
              for (int d = 0; d < directions; ++d) {
                shapes.push_back({gates * hidden, layer == 0 ? in : directions * hidden});
                shapes.push_back({gates * hidden, hidden});
                if (bias) shapes.insert(shapes.end(), 2, Shape{gates * hidden});
              }
            return shapes;
          }};
}
// float32 recurrences compound their rounding: each step's state (and its gradient) goes through
// the next step's products and gates, each layer through the next, so the large cases (5 steps,
// 2 layers, 2 directions, 50 x 30 inputs) differ from float64 by up to 4e-3 relative where the
// gradients cancel; float64 keeps the default tolerances.
constexpr double kRecurrentRtol32 = 5e-3, kRecurrentAtol32 = 1e-3;
kten::nn::RNNOptions rnn_options(const kten::Tensor& x, int layers, bool bidirectional, bool bias, bool batch_first) {
  kten::nn::RNNOptions o;
  o.num_layers = layers;
  o.bias = bias;
  o.batch_first = batch_first;
  o.bidirectional = bidirectional;
  o.dtype = x.dtype();
  o.seed = 0;
  return o;
}
#ifdef KTEN_HARNESS_TORCH
// A zero initial state, (layers x directions, N, H), for x[0] with weight_hh x[2].
at::Tensor torch_state(const TorchArgs& x, int layers_x_directions, bool batch_first) {
  return at::zeros({layers_x_directions, x[0].size(batch_first ? 0 : 1), x[2].size(1)}, x[0].options());
}
std::vector<at::Tensor> torch_parameters(const TorchArgs& x) { return {x.begin() + 1, x.end()}; }
#endif

// --- Attention layers (issue 52) ------------------------------------------------------------------

constexpr std::int64_t kHeads = 2;
// x (L, N, E) with E = 2 heads x d, MultiheadAttention's in_proj_weight (3E, E), in_proj_bias (3E),
// out_proj's weight (E, E) and bias (E); with `encoder`, then TransformerEncoderLayer's linear1 (F,
// E) and (F), linear2 (E, F) and (E), and norm1's and norm2's weight and bias (E).
ShapeGen attention_layer_shapes(bool encoder) {
  return {encoder ? 13 : 5, [encoder](Rng& rng, const ShapeOptions& o) {
            const std::int64_t steps = o.large ? pick(rng, 20, 30) : pick(rng, 1, o.small ? 2 : 4);
            const std::int64_t batch = o.large ? pick(rng, 3, 5) : o.empty ? 0 : pick(rng, 1, o.small ? 1 : 2);
            const std::int64_t e = kHeads * (o.large ? pick(rng, 8, 12) : o.small ? 1 : pick(rng, 1, 2));
            const std::int64_t f = o.large ? pick(rng, 24, 40) : pick(rng, 1, o.small ? 2 : 4);
            std::vector<Shape> shapes{{steps, batch, e}, {3 * e, e}, {3 * e}, {e, e}, {e}};
            if (encoder) {
              for (const Shape& p : std::vector<Shape>{{f, e}, {f}, {e, f}, {e}, {e}, {e}, {e}, {e}}) shapes.push_back(p);
            }
            return shapes;
          }};
}
// The harness's inputs are of size 1; in_proj_weight is scaled to the size of PyTorch's
// initialisation (Xavier-uniform, standard deviation sqrt(1 / 2E)) on both sides, so that the
// scores stay of the size training sees instead of saturating the softmax.
template <class Args>
Args xavier_scaled(Args x) {
  x[1] = x[1] * std::sqrt(1.0 / (2.0 * static_cast<double>(x[0].size(2))));
  return x;
}
template <class Layer>
kten::Tensor apply_xavier_scaled(Layer layer, const KtenArgs& x) {
  const KtenArgs scaled = xavier_scaled(x);
  return apply(std::move(layer), scaled);
}
kten::nn::MultiheadAttention attention_layer(const kten::Tensor& x) {
  kten::nn::MultiheadAttentionOptions o;
  o.dtype = x.dtype();
  o.seed = 0;
  return kten::nn::MultiheadAttention(x.size(2), kHeads, o);
}
kten::nn::TransformerEncoderLayer encoder_layer(const KtenArgs& x, bool norm_first, const char* activation) {
  kten::nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = x[5].size(0);
  o.activation = activation;
  o.norm_first = norm_first;
  o.dtype = x[0].dtype();
  o.seed = 0;
  return kten::nn::TransformerEncoderLayer(x[0].size(2), kHeads, o);
}
// float32 attention is within 1e-3 of the float64 result once in_proj_weight has the size of
// PyTorch's initialisation (xavier_scaled; with weights of size 1 the scores reach hundreds and
// the saturated softmax leaves PyTorch's own float32 0.6 off). The key bias' gradient is zero
// (softmax ignores a constant added to a row's scores), so there both compute rounding noise; the
// encoder's post-norm multiplies it by 1 / sqrt(var + eps), up to 316 on the expanded (constant)
// steps: up to 2.4e-2 in 36,000 cases (--cases 300). float64 (where the same noise is 5e-11) and
// the finite differences keep the values tight.
constexpr double kAttentionRtol32 = 1e-3, kAttentionAtol32 = 1e-3, kEncoderAtol32 = 3e-2;
constexpr double kAttentionRtol64 = 1e-10, kAttentionAtol64 = 1e-9;
const char* const kAttention32 = "PyTorch's float32 gradients are rounding noise where kten's float64 gives the key bias' zero";
#ifdef KTEN_HARNESS_TORCH
// torch.nn.functional.multi_head_attention_forward's arithmetic on x[0] (L, N, E) as query, key
// and value, with the parameters x[1..4]: heads as (N x heads, L, d), batch-major within.
at::Tensor torch_self_attention(const at::Tensor& src, const TorchArgs& x) {
  const std::int64_t l = src.size(0), n = src.size(1), e = src.size(2), d = e / kHeads;
  const std::vector<at::Tensor> qkv = at::linear(src, x[1], x[2]).chunk(3, -1);
  const auto heads = [&](const at::Tensor& t) { return t.contiguous().view({l, n * kHeads, d}).transpose(0, 1); };
  const at::Tensor q = heads(qkv[0]) / std::sqrt(static_cast<double>(d));
  const at::Tensor w = at::softmax(at::bmm(q, heads(qkv[1]).transpose(1, 2)), -1);
  const at::Tensor out = at::bmm(w, heads(qkv[2])).transpose(0, 1).contiguous().view({l, n, e});
  return at::linear(out, x[3], x[4]);
}
// torch.nn.TransformerEncoderLayer's forward in evaluation mode (no dropout).
at::Tensor torch_encoder_layer(const TorchArgs& x, bool norm_first, bool gelu) {
  const std::int64_t e = x[0].size(2);
  const auto norm = [&](const at::Tensor& t, int i) { return at::layer_norm(t, {e}, x[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i + 1)], 1e-5); };
  const auto ff = [&](const at::Tensor& t) {
    const at::Tensor hidden = at::linear(t, x[5], x[6]);
    return at::linear(gelu ? at::gelu(hidden) : at::relu(hidden), x[7], x[8]);
  };
  at::Tensor h = x[0];
  if (norm_first) {
    h = h + torch_self_attention(norm(h, 9), x);
    return h + ff(norm(h, 11));
  }
  h = norm(h + torch_self_attention(h, x), 9);
  return norm(h + ff(h), 11);
}
#endif
}  // namespace

std::vector<Row> layer_table() {
  const Domain nonzero = Domain::nonzero;
  return {
      // Activations (torch::nn::ReLU, Tanh, ... call these).
      Row("nn::ReLU", broadcast(1), KTEN(apply(kten::nn::ReLU(), x)), TORCH(at::relu(x[0]))).on(nonzero),
      Row("nn::Tanh", broadcast(1), KTEN(apply(kten::nn::Tanh(), x)), TORCH(at::tanh(x[0]))),
      Row("nn::Sigmoid", broadcast(1), KTEN(apply(kten::nn::Sigmoid(), x)), TORCH(at::sigmoid(x[0]))),
      Row("nn::GELU", broadcast(1), KTEN(apply(kten::nn::GELU(), x)), TORCH(at::gelu(x[0]))),
      Row("nn::SiLU", broadcast(1), KTEN(apply(kten::nn::SiLU(), x)), TORCH(at::silu(x[0]))),
      Row("nn::Softplus", broadcast(1), KTEN(apply(kten::nn::Softplus(), x)), TORCH(at::softplus(x[0], 1, 20))),
      Row("nn::Softplus(2, 1)", broadcast(1), KTEN(apply(kten::nn::Softplus(2, 1), x)), TORCH(at::softplus(x[0], 2, 1))).on(nonzero),
      // LayerNorm and Linear with their parameters as inputs.
      Row("nn::LayerNorm", layer_norm_shapes(), KTEN(apply(kten::nn::LayerNorm(x[0].size(-1), 1e-5, x[0].dtype()), x)),
          TORCH(at::layer_norm(x[0], {x[0].size(-1)}, x[1], x[2], 1e-5))).no_infinities(kLayerNormAtInf).float64_reference(kLayerNorm32).tol32(1e-5, kLayerNormAtol32),
      Row("nn::LayerNorm(eps 0.1)", layer_norm_shapes(), KTEN(apply(kten::nn::LayerNorm(x[0].size(-1), 0.1, x[0].dtype()), x)),
          TORCH(at::layer_norm(x[0], {x[0].size(-1)}, x[1], x[2], 0.1))).no_infinities(kLayerNormAtInf).float64_reference(kLayerNorm32).tol32(1e-5, kLayerNormAtol32),
      Row("nn::Linear", linear_shapes(), KTEN(apply(kten::nn::Linear(x[0].size(1), x[1].size(0), {true, x[0].dtype(), 0}), x)),
          TORCH(at::linear(x[0], x[1], x[2]))).sums(),
      // Dropout where PyTorch's is deterministic: evaluation mode, and p = 0 in training mode.
      Row("nn::Dropout (eval)", broadcast(1), [](const KtenArgs& x) {
            kten::nn::Dropout drop(0.5, 1);
            drop.eval();
            return apply(drop, x);
          }, TORCH(at::dropout(x[0], 0.5, false))),
      Row("nn::Dropout(0)", broadcast(1), KTEN(apply(kten::nn::Dropout(0.0, 1), x)), TORCH(at::dropout(x[0], 0.0, true))),
      // Pooling and resampling layers (issue 31 item 2), against the ATen functions their torch::nn
      // modules call.
      Row("nn::MaxPool2d(2)", grid_shapes(2, 2, true), KTEN(apply(kten::nn::MaxPool2d({2}), x)),
          TORCH(at::max_pool2d(x[0], {2, 2}, {2, 2}, {0, 0}))).on(Domain::distinct),
      Row("nn::MaxPool1d(3, stride 2, padding 1, ceil_mode)", grid_shapes(1, 2, true),
          KTEN(apply(kten::nn::MaxPool1d({3}, pool_options({2}, {1}, true, true)), x)),
          TORCH(at::max_pool1d(x[0], {3}, {2}, {1}, {1}, true))).on(Domain::distinct),
      Row("nn::MaxPool3d((2, 1, 2), ceil_mode)", grid_shapes(3, 2, true),
          KTEN(apply(kten::nn::MaxPool3d({2, 1, 2}, pool_options({}, {0}, true, true)), x)),
          TORCH(at::max_pool3d(x[0], {2, 1, 2}, {2, 1, 2}, {0, 0, 0}, {1, 1, 1}, true))).on(Domain::distinct),
      Row("nn::AvgPool1d(2)", grid_shapes(1, 2, true), KTEN(apply(kten::nn::AvgPool1d({2}), x)),
          TORCH(at::avg_pool1d(x[0], {2}, {2}, {0}, false, true))),
      Row("nn::AvgPool2d(3, stride 2, padding 1, ceil_mode, exclude pad)", grid_shapes(2, 2, true),
          KTEN(apply(kten::nn::AvgPool2d({3}, pool_options({2}, {1}, true, false)), x)),
          TORCH(at::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true, false))),
      Row("nn::AvgPool3d(2, padding 1)", grid_shapes(3, 2, true), KTEN(apply(kten::nn::AvgPool3d({2}, pool_options({}, {1}, false, true)), x)),
          TORCH(at::avg_pool3d(x[0], {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, false, true))),
      Row("nn::AdaptiveAvgPool1d(4)", grid_shapes(1, 1, true), KTEN(apply(kten::nn::AdaptiveAvgPool1d({4}), x)),
          TORCH(at::adaptive_avg_pool1d(x[0], {4}))).sums(),
      Row("nn::AdaptiveAvgPool2d((3, 2))", grid_shapes(2, 1, true), KTEN(apply(kten::nn::AdaptiveAvgPool2d({3, 2}), x)),
          TORCH(at::adaptive_avg_pool2d(x[0], {3, 2}))).sums(),
      Row("nn::AdaptiveAvgPool3d(2)", grid_shapes(3, 1, true), KTEN(apply(kten::nn::AdaptiveAvgPool3d({2}), x)),
          TORCH(at::adaptive_avg_pool3d(x[0], {2, 2, 2}))).sums(),
      Row("nn::Upsample(scale 2, nearest)", grid_shapes(2, 1), KTEN(apply(kten::nn::Upsample(upsample({}, {2.0}, InterpolateMode::nearest, false)), x)),
          TORCH(at::upsample_nearest2d(x[0], c10::nullopt, at::ArrayRef<double>({2.0, 2.0})))),
      Row("nn::Upsample(size 5, linear, align_corners)", grid_shapes(1, 1),
          KTEN(apply(kten::nn::Upsample(upsample({5}, {}, InterpolateMode::linear, true)), x)),
          TORCH(at::upsample_linear1d(x[0], at::IntArrayRef{5}, true))).float64_reference(kLinear32),
      Row("nn::Upsample(scale 2, bilinear)", grid_shapes(2, 1), KTEN(apply(kten::nn::Upsample(upsample({}, {2.0}, InterpolateMode::bilinear, false)), x)),
          TORCH(at::upsample_bilinear2d(x[0], c10::nullopt, false, at::ArrayRef<double>({2.0, 2.0})))).float64_reference(kLinear32),
      Row("nn::Upsample(size (2, 3, 4), trilinear)", grid_shapes(3, 1),
          KTEN(apply(kten::nn::Upsample(upsample({2, 3, 4}, {}, InterpolateMode::trilinear, false)), x)),
          TORCH(at::upsample_trilinear3d(x[0], at::IntArrayRef{2, 3, 4}, false))).float64_reference(kLinear32),
      // --- issue 31 (normalisation and small layers): BatchNorm in training mode updates running
      // statistics that start at 0 and 1 (PyTorch's side gets such fresh ones).
      normalisation(Row("nn::BatchNorm1d", channels_first(2, 3), KTEN(apply(kten::nn::BatchNorm1d(x[0].size(1), batch_norm_options(x[0])), x)),
          TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_zeros(x[0]), torch_ones(x[0]), true, 0.1, 1e-5, false)))),
      normalisation(Row("nn::BatchNorm2d", channels_first(4, 4), KTEN(apply(kten::nn::BatchNorm2d(x[0].size(1), batch_norm_options(x[0])), x)),
          TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_zeros(x[0]), torch_ones(x[0]), true, 0.1, 1e-5, false)))),
      normalisation(Row("nn::BatchNorm3d", channels_first(5, 5), KTEN(apply(kten::nn::BatchNorm3d(x[0].size(1), batch_norm_options(x[0])), x)),
          TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_zeros(x[0]), torch_ones(x[0]), true, 0.1, 1e-5, false)))),
      normalisation(Row("nn::BatchNorm2d (eval)", channels_first(4, 4),
          KTEN(apply(evaluating(kten::nn::BatchNorm2d(x[0].size(1), batch_norm_options(x[0]))), x)),
          TORCH(at::batch_norm(x[0].contiguous(), x[1].contiguous(), x[2], torch_zeros(x[0]), torch_ones(x[0]), false, 0.1, 1e-5, false)))),
      normalisation(Row("nn::GroupNorm(2, C)", channels_first(2, 5, 2), KTEN(apply(kten::nn::GroupNorm(2, x[0].size(1), 1e-5, true, x[0].dtype()), x)),
          TORCH(at::group_norm(x[0], 2, x[1], x[2], 1e-5, false)))),
      normalisation(Row("nn::InstanceNorm2d(affine)", channels_first(4, 4),
          KTEN(apply(kten::nn::InstanceNorm2d(x[0].size(1), 1e-5, true, x[0].dtype()), x)),
          TORCH(at::instance_norm(x[0].contiguous(), x[1].contiguous(), x[2], {}, {}, true, 0.1, 1e-5, false)))).no_empty(),  // as instance_norm's op rows
      normalisation(Row("nn::InstanceNorm1d", input_only(channels_first(3, 3)), KTEN(apply(kten::nn::InstanceNorm1d(x[0].size(1), 1e-5, false, x[0].dtype()), x)),
          TORCH(at::instance_norm(x[0].contiguous(), {}, {}, {}, {}, true, 0.1, 1e-5, false)))).no_empty(),
      Row("nn::LeakyReLU", broadcast(1), KTEN(apply(kten::nn::LeakyReLU(), x)), TORCH(at::leaky_relu(x[0], 0.01))).on(nonzero),
      Row("nn::Flatten", broadcast(1, 2), KTEN(apply(kten::nn::Flatten(), x)), TORCH(x[0].flatten(1))),
      Row("nn::Flatten(0, -2)", broadcast(1, 2), KTEN(apply(kten::nn::Flatten(0, -2), x)), TORCH(x[0].flatten(0, -2))),
      Row("nn::Unflatten(1, {1, n})", broadcast(1, 2), KTEN(apply(kten::nn::Unflatten(1, {1, x[0].size(1)}), x)),
          TORCH(x[0].unflatten(1, {1, x[0].size(1)}))),
      Row("nn::Unflatten(-1, {-1, 1})", broadcast(1, 1), KTEN(apply(kten::nn::Unflatten(-1, {-1, 1}), x)), TORCH(x[0].unflatten(-1, {-1, 1})))
          .no_empty(),
      Row("nn::Identity", broadcast(1), KTEN(apply(kten::nn::Identity(), x)), TORCH(x[0].clone())),
      // Recurrent layers against at::lstm / at::gru (torch::nn::LSTM's and GRU's forward), zero
      // initial states; sums of products over the steps.
      Row("nn::LSTM", recurrent_shapes(4, 1, 1, true, false),
          KTEN(apply(kten::nn::LSTM(x[0].size(2), x[2].size(1), rnn_options(x[0], 1, false, true, false)), x)),
          TORCH(std::get<0>(at::lstm(x[0], {torch_state(x, 1, false), torch_state(x, 1, false)}, torch_parameters(x), true,
                                     1, 0.0, false, false, false)))).sums().tol32(kRecurrentRtol32, kRecurrentAtol32),
      Row("nn::LSTM(2 layers, bidirectional, batch_first)", recurrent_shapes(4, 2, 2, true, true),
          KTEN(apply(kten::nn::LSTM(x[0].size(2), x[2].size(1), rnn_options(x[0], 2, true, true, true)), x)),
          TORCH(std::get<0>(at::lstm(x[0], {torch_state(x, 4, true), torch_state(x, 4, true)}, torch_parameters(x), true,
                                     2, 0.0, false, true, true)))).sums().tol32(kRecurrentRtol32, kRecurrentAtol32),
      Row("nn::GRU", recurrent_shapes(3, 1, 1, true, false),
          KTEN(apply(kten::nn::GRU(x[0].size(2), x[2].size(1), rnn_options(x[0], 1, false, true, false)), x)),
          TORCH(std::get<0>(at::gru(x[0], torch_state(x, 1, false), torch_parameters(x), true, 1, 0.0, false, false, false)))).sums().tol32(kRecurrentRtol32, kRecurrentAtol32),
      Row("nn::GRU(2 layers, bidirectional, no bias)", recurrent_shapes(3, 2, 2, false, false),
          KTEN(apply(kten::nn::GRU(x[0].size(2), x[2].size(1), rnn_options(x[0], 2, true, false, false)), x)),
          TORCH(std::get<0>(at::gru(x[0], torch_state(x, 4, false), torch_parameters(x), false, 2, 0.0, false, true, false)))).sums().tol32(kRecurrentRtol32, kRecurrentAtol32),
      // Attention layers against torch.nn.MultiheadAttention's and TransformerEncoderLayer's
      // arithmetic (PyTorch 1.13's modules have no functional form that autograd differentiates).
      Row("nn::MultiheadAttention (self-attention)", attention_layer_shapes(false), KTEN(apply_xavier_scaled(attention_layer(x[0]), x)),
          TORCH(torch_self_attention(x[0], xavier_scaled(x)))).sums().tol32(kAttentionRtol32, kAttentionAtol32).tol64(kAttentionRtol64, kAttentionAtol64).float64_reference(kAttention32),
      Row("nn::TransformerEncoderLayer (post-norm, relu)", attention_layer_shapes(true),
          KTEN(apply_xavier_scaled(evaluating(encoder_layer(x, false, "relu")), x)),
          TORCH(torch_encoder_layer(xavier_scaled(x), false, false)))
          .sums().tol32(kAttentionRtol32, kEncoderAtol32).tol64(kAttentionRtol64, kAttentionAtol64).float64_reference(kAttention32),
      Row("nn::TransformerEncoderLayer (norm_first, gelu)", attention_layer_shapes(true),
          KTEN(apply_xavier_scaled(evaluating(encoder_layer(x, true, "gelu")), x)),
          TORCH(torch_encoder_layer(xavier_scaled(x), true, true)))
          .sums().tol32(kAttentionRtol32, kEncoderAtol32).tol64(kAttentionRtol64, kAttentionAtol64).float64_reference(kAttention32),
      // Losses (mean reduction): sums, so tolerances scale with their terms.
      Row("nn::MSELoss", same_shape(2), KTEN(kten::nn::MSELoss()(x[0], x[1])), TORCH(at::mse_loss(x[0], x[1]))).sums(),
      Row("nn::L1Loss", same_shape(2), KTEN(kten::nn::L1Loss()(x[0], x[1])), TORCH(at::l1_loss(x[0], x[1]))).sums(),
      Row("nn::HuberLoss", same_shape(2), KTEN(kten::nn::HuberLoss()(x[0], x[1])), TORCH(at::huber_loss(x[0], x[1], at::Reduction::Mean, 1.0)))
          .sums(),
      Row("nn::HuberLoss(0.3)", same_shape(2), KTEN(kten::nn::HuberLoss(0.3)(x[0], x[1])), TORCH(at::huber_loss(x[0], x[1], at::Reduction::Mean, 0.3)))
          .sums(),
      // Targets are probabilities: sigmoid of the second input, on both sides.
      Row("nn::BCEWithLogitsLoss", same_shape(2), KTEN(kten::nn::BCEWithLogitsLoss()(x[0], kten::sigmoid(x[1]))),
          TORCH(at::binary_cross_entropy_with_logits(x[0], at::sigmoid(x[1])))).sums(),
      Row("nn::CrossEntropyLoss", class_scores(), KTEN(kten::nn::CrossEntropyLoss()(x[0], kten_classes(x[0]))),
          TORCH(at::cross_entropy_loss(x[0], torch_classes(x[0])))).sums(),
      Row("nn::CrossEntropyLoss (one example)", same_shape(1, 1),
          KTEN(kten::nn::CrossEntropyLoss()(x[0].reshape({-1}), kten::tensor(std::vector<std::int64_t>{x[0].numel() / 2}, x[0].device()).reshape({}))),
          TORCH(at::cross_entropy_loss(x[0].reshape({-1}), at::scalar_tensor(x[0].numel() / 2, at::kLong)))).sums().no_empty(),
      // --- Convolution layers (issue 31): torch::nn::Conv*'s forward pads with F.pad for the
      // non-zeros modes, then convolves without padding.
      Row("nn::Conv1d(3, padding 1 reflect)", conv_layer_shapes(1, 3, 2, false), KTEN(conv_layer(1, kten::nn::PaddingMode::reflect, 1, 1, x)),
          TORCH(at::conv1d(at::pad(x[0], {1, 1}, "reflect"), x[1], x[2]))).sums().specials_in({0}, kConvSpecials),
      Row("nn::Conv2d(3, padding 1)", conv_layer_shapes(2, 3, 1, false), KTEN(conv_layer(2, kten::nn::PaddingMode::zeros, 1, 1, x)),
          TORCH(at::conv2d(x[0], x[1], x[2], 1, 1))).sums().specials_in({0}, kConvSpecials),
      Row("nn::Conv2d(3, stride 2, padding 1 circular)", conv_layer_shapes(2, 3, 1, false), KTEN(conv_layer(2, kten::nn::PaddingMode::circular, 2, 1, x)),
          TORCH(at::conv2d(at::pad(x[0], {1, 1, 1, 1}, "circular"), x[1], x[2], 2))).sums().specials_in({0}, kConvSpecials),
      Row("nn::Conv2d(3, padding 2 replicate)", conv_layer_shapes(2, 3, 1, false), KTEN(conv_layer(2, kten::nn::PaddingMode::replicate, 1, 2, x)),
          TORCH(at::conv2d(at::pad(x[0], {2, 2, 2, 2}, "replicate"), x[1], x[2]))).sums().specials_in({0}, kConvSpecials),
      Row("nn::Conv3d(2, padding 1 circular)", conv_layer_shapes(3, 2, 1, false), KTEN(conv_layer(3, kten::nn::PaddingMode::circular, 1, 1, x)),
          TORCH(at::conv3d(at::pad(x[0], {1, 1, 1, 1, 1, 1}, "circular"), x[1], x[2]))).sums().specials_in({0}, kConvSpecials),
      Row("nn::ConvTranspose1d(3, stride 2, padding 1, output_padding 1)", conv_layer_shapes(1, 3, 1, true),
          KTEN(conv_transpose_layer(1, 2, 1, 1, x)), TORCH(at::conv_transpose1d(x[0], x[1], x[2], 2, 1, 1))).sums().specials_in({0}, kConvSpecials),
      Row("nn::ConvTranspose2d(2, stride 2)", conv_layer_shapes(2, 2, 1, true), KTEN(conv_transpose_layer(2, 2, 0, 0, x)),
          TORCH(at::conv_transpose2d(x[0], x[1], x[2], 2))).sums().specials_in({0}, kConvSpecials),
      Row("nn::ConvTranspose3d(3, padding 1)", conv_layer_shapes(3, 3, 1, true), KTEN(conv_transpose_layer(3, 1, 1, 0, x)),
          TORCH(at::conv_transpose3d(x[0], x[1], x[2], 1, 1))).sums().specials_in({0}, kConvSpecials),
      // --- Graph layers: Embedding (at::embedding is what torch::nn::Embedding's forward calls).
      Row("nn::Embedding", embedding_table(), KTEN(apply_embedding(x)),
          TORCH(at::embedding(x[0], at::tensor(embedding_rows(x[0].size(0)), at::kLong).reshape({2, x[0].size(0) + 1})))).sums(),
  };
}

}  // namespace kten::harness
