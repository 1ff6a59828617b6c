// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Conv1d/2d/3d and ConvTranspose1d/2d/3d on the parameters' device: the functional forms
// (src/ops/conv.cpp) with the layer's parameters, after pad() for the non-zeros padding modes, as
// PyTorch's modules do; autograd derives the backward.
#include <cmath>

#include <kten/nn/conv.hpp>
#include <kten/nn/layers.hpp>
#include <kten/random.hpp>

#include "core/checks.hpp"
#include "core/fail.hpp"

namespace kten::nn {

namespace {
// The non-zeros padding modes pad explicitly, PyTorch's _reversed_padding_repeated_twice: one
// (before, after) pair per spatial axis, the last axis first.
Shape reversed_pairs(const Shape& padding, int dims) {
  Shape pads;
  for (int a = dims - 1; a >= 0; --a) {
    const std::int64_t p = padding.size() == 1 ? padding[0] : padding[a];
    pads.insert(pads.end(), {p, p});
  }
  return pads;
}
}  // namespace

Convolution::Convolution(std::string name, int dims, bool transposed, std::int64_t in_channels, std::int64_t out_channels,
                         const Shape& kernel, const ConvTransposeOptions& sizes, PaddingMode padding_mode)
    : name_(std::move(name)), dims_(dims), transposed_(transposed), options_(sizes), padding_mode_(padding_mode) {
  const char* op = name_.c_str();
  if (in_channels < 1 || out_channels < 1)
    detail::fail<ShapeError>(op, "in_channels and out_channels must be >= 1, got ", in_channels, " and ", out_channels);
  if (sizes.groups < 1 || in_channels % sizes.groups != 0 || out_channels % sizes.groups != 0)
    detail::fail<ShapeError>(op, "groups ", sizes.groups, " must divide in_channels ", in_channels, " and out_channels ", out_channels);
  if (kernel.size() != 1 && kernel.size() != static_cast<std::size_t>(dims))
    detail::fail<ShapeError>(op, "kernel ", kernel, " must hold 1 or ", dims, " values");
  if (transposed && padding_mode != PaddingMode::zeros)
    detail::fail<ShapeError>(op, "only zeros padding is supported for transposed convolutions, as in PyTorch");
  Shape shape = transposed ? Shape{in_channels, out_channels / sizes.groups} : Shape{out_channels, in_channels / sizes.groups};
  std::int64_t fan_in = shape[1];
  for (int a = 0; a < dims; ++a) {
    const std::int64_t k = kernel.size() == 1 ? kernel[0] : kernel[a];
    if (k < 1) detail::fail<ShapeError>(op, "kernel ", kernel, " must be >= 1");
    shape.push_back(k);
    fan_in *= k;
  }
  const std::uint64_t seed = sizes.seed ? *sizes.seed : next_seed();
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));  // kaiming_uniform(a = sqrt(5))
  weight_ = register_parameter("weight", Parameter{uniform(shape, -bound, bound, device(), seed, sizes.dtype), {}, shape, sizes.dtype});
  weight_->track();
  if (sizes.bias) {
    // A second stream of the same seed, as Linear's: bias and weight never share numbers.
    bias_ = register_parameter("bias", Parameter{uniform({out_channels}, -bound, bound, device(), seed ^ 0x9E3779B97F4A7C15ull, sizes.dtype),
                                                 {}, {out_channels}, sizes.dtype});
    bias_->track();
  }
}

const Tensor& Convolution::bias() const {
  static const Tensor none;
  return bias_ ? bias_->value : none;
}

Tensor Convolution::forward(const Tensor& input) {
  const char* op = name_.c_str();
  detail::check_defined(input, op);
  detail::check_same_device(op, input.device(), device());
  if (input.dtype() != weight_->value.dtype())
    detail::fail<DTypeError>(op, "the input is ", input.dtype(), " but the parameters are ", weight_->value.dtype(),
                             "; convert with .astype(...)");
  const ConvTransposeOptions& o = options_;
  const Tensor& w = weight_->value;
  const Tensor& b = bias();
  try {
    if (transposed_) {
      Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t,
                          const Shape&) = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
      return f[dims_ - 1](input, w, b, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
    }
    Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t) = {
        conv1d, conv2d, conv3d};
    if (padding_mode_ == PaddingMode::zeros) return f[dims_ - 1](input, w, b, o.stride, o.padding, o.dilation, o.groups);
    const Tensor padded = pad(input, reversed_pairs(o.padding, dims_), padding_mode_);
    return f[dims_ - 1](padded, w, b, o.stride, {0}, o.dilation, o.groups);
  } catch (const ShapeError& e) {
    detail::fail_within<ShapeError>(op, e);  // the layer's name before the op's message
  }
}

namespace {
ConvTransposeOptions sizes_of(const ConvOptions& o) {
  ConvTransposeOptions s;
  s.stride = o.stride;
  s.padding = o.padding;
  s.dilation = o.dilation;
  s.groups = o.groups;
  s.bias = o.bias;
  s.dtype = o.dtype;
  s.seed = o.seed;
  return s;
}
}  // namespace

Conv1d::Conv1d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvOptions& o)
    : Convolution("Conv1d", 1, false, in, out, kernel, sizes_of(o), o.padding_mode) {}
Conv2d::Conv2d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvOptions& o)
    : Convolution("Conv2d", 2, false, in, out, kernel, sizes_of(o), o.padding_mode) {}
Conv3d::Conv3d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvOptions& o)
    : Convolution("Conv3d", 3, false, in, out, kernel, sizes_of(o), o.padding_mode) {}
ConvTranspose1d::ConvTranspose1d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvTransposeOptions& o)
    : Convolution("ConvTranspose1d", 1, true, in, out, kernel, o, PaddingMode::zeros) {}
ConvTranspose2d::ConvTranspose2d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvTransposeOptions& o)
    : Convolution("ConvTranspose2d", 2, true, in, out, kernel, o, PaddingMode::zeros) {}
ConvTranspose3d::ConvTranspose3d(std::int64_t in, std::int64_t out, const Shape& kernel, const ConvTransposeOptions& o)
    : Convolution("ConvTranspose3d", 3, true, in, out, kernel, o, PaddingMode::zeros) {}

}  // namespace kten::nn
