// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The pooling and resampling layers (nn/resample.hpp): options checked at construction, forward
// one call of the functional form (src/ops/pool.cpp, src/ops/resample.cpp), whose gradient autograd
// records.
#include <kten/nn/resample.hpp>

#include "core/fail.hpp"
#include "ops/pool.hpp"

namespace kten::nn {

namespace {
// "MaxPool" + "2d".
std::string with_rank(const char* kind, int spatial) { return kind + std::to_string(spatial) + "d"; }
}  // namespace

template <int Spatial>
Tensor MaxPool<Spatial>::forward(const Tensor& input) {
  return detail::max_pool(input, Spatial, kernel(), options().stride, options().padding, options().ceil_mode);
}

template <int Spatial>
std::string MaxPool<Spatial>::name() const { return with_rank("MaxPool", Spatial); }

template <int Spatial>
Tensor AvgPool<Spatial>::forward(const Tensor& input) {
  const auto pool = Spatial == 1 ? avg_pool1d : Spatial == 2 ? avg_pool2d : avg_pool3d;
  const PoolOptions& o = options();
  return pool(input, kernel(), o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}

template <int Spatial>
std::string AvgPool<Spatial>::name() const { return with_rank("AvgPool", Spatial); }

template <int Spatial>
AdaptiveAvgPool<Spatial>::AdaptiveAvgPool(Shape output_size) : output_size_(std::move(output_size)) {}

template <int Spatial>
Tensor AdaptiveAvgPool<Spatial>::forward(const Tensor& input) {
  const auto pool = Spatial == 1 ? adaptive_avg_pool1d : Spatial == 2 ? adaptive_avg_pool2d : adaptive_avg_pool3d;
  return pool(input, output_size_);
}

template <int Spatial>
std::string AdaptiveAvgPool<Spatial>::name() const { return with_rank("AdaptiveAvgPool", Spatial); }

template class MaxPool<1>;
template class MaxPool<2>;
template class MaxPool<3>;
template class AvgPool<1>;
template class AvgPool<2>;
template class AvgPool<3>;
template class AdaptiveAvgPool<1>;
template class AdaptiveAvgPool<2>;
template class AdaptiveAvgPool<3>;

Upsample::Upsample(UpsampleOptions options) : options_(std::move(options)) {
  if (options_.size.empty() == options_.scale_factor.empty())
    detail::fail<ShapeError>("Upsample", "give exactly one of size and scale_factor; got ", options_.size.size(), " sizes and ",
                             options_.scale_factor.size(), " scale factors");
}

Tensor Upsample::forward(const Tensor& input) {
  if (!options_.size.empty()) return interpolate(input, options_.size, options_.mode, options_.align_corners);
  return interpolate(input, options_.scale_factor, options_.mode, options_.align_corners);
}

}  // namespace kten::nn
