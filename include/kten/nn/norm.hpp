// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/norm.hpp
/// \brief Normalisation layers with state (BatchNorm1d/2d/3d, GroupNorm, InstanceNorm1d/2d/3d) and
/// the small layers of grid models (LeakyReLU, Flatten, Unflatten, Identity), as PyTorch's.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <kten/nn/layers.hpp>

namespace kten::nn {

/// \brief Options of BatchNorm1d/2d/3d (libtorch's BatchNormOptions, plus the parameters' dtype).
struct BatchNormOptions {
  double eps = 1e-5;  ///< \brief added to the variance
  /// \brief weight of the batch's statistics in the running ones; none: their cumulative average
  /// (1 / num_batches_tracked, read on the host once a training step)
  std::optional<double> momentum = 0.1;
  bool affine = true;               ///< \brief learn a per-channel weight and bias
  bool track_running_stats = true;  ///< \brief keep running statistics for evaluation mode
  DType dtype = DType::float32;     ///< \brief parameters' and running statistics' dtype
};

/// \brief Batch normalisation over channels (axis 1), PyTorch's BatchNorm: in training mode each
/// channel is normalised by the batch's mean and biased variance (over N and the spatial axes) and
/// the running statistics are updated in place, off the tape (running = (1 - momentum) running +
/// momentum batch, the variance unbiased; num_batches_tracked counts the steps); in evaluation mode
/// by the running statistics. Parameters "weight" (ones) and "bias" (zeros) when affine; buffers
/// "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked" (0-d int64) when
/// tracking, so state_dict(), to(), load and DDP's buffer broadcast carry them and optimisers
/// never step them. Without tracking, evaluation mode uses the batch's statistics too.
///
/// An input of another rank than the layer takes, of another channel count than `features`, or of
/// one value per channel in training throws ShapeError naming the layer and the shape; one of
/// another dtype than the parameters, DTypeError.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return name_; }

  /// \brief The number of channels.
  std::int64_t features() const { return features_; }
  /// \brief The options it was built with.
  const BatchNormOptions& options() const { return options_; }
  /// \brief The (C) scale, undefined without affine.
  const Tensor& weight() const;
  /// \brief The (C) shift, undefined without affine.
  const Tensor& bias() const;
  /// \brief The (C) running mean, undefined without track_running_stats.
  const Tensor& running_mean() const { return running_mean_; }
  /// \brief The (C) running (unbiased) variance, undefined without track_running_stats.
  const Tensor& running_var() const { return running_var_; }
  /// \brief The 0-d int64 count of training steps, undefined without track_running_stats.
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

 protected:
  /// \brief A layer named `name` taking inputs of rank min_rank or max_rank.
  BatchNorm(std::string name, int min_rank, int max_rank, std::int64_t features, BatchNormOptions options);

 private:
  std::string name_;
  int min_rank_, max_rank_;
  std::int64_t features_;
  BatchNormOptions options_;
  std::shared_ptr<Parameter> weight_, bias_;  // null without affine
  Tensor running_mean_, running_var_, num_batches_tracked_;  // registered buffers, or undefined
};

/// \brief BatchNorm over (N, C) or (N, C, L) inputs.
class BatchNorm1d : public BatchNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit BatchNorm1d(std::int64_t features, BatchNormOptions options = {});
};

/// \brief BatchNorm over (N, C, H, W) inputs.
class BatchNorm2d : public BatchNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit BatchNorm2d(std::int64_t features, BatchNormOptions options = {});
};

/// \brief BatchNorm over (N, C, D, H, W) inputs.
class BatchNorm3d : public BatchNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit BatchNorm3d(std::int64_t features, BatchNormOptions options = {});
};

/// \brief Group normalisation (PyTorch's GroupNorm): each sample's `groups` groups of channels
/// normalised by their own mean and biased variance, then a per-channel "weight" (ones) and "bias"
/// (zeros) when affine. The same in training and evaluation mode. groups must divide channels
/// (ShapeError at construction); an input (N, C, ...) of other channels, ShapeError.
class GroupNorm : public Module {
 public:
  /// \brief `groups` groups of `channels` channels; parameters of `dtype`.
  GroupNorm(std::int64_t groups, std::int64_t channels, double eps = 1e-5, bool affine = true,
            DType dtype = DType::float32);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "GroupNorm"; }

  /// \brief The number of groups.
  std::int64_t groups() const { return groups_; }
  /// \brief The number of channels.
  std::int64_t channels() const { return channels_; }

 private:
  std::int64_t groups_, channels_;
  double eps_;
  std::shared_ptr<Parameter> weight_, bias_;  // null without affine
};

/// \brief Instance normalisation (PyTorch's InstanceNorm with its default track_running_stats =
/// false): each sample's channels normalised over their spatial axes, in training and evaluation
/// mode, then a per-channel "weight" and "bias" when affine. Takes a batch or one unbatched sample
/// (C, ...); another rank or channel count is a ShapeError naming the layer.
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return name_; }

  /// \brief The number of channels.
  std::int64_t features() const { return features_; }

 protected:
  /// \brief A layer named `name` for batches of rank `rank` (rank - 1: one sample).
  InstanceNorm(std::string name, int rank, std::int64_t features, double eps, bool affine, DType dtype);

 private:
  std::string name_;
  int rank_;
  std::int64_t features_;
  double eps_;
  std::shared_ptr<Parameter> weight_, bias_;  // null without affine
};

/// \brief InstanceNorm over (N, C, L) or (C, L).
class InstanceNorm1d : public InstanceNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit InstanceNorm1d(std::int64_t features, double eps = 1e-5, bool affine = false, DType dtype = DType::float32);
};

/// \brief InstanceNorm over (N, C, H, W) or (C, H, W).
class InstanceNorm2d : public InstanceNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit InstanceNorm2d(std::int64_t features, double eps = 1e-5, bool affine = false, DType dtype = DType::float32);
};

/// \brief InstanceNorm over (N, C, D, H, W) or (C, D, H, W).
class InstanceNorm3d : public InstanceNorm {
 public:
  /// \brief The layer for `features` channels.
  explicit InstanceNorm3d(std::int64_t features, double eps = 1e-5, bool affine = false, DType dtype = DType::float32);
};

/// \brief x where x > 0, else slope x, elementwise (kten::leaky_relu).
class LeakyReLU : public Activation {
 public:
  /// \brief The layer, with PyTorch's default slope 0.01.
  explicit LeakyReLU(double slope = 0.01);
};

/// \brief Merges axes start..end (inclusive; negative counts from the end) into one, as PyTorch's
/// Flatten (a view of a contiguous input). start after end is a ShapeError.
class Flatten : public Module {
 public:
  /// \brief Flattens all but the batch axis by default.
  explicit Flatten(int start = 1, int end = -1);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Flatten"; }

 private:
  int start_, end_;
};

/// \brief Splits `axis` into `sizes` (one may be -1: inferred), as PyTorch's Unflatten; sizes that
/// do not multiply to the axis' extent are a ShapeError.
class Unflatten : public Module {
 public:
  /// \brief Splits `axis` (negative counts from the end) into `sizes`.
  Unflatten(int axis, Shape sizes);

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Unflatten"; }

 private:
  int axis_;
  Shape sizes_;
};

/// \brief Returns its input (a placeholder, as PyTorch's Identity).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
  std::string name() const override { return "Identity"; }
};

}  // namespace kten::nn
