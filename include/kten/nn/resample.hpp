// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/resample.hpp
/// \brief Pooling and resampling layers (PyTorch's MaxPool1d/2d/3d, AvgPool1d/2d/3d,
/// AdaptiveAvgPool1d/2d/3d and Upsample), without parameters, over the functional forms of
/// <kten/ops.hpp>.

#include <string>
#include <utility>
#include <vector>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

namespace kten::nn {

/// \brief Options of MaxPool and AvgPool (PyTorch's defaults).
struct PoolOptions {
  Shape stride;                   ///< \brief windows apart; empty (the default): the kernel
  Shape padding{0};               ///< \brief on both sides of each axis, at most half the kernel
  bool ceil_mode = false;         ///< \brief round the output size up
  bool count_include_pad = true;  ///< \brief AvgPool: the padding counts in the divisor
};

/// \brief The base of MaxPool and AvgPool: the window and the options they were made with.
class WindowPool : public Module {
 public:
  /// \brief The window's extents.
  const Shape& kernel() const { return kernel_; }
  /// \brief The options it was made with.
  const PoolOptions& options() const { return options_; }

 protected:
  /// \brief Windows of `kernel` (one value for every axis, or one per axis).
  WindowPool(Shape kernel, PoolOptions options) : kernel_(std::move(kernel)), options_(std::move(options)) {}

 private:
  Shape kernel_;
  PoolOptions options_;
};

/// \brief Max pooling over `Spatial` (1 to 3) trailing axes of (N, C, ...) or (C, ...): MaxPool1d,
/// MaxPool2d, MaxPool3d. The largest element of each window, as kten::max_pool2d (ceil_mode as
/// PyTorch; count_include_pad does not apply).
template <int Spatial>
class MaxPool : public WindowPool {
 public:
  /// \brief Windows of `kernel` (one value for every axis, or one per axis).
  explicit MaxPool(Shape kernel, PoolOptions options = {}) : WindowPool(std::move(kernel), std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override;
};

/// \brief Average pooling over `Spatial` (1 to 3) trailing axes: AvgPool1d, AvgPool2d, AvgPool3d,
/// as kten::avg_pool2d.
template <int Spatial>
class AvgPool : public WindowPool {
 public:
  /// \brief Windows of `kernel` (one value for every axis, or one per axis).
  explicit AvgPool(Shape kernel, PoolOptions options = {}) : WindowPool(std::move(kernel), std::move(options)) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override;
};

/// \brief Adaptive average pooling to `output_size` over `Spatial` (1 to 3) trailing axes:
/// AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, as kten::adaptive_avg_pool2d.
template <int Spatial>
class AdaptiveAvgPool : public Module {
 public:
  /// \brief Pools to `output_size` (one value for every axis, or one per axis; each >= 1).
  explicit AdaptiveAvgPool(Shape output_size);
  Tensor forward(const Tensor& input) override;
  std::string name() const override;
  /// \brief The output's spatial extents.
  const Shape& output_size() const { return output_size_; }

 private:
  Shape output_size_;
};

/// \brief Max pooling over (L).
using MaxPool1d = MaxPool<1>;
/// \brief Max pooling over (H, W).
using MaxPool2d = MaxPool<2>;
/// \brief Max pooling over (D, H, W).
using MaxPool3d = MaxPool<3>;
/// \brief Average pooling over (L).
using AvgPool1d = AvgPool<1>;
/// \brief Average pooling over (H, W).
using AvgPool2d = AvgPool<2>;
/// \brief Average pooling over (D, H, W).
using AvgPool3d = AvgPool<3>;
/// \brief Adaptive average pooling over (L).
using AdaptiveAvgPool1d = AdaptiveAvgPool<1>;
/// \brief Adaptive average pooling over (H, W).
using AdaptiveAvgPool2d = AdaptiveAvgPool<2>;
/// \brief Adaptive average pooling over (D, H, W).
using AdaptiveAvgPool3d = AdaptiveAvgPool<3>;

extern template class MaxPool<1>;
extern template class MaxPool<2>;
extern template class MaxPool<3>;
extern template class AvgPool<1>;
extern template class AvgPool<2>;
extern template class AvgPool<3>;
extern template class AdaptiveAvgPool<1>;
extern template class AdaptiveAvgPool<2>;
extern template class AdaptiveAvgPool<3>;

/// \brief Options of Upsample, as libtorch's UpsampleOptions: exactly one of size and
/// scale_factor.
struct UpsampleOptions {
  Shape size;                              ///< \brief the output's spatial extents (one for all axes, or one per axis)
  std::vector<double> scale_factor;        ///< \brief or the scale of each spatial axis (one for all, or one per axis)
  InterpolateMode mode = InterpolateMode::nearest;  ///< \brief nearest, linear, bilinear or trilinear
  bool align_corners = false;              ///< \brief the linear modes: map corner elements onto each other
};

/// \brief kten::interpolate as a layer (PyTorch's Upsample): (N, C, ...) to `size` or by
/// `scale_factor`. Giving both or neither is a ShapeError at construction.
class Upsample : public Module {
 public:
  /// \brief The layer; options.size or options.scale_factor must be given, not both.
  explicit Upsample(UpsampleOptions options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Upsample"; }
  /// \brief The options it was made with.
  const UpsampleOptions& options() const { return options_; }

 private:
  UpsampleOptions options_;
};

}  // namespace kten::nn
