// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The normalisation layers with state and the small layers of issue 31, on the functional forms
// (src/ops/norm.cpp); autograd derives their backward.
#include <cmath>

#include <kten/nn/norm.hpp>
#include <kten/ops.hpp>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"

namespace kten::nn {

namespace {

/// \brief Checks a normalisation layer's options and dtype.
void check_norm_options(const std::string& layer, std::int64_t features, double eps, DType dtype) {
  if (features < 1) detail::fail<ShapeError>(layer.c_str(), "features (channels) must be >= 1, got ", features);
  if (!(std::isfinite(eps) && eps >= 0)) detail::fail(layer.c_str(), "eps must be finite and >= 0, got ", eps);
  if (!is_floating(dtype)) detail::fail<DTypeError>(layer.c_str(), "parameters are float32 or float64, not ", dtype);
}

/// \brief Registers "weight" (ones) and "bias" (zeros) of shape (C) when affine.
void register_affine(Module& m, bool affine, std::int64_t features, DType dtype, std::shared_ptr<Parameter>& weight,
                     std::shared_ptr<Parameter>& bias) {
  if (!affine) return;
  weight = m.register_parameter("weight", Parameter{ones({features}, m.device(), dtype), {}, {features}, dtype});
  bias = m.register_parameter("bias", Parameter{zeros({features}, m.device(), dtype), {}, {features}, dtype});
}

/// \brief A parameter's value, or an undefined tensor for none.
const Tensor& value_or_none(const std::shared_ptr<Parameter>& p) {
  static const Tensor none;
  return p ? p->value : none;
}

/// \brief Checks a normalisation layer's input: its rank (min_rank to max_rank; -1: any above),
/// its channels (axis 1 of a batch, axis 0 of one sample), its dtype.
void check_norm_input(const std::string& layer, const Tensor& input, int min_rank, int max_rank, int channel_axis,
                      std::int64_t features, DType dtype) {
  const std::string what = layer + " forward";
  detail::check_defined(input, what.c_str());
  if (input.ndim() < min_rank || (max_rank >= 0 && input.ndim() > max_rank))
    detail::fail<ShapeError>(what.c_str(), "expects an input of rank ", min_rank,
                             max_rank < 0 ? " or more" : max_rank == min_rank ? "" : " or " + std::to_string(max_rank),
                             " with channels first, got shape ", input.shape());
  if (input.shape()[static_cast<std::size_t>(channel_axis)] != features)
    detail::fail<ShapeError>(what.c_str(), "expects ", features, " channels (axis ", channel_axis, "), got an input of shape ",
                             input.shape());
  if (input.dtype() != dtype)
    detail::fail<DTypeError>(what.c_str(), "the input is ", input.dtype(), " but the parameters are ", dtype,
                             "; convert with .astype(...)");
}

}  // namespace

// --- BatchNorm ---------------------------------------------------------------------------------

BatchNorm::BatchNorm(std::string name, int min_rank, int max_rank, std::int64_t features, BatchNormOptions options)
    : name_(std::move(name)), min_rank_(min_rank), max_rank_(max_rank), features_(features), options_(options) {
  check_norm_options(name_, features, options.eps, options.dtype);
  if (options.momentum && !std::isfinite(*options.momentum))
    detail::fail(name_.c_str(), "momentum must be finite, got ", *options.momentum);
  register_affine(*this, options.affine, features, options.dtype, weight_, bias_);
  if (options.track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({features}, device(), options.dtype));
    running_var_ = register_buffer("running_var", ones({features}, device(), options.dtype));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, device(), DType::int64));
  }
}

const Tensor& BatchNorm::weight() const { return value_or_none(weight_); }
const Tensor& BatchNorm::bias() const { return value_or_none(bias_); }

Tensor BatchNorm::forward(const Tensor& input) {
  // The dtype to(DType) left: the parameters', else the running statistics', else any float.
  const DType dtype = weight_ ? weight_->dtype : running_mean_.defined() ? running_mean_.dtype() : input.dtype();
  check_norm_input(name_, input, min_rank_, max_rank_, 1, features_, dtype);
  const bool tracking = options_.track_running_stats;
  // PyTorch's: the batch's statistics in training mode, and in evaluation mode without running ones.
  const bool batch_stats = is_training() || !tracking;
  if (batch_stats && input.numel() / features_ == 1)
    detail::fail<ShapeError>((name_ + " forward").c_str(), "expected more than 1 value per channel when training, got input shape ",
                             input.shape());
  double momentum = options_.momentum.value_or(0.0);
  if (is_training() && tracking) {
    NoGradGuard no_grad;  // the count changes in place, off the tape
    num_batches_tracked_.copy_from((num_batches_tracked_.astype(DType::float64) + 1.0).astype(DType::int64));
    if (!options_.momentum) momentum = 1.0 / static_cast<double>(num_batches_tracked_.item<std::int64_t>());
  }
  // Without tracking the running statistics are undefined: batch_norm uses the batch's alone.
  return batch_norm(input, running_mean_, running_var_, weight(), bias(), batch_stats, momentum, options_.eps);
}

BatchNorm1d::BatchNorm1d(std::int64_t features, BatchNormOptions options) : BatchNorm("BatchNorm1d", 2, 3, features, options) {}
BatchNorm2d::BatchNorm2d(std::int64_t features, BatchNormOptions options) : BatchNorm("BatchNorm2d", 4, 4, features, options) {}
BatchNorm3d::BatchNorm3d(std::int64_t features, BatchNormOptions options) : BatchNorm("BatchNorm3d", 5, 5, features, options) {}

