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
  };
}

}  // namespace kten::harness
