// kten's layers and losses against the reference (kten on cpu() in float64, or PyTorch): one row
// each, run by the same engine as the ops (values, gradients of every input, strided, empty,
// NaN/inf and large cases, finite differences). A layer's
// parameters are inputs of its row, copied into both sides: the kten layer's parameter slots take
// the harness's tensors, and PyTorch's functional form of torch::nn's module (at::layer_norm,
// at::linear, at::huber_loss, ...: what the module's forward calls) takes the same values.
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
      // --- Graph layers: Embedding (at::embedding is what torch::nn::Embedding's forward calls).
      Row("nn::Embedding", embedding_table(), KTEN(apply_embedding(x)),
          TORCH(at::embedding(x[0], at::tensor(embedding_rows(x[0].size(0)), at::kLong).reshape({2, x[0].size(0) + 1})))).sums(),
  };
}

}  // namespace kten::harness
