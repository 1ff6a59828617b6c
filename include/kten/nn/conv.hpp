// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/conv.hpp
/// \brief Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d (PyTorch's parameter names,
/// layouts, defaults and initialisation), on kten::conv{1,2,3}d and kten::conv_transpose{1,2,3}d.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

namespace kten::nn {

/// \brief Options of Conv1d/2d/3d. Sizes hold one value for every spatial axis or one per axis.
struct ConvOptions {
  Shape stride{1};                              ///< \brief step between windows
  Shape padding{0};                             ///< \brief elements added on both sides of each axis
  Shape dilation{1};                            ///< \brief spacing between kernel taps
  std::int64_t groups = 1;                      ///< \brief channel groups (in_channels: depthwise)
  bool bias = true;                             ///< \brief learn an additive bias per output channel
  PaddingMode padding_mode = PaddingMode::zeros;  ///< \brief how the padding is filled
  DType dtype = DType::float32;                 ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;            ///< \brief initialisation seed; default: next_seed()
};

/// \brief Options of ConvTranspose1d/2d/3d (zeros padding only, as PyTorch).
struct ConvTransposeOptions {
  Shape stride{1};              ///< \brief step between windows of the convolution it inverts
  Shape padding{0};             ///< \brief padding of the convolution it inverts (removed from the output)
  Shape output_padding{0};      ///< \brief elements added at the end of each output axis (below stride or dilation)
  Shape dilation{1};            ///< \brief spacing between kernel taps
  std::int64_t groups = 1;      ///< \brief channel groups
  bool bias = true;             ///< \brief learn an additive bias per output channel
  DType dtype = DType::float32; ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;  ///< \brief initialisation seed; default: next_seed()
};

/// \brief What Conv1d/2d/3d and ConvTranspose1d/2d/3d share: parameters "weight" (Conv:
/// (out, in / groups, kernel...); ConvTranspose: (in, out / groups, kernel...)) and "bias" (out),
/// drawn as PyTorch's reset_parameters does: kaiming_uniform with a = sqrt(5), i.e. uniform in
/// +-1/sqrt(fan_in) with fan_in = weight.size(1) * kernel volume, and the bias likewise.
class Convolution : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return name_; }

  /// \brief The weight.
  const Tensor& weight() const { return weight_->value; }
  /// \brief The (out) bias, undefined without bias.
  const Tensor& bias() const;

 protected:
  /// \brief A layer of `dims` spatial axes named `name`; `transposed` picks ConvTranspose.
  Convolution(std::string name, int dims, bool transposed, std::int64_t in_channels, std::int64_t out_channels,
              const Shape& kernel, const ConvTransposeOptions& sizes, PaddingMode padding_mode);

 private:
  std::string name_;
  int dims_;
  bool transposed_;
  ConvTransposeOptions options_;  // the sizes, groups, bias and dtype of either kind
  PaddingMode padding_mode_;
  std::shared_ptr<Parameter> weight_;
  std::shared_ptr<Parameter> bias_;
};

/// \brief torch.nn.Conv1d on (N, C, L) or (C, L).
class Conv1d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel, const ConvOptions& options = {});
};
/// \brief torch.nn.Conv2d on (N, C, H, W) or (C, H, W).
class Conv2d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel, const ConvOptions& options = {});
};
/// \brief torch.nn.Conv3d on (N, C, D, H, W) or (C, D, H, W).
class Conv3d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  Conv3d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel, const ConvOptions& options = {});
};
/// \brief torch.nn.ConvTranspose1d on (N, C, L) or (C, L).
class ConvTranspose1d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  ConvTranspose1d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel,
                  const ConvTransposeOptions& options = {});
};
/// \brief torch.nn.ConvTranspose2d on (N, C, H, W) or (C, H, W).
class ConvTranspose2d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  ConvTranspose2d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel,
                  const ConvTransposeOptions& options = {});
};
/// \brief torch.nn.ConvTranspose3d on (N, C, D, H, W) or (C, D, H, W).
class ConvTranspose3d : public Convolution {
 public:
  /// \brief in_channels -> out_channels with a kernel of `kernel` (one value or one per axis).
  ConvTranspose3d(std::int64_t in_channels, std::int64_t out_channels, const Shape& kernel,
                  const ConvTransposeOptions& options = {});
};

}  // namespace kten::nn
