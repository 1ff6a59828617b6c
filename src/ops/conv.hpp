// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what the perf suite asks of the convolutions beyond the public functions.

#include <cstdint>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief The multiply-adds that conv{dims}d(x, w, {}, stride, padding, dilation, groups) forward
/// and backward to x and w performs on x's device: each of the three products counts the direct
/// convolution's multiply-adds, except a product that cpu() runs as Winograd, which counts its
/// transform-domain GEMMs' (tiles x points x channels in x channels out; the transforms, a few
/// additions per element, are not counted). x is batched (N, C, spatial...).
double conv_multiply_adds(int dims, const Tensor& x, const Tensor& w, const Shape& stride, const Shape& padding,
                          const Shape& dilation, std::int64_t groups);

}  // namespace kten::detail
