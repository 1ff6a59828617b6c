// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Pooling and resampling (issue 31 item 2): values worked out by hand, the conventions PyTorch
// keeps (NaN in a max window, ties, uneven adaptive bins, count_include_pad, align_corners), the
// errors, and the layers. On cpu() and the emulated GPU (test::device()); the op harness checks
// every form against kten on cpu() and against PyTorch, gradients included.
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

// 0, 1, ..., n - 1 in `shape` on the device under test.
Tensor iota(const Shape& shape) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return tensor(v, shape, test::device());
}

}  // namespace

TEST_CASE("max and average pooling take each window's largest element and mean", "[resample]") {
  const Tensor x = iota({1, 1, 4, 4});  // rows 0-3, 4-7, 8-11, 12-15
  test::require_allclose<double>(max_pool2d(x, {2}), {5, 7, 13, 15});
  test::require_allclose<double>(avg_pool2d(x, {2}), {2.5, 4.5, 10.5, 12.5});
  // A 3x3 window 2 apart on the input padded by 1: the corner window holds 0, 1, 4, 5 and 5 zeros.
  test::require_allclose<double>(avg_pool2d(x, {3}, {2}, {1}, false, true).select(2, 0).select(2, 0).reshape({-1}), {10.0 / 9});
  test::require_allclose<double>(avg_pool2d(x, {3}, {2}, {1}, false, false).select(2, 0).select(2, 0).reshape({-1}), {2.5});
  // ceil_mode adds a last window that starts inside the input: 5 elements, windows of 2 -> 3.
  const Tensor row = iota({1, 1, 5});
  test::require_allclose<double>(avg_pool1d(row, {2}, {}, {0}, true, true), {0.5, 2.5, 4});
  CHECK(max_pool1d(row, {2}).shape() == Shape{1, 1, 2});
  // Unbatched (C, L) as PyTorch.
  test::require_allclose<double>(max_pool1d(iota({2, 4}), {2}), {1, 3, 5, 7});
}

TEST_CASE("max pooling propagates NaN and sends the gradient to the first of tied elements", "[resample]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor(std::vector<double>{1, nan, 3, 2}, {1, 1, 4}, test::device());
  const std::vector<double> y = max_pool1d(x, {2}).to_vector<double>();
  CHECK(std::isnan(y[0]));
  CHECK(y[1] == 3);
  Tensor ties = tensor(std::vector<double>{2, 2, 1, 5}, {1, 1, 4}, test::device());
  ties.requires_grad_();
  max_pool1d(ties, {2}, {1}).sum().backward();  // windows (2, 2), (2, 1), (1, 5): elements 0, 1 and 3
  test::require_allclose<double>(ties.grad(), {1, 1, 0, 1});
}

TEST_CASE("adaptive average pooling covers uneven, overlapping bins as PyTorch", "[resample]") {
  // 5 elements into 3 bins: [0, 2), [1, 4), [3, 5).
  Tensor x = iota({1, 1, 5});
  x.requires_grad_();
  test::require_allclose<double>(adaptive_avg_pool1d(x, {3}), {0.5, 2, 3.5});
  adaptive_avg_pool1d(x, {3}).sum().backward();
  test::require_allclose<double>(x.grad(), {0.5, 0.5 + 1.0 / 3, 1.0 / 3, 1.0 / 3 + 0.5, 0.5});
  // More bins than elements: 2 elements into 3 bins, [0, 1), [0, 2), [1, 2).
  test::require_allclose<double>(adaptive_avg_pool1d(iota({1, 1, 2}), {3}), {0, 0.5, 1});
}

TEST_CASE("interpolate: nearest repeats, the linear modes follow align_corners", "[resample]") {
  const Tensor x = iota({1, 1, 3});
  test::require_allclose<double>(interpolate(x, Shape{6}), {0, 0, 1, 1, 2, 2});
  test::require_allclose<double>(interpolate(x, std::vector<double>{2.0}), {0, 0, 1, 1, 2, 2});
  // align_corners: the ends meet, sources 0, 0.5, ..., 2.
  test::require_allclose<double>(interpolate(x, Shape{5}, nn::InterpolateMode::linear, true), {0, 0.5, 1, 1.5, 2});
  // Without: sources (j + 0.5) 3/5 - 0.5, clamped at 0: 0, 0.4, 1, 1.6, 2 (the last clamped to the end).
  test::require_allclose<double>(interpolate(x, Shape{5}, nn::InterpolateMode::linear, false), {0, 0.4, 1, 1.6, 2});
  // Bilinear x2 of a 2x2: corners stay, the rest mix.
  const Tensor y = interpolate(iota({1, 1, 2, 2}), std::vector<double>{2.0}, nn::InterpolateMode::bilinear, false);
  test::require_allclose<double>(y.select(2, 0).reshape({-1}), {0, 0.25, 0.75, 1});
  // The gradient of the mean of an upsampling gives each input the share of the outputs it feeds.
  Tensor z = iota({1, 1, 3});
  z.requires_grad_();
  interpolate(z, Shape{5}, nn::InterpolateMode::linear, true).sum().backward();
  test::require_allclose<double>(z.grad(), {1.5, 2, 1.5});
}