// --- GroupNorm ---------------------------------------------------------------------------------

GroupNorm::GroupNorm(std::int64_t groups, std::int64_t channels, double eps, bool affine, DType dtype)
    : groups_(groups), channels_(channels), eps_(eps) {
  check_norm_options("GroupNorm", channels, eps, dtype);
  if (groups < 1 || channels % groups != 0)
    detail::fail<ShapeError>("GroupNorm", groups, " groups do not divide the ", channels, " channels");
  register_affine(*this, affine, channels, dtype, weight_, bias_);
}

Tensor GroupNorm::forward(const Tensor& input) {
  check_norm_input("GroupNorm", input, 2, -1, 1, channels_, weight_ ? weight_->dtype : input.dtype());
  return group_norm(input, groups_, value_or_none(weight_), value_or_none(bias_), eps_);
}

// --- InstanceNorm ------------------------------------------------------------------------------

InstanceNorm::InstanceNorm(std::string name, int rank, std::int64_t features, double eps, bool affine, DType dtype)
    : name_(std::move(name)), rank_(rank), features_(features), eps_(eps) {
  check_norm_options(name_, features, eps, dtype);
  register_affine(*this, affine, features, dtype, weight_, bias_);
}

Tensor InstanceNorm::forward(const Tensor& input) {
  const bool batched = input.defined() && input.ndim() == rank_;
  check_norm_input(name_, input, rank_ - 1, rank_, batched ? 1 : 0, features_, weight_ ? weight_->dtype : input.dtype());
  const Tensor x = batched ? input : input.unsqueeze(0);
  const Tensor none;
  const Tensor y = instance_norm(x, none, none, value_or_none(weight_), value_or_none(bias_), true, 0.1, eps_);
  return batched ? y : y.squeeze(0);
}

InstanceNorm1d::InstanceNorm1d(std::int64_t features, double eps, bool affine, DType dtype)
    : InstanceNorm("InstanceNorm1d", 3, features, eps, affine, dtype) {}
InstanceNorm2d::InstanceNorm2d(std::int64_t features, double eps, bool affine, DType dtype)
    : InstanceNorm("InstanceNorm2d", 4, features, eps, affine, dtype) {}
InstanceNorm3d::InstanceNorm3d(std::int64_t features, double eps, bool affine, DType dtype)
    : InstanceNorm("InstanceNorm3d", 5, features, eps, affine, dtype) {}

// --- Small layers ------------------------------------------------------------------------------

LeakyReLU::LeakyReLU(double slope) : Activation("LeakyReLU", [slope](const Tensor& x) { return leaky_relu(x, slope); }) {}

Flatten::Flatten(int start, int end) : start_(start), end_(end) {}

Tensor Flatten::forward(const Tensor& input) {
  detail::check_defined(input, "Flatten forward");
  if (input.ndim() == 0) return input.reshape({1});  // PyTorch's: a 0-d input becomes (1)
  const int start = detail::normalize_axis("Flatten forward", input, start_);
  const int end = detail::normalize_axis("Flatten forward", input, end_);
  if (start > end)
    detail::fail<ShapeError>("Flatten forward", "start axis ", start_, " comes after end axis ", end_, " for an input of shape ",
                             input.shape());
  Shape shape(input.shape().begin(), input.shape().begin() + start);
  std::int64_t merged = 1;
  for (int d = start; d <= end; ++d) merged *= input.shape()[static_cast<std::size_t>(d)];
  shape.push_back(merged);
  shape.insert(shape.end(), input.shape().begin() + end + 1, input.shape().end());
  return input.reshape(shape);
}

Unflatten::Unflatten(int axis, Shape sizes) : axis_(axis), sizes_(std::move(sizes)) {
  if (sizes_.empty()) detail::fail<ShapeError>("Unflatten", "sizes must name at least one extent");
  int inferred = 0;
  for (std::int64_t s : sizes_) {
    if (s == -1) ++inferred;
    else if (s < 0) detail::fail<ShapeError>("Unflatten", "sizes ", sizes_, " hold a negative extent other than -1");
  }
  if (inferred > 1) detail::fail<ShapeError>("Unflatten", "sizes ", sizes_, " may hold one -1 at most");
}

Tensor Unflatten::forward(const Tensor& input) {
  detail::check_defined(input, "Unflatten forward");
  const int axis = detail::normalize_axis("Unflatten forward", input, axis_);
  const std::int64_t extent = input.shape()[static_cast<std::size_t>(axis)];
  std::optional<std::int64_t> known = 1;  // the product of the given sizes (none: it overflowed)
  bool inferred = false;
  for (std::int64_t s : sizes_) {
    if (s == -1) inferred = true;
    else if (known) known = detail::checked_mul(*known, s);
  }
  if (!known || (inferred ? (*known == 0 || extent % *known != 0) : *known != extent))
    detail::fail<ShapeError>("Unflatten forward", "sizes ", sizes_, " do not split axis ", axis_, " of extent ", extent,
                             " (input shape ", input.shape(), ")");
  Shape shape(input.shape().begin(), input.shape().begin() + axis);
  shape.insert(shape.end(), sizes_.begin(), sizes_.end());
  shape.insert(shape.end(), input.shape().begin() + axis + 1, input.shape().end());
  return input.reshape(shape);
}

}  // namespace kten::nn