TEST_CASE("pooling and interpolate refuse bad sizes with a ShapeError naming the op and the shapes", "[resample][errors]") {
  const Tensor x = iota({1, 2, 3, 3});
  CHECK_THROWS_AS(max_pool2d(x, {4}), ShapeError);
  CHECK_THROWS_WITH(max_pool2d(x, {4}), ContainsSubstring("max_pool2d") && ContainsSubstring("1x2x3x3"));
  CHECK_THROWS_AS(avg_pool2d(x, {2}, {1}, {2}), ShapeError);
  CHECK_THROWS_WITH(avg_pool2d(x, {2}, {1}, {2}), ContainsSubstring("avg_pool2d") && ContainsSubstring("half"));
  CHECK_THROWS_AS(max_pool2d(x, {2, 2, 2}), ShapeError);
  CHECK_THROWS_AS(max_pool2d(x, {0}), ShapeError);
  CHECK_THROWS_AS(max_pool3d(iota({2, 3, 3}), {2}), ShapeError);
  CHECK_THROWS_WITH(max_pool3d(iota({2, 3, 3}), {2}), ContainsSubstring("max_pool3d") && ContainsSubstring("2x3x3"));
  CHECK_THROWS_AS(adaptive_avg_pool2d(x, {0}), ShapeError);
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {0}), ContainsSubstring("adaptive_avg_pool2d"));
  CHECK_THROWS_AS(avg_pool2d(iota({1, 0, 3, 3}), {2}), ShapeError);
  CHECK_THROWS_AS(interpolate(x, Shape{4}, nn::InterpolateMode::linear), ShapeError);
  CHECK_THROWS_WITH(interpolate(x, Shape{4}, nn::InterpolateMode::linear), ContainsSubstring("interpolate_linear"));
  CHECK_THROWS_AS(interpolate(iota({2, 3}), Shape{4}), ShapeError);
  CHECK_THROWS_AS(interpolate(x, std::vector<double>{0.2}), ShapeError);  // floor(3 * 0.2) = 0
  CHECK_THROWS_AS(interpolate(x, Shape{0}), ShapeError);
  CHECK_THROWS_AS(interpolate(x, Shape{2}, nn::InterpolateMode::nearest, true), Error);
  nn::UpsampleOptions both;
  both.size = {4};
  both.scale_factor = {2.0};
  CHECK_THROWS_AS(nn::Upsample(both), ShapeError);
  CHECK_THROWS_WITH(nn::Upsample(both), ContainsSubstring("Upsample"));
  CHECK_THROWS_AS(nn::Upsample(nn::UpsampleOptions{}), ShapeError);
}

TEST_CASE("the pooling and Upsample layers call their functional forms and hold no state", "[resample][layers]") {
  // Modules take inputs on their own device (kten never copies implicitly): each is moved there.
  const Tensor x = iota({1, 1, 4, 4});
  const auto on_device = [](auto layer) {
    layer.to(test::device());
    return layer;
  };
  nn::MaxPool2d pool = on_device(nn::MaxPool2d({2}));
  CHECK(pool.name() == "MaxPool2d");
  CHECK(pool.state_dict().empty());
  test::require_allclose<double>(pool(x), {5, 7, 13, 15});
  nn::PoolOptions o;
  o.stride = {2};
  o.padding = {1};
  o.count_include_pad = false;
  CHECK(on_device(nn::AvgPool2d({3}, o))(x).shape() == Shape{1, 1, 2, 2});
  CHECK(on_device(nn::AdaptiveAvgPool3d({1}))(iota({1, 2, 2, 2, 2})).shape() == Shape{1, 2, 1, 1, 1});
  nn::UpsampleOptions up;
  up.scale_factor = {2.0};
  up.mode = nn::InterpolateMode::bilinear;
  CHECK(on_device(nn::Upsample(up))(x).shape() == Shape{1, 1, 8, 8});
  nn::Sequential net;
  net.to(test::device());
  net.add(nn::MaxPool2d({2}));
  net.add(nn::Upsample(up));
  CHECK(net(x).shape() == Shape{1, 1, 4, 4});
}
