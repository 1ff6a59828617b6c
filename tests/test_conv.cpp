// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Convolutions and pad (issue 31): the errors they throw, naming the op or layer and the shapes,
// and the layers' parameters, initialisation and training. Values and gradients against PyTorch
// and finite differences are the harness' rows (tests/ops/op_rows.cpp, layer_rows.cpp). And the
// fixed divisions of the GPU kernel's gather (src/ops/fast_div.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>
#include <catch2/catch_approx.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "ops/conv.hpp"  // detail::conv_multiply_adds, the perf suite's count
#include "ops/fast_div.hpp"
#include "support.hpp"

using namespace kten;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

// The labels of the kernels f launches (Kokkos Tools' callback, from the launching thread).
std::vector<std::string>& launched() {
  static std::vector<std::string> labels;
  return labels;
}
void on_launch(const char* label, std::uint32_t, std::uint64_t*) { launched().emplace_back(label); }
template <class F>
std::vector<std::string> kernels_of(F f) {
  namespace tools = Kokkos::Tools::Experimental;
  struct Watch {
    Watch() { tools::set_begin_parallel_for_callback(on_launch); }
    ~Watch() { tools::set_begin_parallel_for_callback(nullptr); }
  };
  launched().clear();
  {
    const Watch watch;
    f();
  }
  return launched();
}
// How many of `labels` are of cpu()'s convolution path `path` ("[winograd]", "[direct]").
std::size_t launches_of(const std::vector<std::string>& labels, const std::string& path) {
  return static_cast<std::size_t>(
      std::count_if(labels.begin(), labels.end(), [&](const std::string& l) { return l.find(path) != std::string::npos; }));
}

// The message of the ShapeError that f throws ("" when it throws none).
template <class F>
std::string shape_error(F f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("convolutions refuse inputs that do not fit their weight, naming the op and the shapes", "[conv]") {
  const Device d = test::device();
  const Tensor x = ones({2, 4, 8, 8}, d), w = ones({6, 4, 3, 3}, d);
  CHECK_THAT(shape_error([&] { conv2d(x, ones({6, 3, 3, 3}, d)); }),
             ContainsSubstring("conv2d:") && ContainsSubstring("2x4x8x8") && ContainsSubstring("6x3x3x3"));
  CHECK_THAT(shape_error([&] { conv2d(x, ones({6, 2, 3, 3}, d), {}, {1}, {0}, {1}, 3); }),
             ContainsSubstring("groups 3") && ContainsSubstring("2x4x8x8"));
  CHECK_THAT(shape_error([&] { conv2d(x, ones({6, 4, 9, 9}, d)); }),
             ContainsSubstring("larger than the padded input") && ContainsSubstring("6x4x9x9"));
  CHECK(shape_error([&] { conv2d(x, ones({6, 4, 9, 9}, d), {}, {1}, {1}); }).empty());  // 8 + 2 padded
  CHECK_THAT(shape_error([&] { conv2d(x, w, ones({5}, d)); }), ContainsSubstring("bias"));
  CHECK_THAT(shape_error([&] { conv2d(x, w, {}, {0}); }), ContainsSubstring("stride"));
  CHECK_THAT(shape_error([&] { conv2d(x, w, {}, {1, 1, 1}); }), ContainsSubstring("1 or 2 values"));
  CHECK_THAT(shape_error([&] { conv1d(x, w); }), ContainsSubstring("conv1d:") && ContainsSubstring("2x4x8x8"));
  CHECK_THAT(shape_error([&] { conv3d(ones({1, 2, 1, 1, 1}, d), ones({2, 2, 1, 1, 1}, d), {}, {1}, {0}, {1}, 0); }),
             ContainsSubstring("groups must be >= 1"));
  // Transposed: an output size below 1, an output_padding neither below the stride nor the dilation.
  CHECK_THAT(shape_error([&] { conv_transpose2d(ones({1, 4, 1, 1}, d), ones({4, 2, 1, 1}, d), {}, {1}, {1}); }),
             ContainsSubstring("below 1") && ContainsSubstring("conv_transpose2d:"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(ones({1, 4, 5}, d), ones({4, 2, 3}, d), {}, {2}, {0}, {2}); }),
             ContainsSubstring("output_padding"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(ones({1, 3, 5}, d), ones({4, 2, 3}, d)); }),
             ContainsSubstring("1x3x5") && ContainsSubstring("4x2x3"));
  // Attributes near 2^63 (a caller's or a model file's) are refused before a size wraps (the ONNX
  // fuzzer's ConvTranspose with group = 2^63 - 1 overflowed the output channels).
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  const Tensor x1 = ones({1, 1, 5}, d), w1 = ones({1, 1, 3}, d);
  CHECK_THAT(shape_error([&] { conv1d(x1, w1, {}, {1}, {huge}); }), ContainsSubstring("overflows 64 bits"));
  CHECK_THAT(shape_error([&] { conv1d(x1, w1, {}, {1}, {0}, {huge}); }), ContainsSubstring("overflows 64 bits"));
  CHECK_THAT(shape_error([&] { conv1d(ones({1, 0, 5}, d), ones({0, 2, 3}, d), {}, {1}, {0}, {1}, huge); }),
             ContainsSubstring("overflows 64 bits"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(ones({1, 0, 5}, d), ones({0, 3, 3}, d), {}, {1}, {0}, {0}, huge); }),
             ContainsSubstring("overflows 64 bits"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(x1, w1, {}, {huge}); }), ContainsSubstring("overflows 64 bits"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(x1, w1, {}, {1}, {0}, {0}, 1, {huge}); }),
             ContainsSubstring("overflows 64 bits"));
  CHECK_THROWS_AS(conv2d(x, ones({6, 4, 3, 3}, d, float64)), DTypeError);
  CHECK_THROWS_AS(conv2d(ones({2, 4, 8, 8}, d, int64), ones({6, 4, 3, 3}, d, int64)), DTypeError);
  // An empty spatial axis, even where padding or a transposed kernel would give an output (PyTorch
  // refuses both; the GPU gather's divisions by the extents once met a 0 here).
  CHECK_THAT(shape_error([&] { conv1d(ones({1, 1, 0}, d), ones({1, 1, 1}, d), {}, {1}, {1}); }),
             ContainsSubstring("empty spatial axis") && ContainsSubstring("1x1x0"));
  CHECK_THAT(shape_error([&] { conv_transpose1d(ones({1, 1, 0}, d), ones({1, 1, 3}, d)); }),
             ContainsSubstring("empty spatial axis") && ContainsSubstring("conv_transpose1d:"));
}

TEST_CASE("pad refuses a mode on an axis it cannot take, naming the mode and the shape", "[conv]") {
  const Device d = test::device();
  const Tensor x = ones({1, 1, 3, 4}, d);
  CHECK_THAT(shape_error([&] { pad(x, {1, 1, 3, 0}, nn::PaddingMode::reflect); }),
             ContainsSubstring("reflect") && ContainsSubstring("1x1x3x4") && ContainsSubstring("smaller than the axis"));
  CHECK(shape_error([&] { pad(x, {3, 3, 2, 2}, nn::PaddingMode::reflect); }).empty());
  CHECK_THAT(shape_error([&] { pad(x, {5, 0}, nn::PaddingMode::circular); }), ContainsSubstring("circular"));
  CHECK(shape_error([&] { pad(x, {4, 4, 3, 3}, nn::PaddingMode::circular); }).empty());
  CHECK_THAT(shape_error([&] { pad(ones({2, 0}, d), {1, 1}, nn::PaddingMode::replicate); }), ContainsSubstring("empty"));
  CHECK_THAT(shape_error([&] { pad(x, {1, 1, 1}); }), ContainsSubstring("pairs"));
  CHECK_THAT(shape_error([&] { pad(x, {-1, 1}); }), ContainsSubstring(">= 0"));
  // An extent past 64 bits is refused before it is summed (it wrapped negative: undefined behaviour).
  CHECK_THAT(shape_error([&] { pad(x, {std::int64_t{1} << 62, std::int64_t{1} << 62}); }), ContainsSubstring("64 bits"));
  const Tensor y = pad(x, {1, 2, 0, 1}, nn::PaddingMode::zeros, 0.5);
  CHECK(y.shape() == Shape{1, 1, 4, 7});
  CHECK(y.sum().item<float>() == Approx(12 + 0.5 * (28 - 12)));
}

// The host pads a whole row of the last axis per index, a GPU one element: rows that are all
// padding, a scalar (one row of one element) and a single row (one index on the host).
TEST_CASE("pad fills whole padded rows, a scalar and a single row", "[conv]") {
  const Device d = test::device();
  CHECK(pad(full(Shape{}, 3.5, d), Shape{}).item<float>() == 3.5f);
  CHECK(pad(tensor(std::vector<float>{1, 2, 3}, Shape{3}, d), {2, 1}, nn::PaddingMode::circular).to_vector<float>() ==
        std::vector<float>{2, 3, 1, 2, 3, 1});
  CHECK(pad(tensor(std::vector<float>{1, 2, 3}, Shape{3}, d), {1, 2}, nn::PaddingMode::reflect).to_vector<float>() ==
        std::vector<float>{2, 1, 2, 3, 2, 1});
  const Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, Shape{1, 2, 2}, d);
  CHECK(pad(x, {1, 0, 1, 1}, nn::PaddingMode::zeros, 7).to_vector<float>() ==
        std::vector<float>{7, 7, 7, 7, 1, 2, 7, 3, 4, 7, 7, 7});
  CHECK(pad(x.transpose(1, 2), {0, 1, 1, 0}, nn::PaddingMode::replicate).to_vector<float>() ==
        std::vector<float>{1, 3, 3, 1, 3, 3, 2, 4, 4});
}

TEST_CASE("an infinite weight times the zero padding is NaN, forward and input gradient, on rows of a vector and more", "[conv]") {
  // Rows of 32: cpu()'s direct path with 8 channels, its Winograd path with 32 (which runs the
  // direct one when the weight is not finite), a GPU's gather.
  const Device d = test::device();
  const std::int64_t h = 3, w = 32;
  for (const std::int64_t ch : {8, 32}) {
    INFO(ch << " channels");
    std::vector<float> wv(static_cast<std::size_t>(ch * ch * 9), 0.01f);
    wv[static_cast<std::size_t>((2 * ch + 5) * 9)] = INFINITY;  // output channel 2, input channel 5, tap (0, 0)
    const Tensor weight = tensor(wv, Shape{ch, ch, 3, 3}, d);
    const Tensor x = (arange(ch * h * w, d).reshape({1, ch, h, w}) * 0.001).requires_grad_();
    const Tensor y = conv2d(x, weight, {}, {1}, {1});
    sum(y).backward();
    const std::vector<float> yv = y.to_vector<float>(), gx = x.grad().to_vector<float>();
    for (std::int64_t c = 0; c < ch; ++c)
      for (std::int64_t i = 0; i < h; ++i)
        for (std::int64_t j = 0; j < w; ++j) {
          INFO("channel " << c << ", pixel (" << i << ", " << j << ")");
          const float out = yv[static_cast<std::size_t>((c * h + i) * w + j)], grad = gx[static_cast<std::size_t>((c * h + i) * w + j)];
          // y: tap (0, 0) of output pixel (i, j) reads x at (i - 1, j - 1); the padding where i or j is 0.
          if (c != 2) CHECK(std::isfinite(out));
          else if (i == 0 || j == 0) CHECK(std::isnan(out));
          else CHECK(out == INFINITY);
          // dx: input pixel (i, j) gets tap (0, 0) from dy at (i + 1, j + 1); the padding on the last row and column.
          if (c != 5) CHECK(std::isfinite(grad));
          else if (i == h - 1 || j == w - 1) CHECK(std::isnan(grad));
          else CHECK(grad == INFINITY);
        }
  }
}

TEST_CASE("an infinite input reaches only the outputs whose window holds it, forward and input gradient", "[conv]") {
  // 32 channels: cpu()'s Winograd path, whose transforms would spread the infinity over whole
  // tiles; it then runs the direct convolution. 8 channels: the direct path. The infinity in 2-D
  // inside and in the last, partial tile along w (4x4 tiles: 34 = 8 x 4 + 2), in 3-D in the last,
  // partial tile of every axis (odd extents).
  struct Case {
    std::int64_t d, h, w, at_d, at_h, at_w;
  };
  const Device d = test::device();
  for (const Case& g : {Case{1, 6, 34, 0, 2, 5}, Case{1, 6, 34, 0, 5, 33}, Case{3, 5, 33, 2, 4, 32}})
    for (const std::int64_t ch : {8, 32}) {
      const bool three_d = g.d > 1;
      INFO((three_d ? "conv3d" : "conv2d") << " of " << ch << " channels");
      const std::int64_t volume = g.d * g.h * g.w;
      const Shape shape = three_d ? Shape{1, ch, g.d, g.h, g.w} : Shape{1, ch, g.h, g.w};
      const Tensor weight = full(three_d ? Shape{ch, ch, 3, 3, 3} : Shape{ch, ch, 3, 3}, 0.01, d);
      std::vector<float> xv(static_cast<std::size_t>(ch * volume), 0.5f);
      xv[static_cast<std::size_t>(3 * volume + (g.at_d * g.h + g.at_h) * g.w + g.at_w)] = INFINITY;  // channel 3
      const Tensor x = tensor(xv, shape, d).requires_grad_();
      Tensor y;
      const std::vector<std::string> kernels = kernels_of([&] {
        y = three_d ? conv3d(x, weight, {}, {1}, {1}) : conv2d(x, weight, {}, {1}, {1});
        y.backward(tensor(xv, shape, d));  // dY infinite at the same pixel
        synchronize(d);
      });
      CHECK(launches_of(kernels, "[winograd]") == (d.is_cpu() && ch == 32 ? 2 : 0));
      if (ch == 32) CHECK(launches_of(kernels, "[direct]") == (d.is_cpu() ? 2 : 0));  // Winograd's products run again
      const std::vector<float> out = y.to_vector<float>(), gx = x.grad().to_vector<float>();
      for (std::int64_t c = 0; c < ch; ++c)
        for (std::int64_t i = 0; i < g.d; ++i)
          for (std::int64_t j = 0; j < g.h; ++j)
            for (std::int64_t k = 0; k < g.w; ++k) {
              INFO("channel " << c << ", pixel (" << i << ", " << j << ", " << k << ")");
              const std::size_t at = static_cast<std::size_t>(c * volume + (i * g.h + j) * g.w + k);
              // every channel reads channel 3 there
              const bool window = std::abs(i - g.at_d) <= 1 && std::abs(j - g.at_h) <= 1 && std::abs(k - g.at_w) <= 1;
              CHECK((window ? out[at] == INFINITY : std::isfinite(out[at])));
              CHECK((window ? gx[at] == INFINITY : std::isfinite(gx[at])));
            }
    }
}

TEST_CASE("cpu() runs 3x3 convolutions of at least 16 channels (2-D float32) or 32 as Winograd, fewer directly", "[conv]") {
  // The kernels' labels say which path ran; finite values keep Winograd's result. 2-D float32 is
  // F(4x4, 3x3) from 16 channels, 2-D float64 F(2x2, 3x3) and 3-D F(2x2x2, 3x3x3) from 32; 912
  // channels on each side are too many for F(4x4)'s smallest block and take F(2x2).
  struct Case {
    std::int64_t dims, channels;
    DType dtype;
    bool winograd;
  };
  const Device d = test::device();
  for (const Case& c : {Case{2, 8, DType::float32, false}, Case{2, 16, DType::float32, true}, Case{2, 16, DType::float64, false},
                        Case{2, 32, DType::float64, true}, Case{3, 16, DType::float32, false}, Case{3, 32, DType::float32, true},
                        Case{2, 912, DType::float32, true}}) {
    INFO(c.dims << "-D, " << c.channels << " channels, " << (c.dtype == DType::float32 ? "float32" : "float64"));
    const std::int64_t ch = c.channels;
    const std::int64_t height = ch > 32 ? 2 : 6, width = ch > 32 ? 8 : 32;  // the wide layer on a small image
    const Shape xs = c.dims == 2 ? Shape{1, ch, height, width} : Shape{1, ch, 3, 4, 32};
    const Shape ws = c.dims == 2 ? Shape{ch, ch, 3, 3} : Shape{ch, ch, 3, 3, 3};
    const Tensor x = rand(xs, d, 1).astype(c.dtype).requires_grad_(), w = rand(ws, d, 2).astype(c.dtype);  // rows of whole vectors
    const std::vector<std::string> kernels = kernels_of([&] {
      const Tensor y = c.dims == 2 ? conv2d(x, w, {}, {1}, {1}) : conv3d(x, w, {}, {1}, {1});
      sum(y).backward();  // the forward and the input gradient
      synchronize(d);
    });
    CHECK(launches_of(kernels, "[winograd]") == (d.is_cpu() && c.winograd ? 2 : 0));
    CHECK(launches_of(kernels, "[direct]") == (d.is_cpu() && !c.winograd ? 2 : 0));
    // The arithmetic those paths do, as the perf suite counts it: Winograd's tiles x points per
    // product where it ran (forward and input gradient), the direct count elsewhere.
    const int r = c.dims == 2 && c.dtype == DType::float32 && ch < 912 ? 4 : 2;
    double pixels = 1, tiles = 1;
    for (std::size_t a = 2; a < xs.size(); ++a) pixels *= static_cast<double>(xs[a]), tiles *= static_cast<double>((xs[a] + r - 1) / r);
    const double direct = static_cast<double>(ch * ch) * (c.dims == 2 ? 9 : 27) * pixels;
    const double winograd = static_cast<double>(ch * ch) * tiles * std::pow(r + 2, c.dims);
    CHECK(detail::conv_multiply_adds(static_cast<int>(c.dims), x, w, {1}, {1}, {1}, 1) ==
          (d.is_cpu() && c.winograd ? 2 * winograd + direct : 3 * direct));
  }
}

TEST_CASE("3x3 and 3x3x3 convolutions with many channels match a float64 loop, forward and both gradients", "[conv]") {
  // cpu()'s Winograd path of the forward and input gradient (at least 32 channels on both sides;
  // 16 in 2-D float32, where float64 takes the direct path): odd extents (a partial last tile along
  // each axis), padding 0, 1 and 2, groups, a bias, a strided input.
  struct Case {
    Shape x, w;
    std::int64_t pad, groups;
  };
  const Device d = test::device();
  // 461 pixels along w: two blocks of tiles along a row, the last tile partial (float32's 4x4
  // tiles: 116 in blocks of 113 and 3; float64's 2x2: 231 in blocks of 128 and 103). 125 rows
  // (float32: 32 tile rows in blocks of 28 and 4; float64: 63 in blocks of 16). Padding 3: the
  // input gradient's E starts a pixel inside dY. 3-D (2x2x2 tiles): odd extents along every axis.
  // 912 channels on each side: too wide for F(4x4)'s smallest block, float32 takes F(2x2, 3x3).
  for (const Case& c : {Case{{2, 32, 9, 35}, {40, 32, 3, 3}, 2, 1}, Case{{1, 64, 7, 20}, {64, 32, 3, 3}, 0, 2},
                        Case{{1, 912, 2, 8}, {912, 912, 3, 3}, 1, 1},
                        Case{{2, 16, 10, 13}, {16, 16, 3, 3}, 1, 1}, Case{{1, 32, 3, 461}, {32, 32, 3, 3}, 1, 1},
                        Case{{1, 32, 125, 16}, {32, 32, 3, 3}, 1, 1},
                        Case{{1, 32, 5, 19}, {32, 32, 3, 3}, 3, 1}, Case{{1, 32, 7, 9, 11}, {32, 32, 3, 3, 3}, 1, 1}})
    for (const DType dtype : {DType::float32, DType::float64}) {
      // The 912-channel layer is here for cpu()'s float32 F(2x2, 3x3); a GPU runs the direct kernel
      // the other cases check (on the emulated GPU this one case took 269 s).
      if (c.x[1] == 912 && (!d.is_cpu() || dtype != DType::float32)) continue;
      const bool three_d = c.x.size() == 5;
      INFO((three_d ? "conv3d" : "conv2d") << ", padding " << c.pad << ", " << c.groups << " groups, "
                                           << (dtype == DType::float32 ? "float32" : "float64"));
      // x as a permuted view of a (N, H, C, ..., W)-ordered tensor: not contiguous.
      Shape stored = c.x;
      std::swap(stored[1], stored[2]);
      std::vector<int> order(c.x.size());
      for (std::size_t a = 0; a < order.size(); ++a) order[a] = static_cast<int>(a);
      std::swap(order[1], order[2]);
      const Tensor x = rand(stored, d, 1).astype(dtype).permute(order).requires_grad_();
      const Tensor w = (rand(c.w, d, 2).astype(dtype) - 0.5).requires_grad_(), b = rand({c.w[0]}, d, 3).astype(dtype);
      const Tensor y = three_d ? conv3d(x, w, b, {1}, {c.pad}, {1}, c.groups) : conv2d(x, w, b, {1}, {c.pad}, {1}, c.groups);
      const Tensor dy = rand(y.shape(), d, 4).astype(dtype) - 0.5;
      y.backward(dy);
      // (N, C, D, H, W) extents, 2-D with D = 1 and no padding along it.
      const auto ext = [&](const Shape& s) {
        return three_d ? std::vector<std::int64_t>{s[0], s[1], s[2], s[3], s[4]}
                       : std::vector<std::int64_t>{s[0], s[1], 1, s[2], s[3]};
      };
      const std::vector<std::int64_t> xe = ext(c.x), we = ext(c.w), ye = ext(y.shape());
      const std::int64_t pd = three_d ? c.pad : 0, cin_g = we[1], cout_g = we[0] / c.groups;
      const auto doubles = [](const Tensor& t) { return t.contiguous().astype(DType::float64).to_vector<double>(); };
      const std::vector<double> xv = doubles(x), wv = doubles(w), bv = doubles(b), dyv = doubles(dy), yv = doubles(y),
                                gx = doubles(x.grad()), gw = doubles(w.grad());
      std::vector<double> y_ref(yv.size()), y_mag(yv.size()), gx_ref(gx.size(), 0.0), gx_mag(gx.size(), 0.0),
          gw_ref(gw.size(), 0.0), gw_mag(gw.size(), 0.0);
      for (std::int64_t n = 0; n < ye[0]; ++n)
        for (std::int64_t o = 0; o < ye[1]; ++o)
          for (std::int64_t od = 0; od < ye[2]; ++od)
            for (std::int64_t oh = 0; oh < ye[3]; ++oh)
              for (std::int64_t ow = 0; ow < ye[4]; ++ow) {
                const std::size_t yi = static_cast<std::size_t>((((n * ye[1] + o) * ye[2] + od) * ye[3] + oh) * ye[4] + ow);
                double sum = bv[static_cast<std::size_t>(o)], magnitude = std::abs(sum);
                for (std::int64_t i = 0; i < cin_g; ++i)
                  for (std::int64_t kd = 0; kd < we[2]; ++kd)
                    for (std::int64_t kh = 0; kh < we[3]; ++kh)
                      for (std::int64_t kw = 0; kw < we[4]; ++kw) {
                        const std::int64_t id = od - pd + kd, ih = oh - c.pad + kh, iw = ow - c.pad + kw;
                        if (id < 0 || id >= xe[2] || ih < 0 || ih >= xe[3] || iw < 0 || iw >= xe[4]) continue;
                        const std::int64_t ci = o / cout_g * cin_g + i;
                        const std::size_t xi =
                            static_cast<std::size_t>((((n * xe[1] + ci) * xe[2] + id) * xe[3] + ih) * xe[4] + iw);
                        const std::size_t wi =
                            static_cast<std::size_t>((((o * we[1] + i) * we[2] + kd) * we[3] + kh) * we[4] + kw);
                        const double wt = wv[wi];
                        sum += wt * xv[xi];
                        magnitude += std::abs(wt * xv[xi]);
                        gx_ref[xi] += wt * dyv[yi];
                        gx_mag[xi] += std::abs(wt * dyv[yi]);
                        gw_ref[wi] += dyv[yi] * xv[xi];
                        gw_mag[wi] += std::abs(dyv[yi] * xv[xi]);
                      }
                y_ref[yi] = sum;
                y_mag[yi] = magnitude;
              }
      // In float32, 2-D Winograd's 4x4 tiles bound an output's rounding by the sums of |w x| of its
      // tile's outputs, not its own: where the padding makes one output's sum small beside its
      // neighbours' (padding 3), the measure is the largest sum within 3 pixels along each axis.
      if (dtype == DType::float32 && !three_d) {
        const auto widen = [](std::vector<double>& mag, const std::vector<std::int64_t>& e) {
          const std::vector<double> own = mag;
          for (std::int64_t plane = 0; plane < e[0] * e[1]; ++plane)
            for (std::int64_t h = 0; h < e[3]; ++h)
              for (std::int64_t w = 0; w < e[4]; ++w)
                for (std::int64_t nh = std::max<std::int64_t>(0, h - 3); nh <= std::min(e[3] - 1, h + 3); ++nh)
                  for (std::int64_t nw = std::max<std::int64_t>(0, w - 3); nw <= std::min(e[4] - 1, w + 3); ++nw) {
                    double& m = mag[static_cast<std::size_t>((plane * e[3] + h) * e[4] + w)];
                    m = std::max(m, own[static_cast<std::size_t>((plane * e[3] + nh) * e[4] + nw)]);
                  }
        };
        widen(y_mag, ye);
        widen(gx_mag, xe);
      }
      double worst_y = 0, worst_gx = 0, worst_gw = 0;
      for (std::size_t i = 0; i < yv.size(); ++i) worst_y = std::max(worst_y, std::abs(yv[i] - y_ref[i]) / y_mag[i]);
      for (std::size_t i = 0; i < gx.size(); ++i)
        worst_gx = std::max(worst_gx, gx_mag[i] > 0 ? std::abs(gx[i] - gx_ref[i]) / gx_mag[i] : std::abs(gx[i]));
      for (std::size_t i = 0; i < gw.size(); ++i) worst_gw = std::max(worst_gw, std::abs(gw[i] - gw_ref[i]) / gw_mag[i]);
      const double tolerance = dtype == DType::float32 ? 1e-5 : 1e-13;
      CHECK(worst_y < tolerance);
      CHECK(worst_gx < tolerance);
      CHECK(worst_gw < tolerance);
    }
}

TEST_CASE("a non-finite dY times the zero padding is NaN in the weight gradient", "[conv]") {
  // The taps of output pixel (0, 0) that read the padding add 0 * inf: NaN, as the whole sum and
  // PyTorch give; the others add x * inf with x > 0. Rows of 32 over two chunks of rows (cpu()'s
  // ConvWeightHostKernel), 3-D too.
  const Device d = test::device();
  for (const bool three_d : {false, true}) {
    INFO((three_d ? "conv3d" : "conv2d"));
    const std::int64_t c = 8, h = 20, w = 32, taps = three_d ? 27 : 9;
    const Shape x_shape = three_d ? Shape{1, c, 2, h, w} : Shape{1, c, h, w};
    const Tensor x = arange(c * h * w * (three_d ? 2 : 1), d).reshape(x_shape) * 0.001 + 1.0;
    const Tensor weight = full(three_d ? Shape{c, c, 3, 3, 3} : Shape{c, c, 3, 3}, 0.01, d).requires_grad_();
    const Tensor y = three_d ? conv3d(x, weight, {}, {1}, {1}) : conv2d(x, weight, {}, {1}, {1});
    std::vector<float> dy(static_cast<std::size_t>(y.numel()), 1.0f);
    dy[static_cast<std::size_t>(2 * y.numel() / c)] = INFINITY;  // output channel 2, pixel (0, 0(, 0))
    y.backward(tensor(dy, y.shape(), d));
    const std::vector<float> gw = weight.grad().to_vector<float>();
    for (std::int64_t o = 0; o < c; ++o)
      for (std::int64_t i = 0; i < c; ++i)
        for (std::int64_t t = 0; t < taps; ++t) {
          INFO("output channel " << o << ", input channel " << i << ", tap " << t);
          const float v = gw[static_cast<std::size_t>((o * c + i) * taps + t)];
          const bool padding = t % 3 == 0 || t / 3 % 3 == 0 || (three_d && t / 9 == 0);  // kw, kh or kd 0
          if (o != 2) CHECK(std::isfinite(v));
          else if (padding) CHECK(std::isnan(v));
          else CHECK(v == INFINITY);
        }
  }
}

TEST_CASE("the weight gradient over many rows, planes and slabs matches a float64 loop", "[conv]") {
  // Larger than the harness's rows: more output rows per plane than one of cpu()'s chunks (16),
  // planes within a chunk's slab, two slabs per batch item, stride 2 along h, dilation along w.
  struct Case {
    Shape x, w;
    std::int64_t stride_h, pad, dil_w;
  };
  const Device d = test::device();
  for (const Case& c :
       {Case{{1, 8, 96, 48}, {8, 8, 3, 3}, 2, 1, 1}, Case{{2, 8, 37, 29}, {6, 8, 3, 3}, 1, 2, 2},
        Case{{1, 8, 4, 20, 32}, {8, 8, 3, 3, 3}, 1, 1, 1}})
    for (const DType dtype : {DType::float32, DType::float64}) {
      // The 912-channel layer is here for cpu()'s float32 F(2x2, 3x3); a GPU runs the direct kernel
      // the other cases check (on the emulated GPU this one case took 269 s).
      if (c.x[1] == 912 && (!d.is_cpu() || dtype != DType::float32)) continue;
      const bool three_d = c.x.size() == 5;
      INFO((three_d ? "conv3d" : "conv2d") << " of " << c.x[1] << " channels, stride along h " << c.stride_h
                                           << ", " << (dtype == DType::float32 ? "float32" : "float64"));
      const Tensor x = rand(c.x, d, 1).astype(dtype), w = rand(c.w, d, 2).astype(dtype).requires_grad_();
      const Shape stride = three_d ? Shape{1, c.stride_h, 1} : Shape{c.stride_h, 1};
      const Shape dilation = three_d ? Shape{1, 1, c.dil_w} : Shape{1, c.dil_w};
      const Tensor y =
          three_d ? conv3d(x, w, {}, stride, {c.pad}, dilation) : conv2d(x, w, {}, stride, {c.pad}, dilation);
      const Tensor dy = rand(y.shape(), d, 3).astype(dtype);
      y.backward(dy);
      // (N, C, D, H, W) extents, 2-D with D = 1 and no padding along it.
      const auto ext = [&](const Shape& s) {
        return three_d ? std::vector<std::int64_t>{s[0], s[1], s[2], s[3], s[4]}
                       : std::vector<std::int64_t>{s[0], s[1], 1, s[2], s[3]};
      };
      const std::vector<std::int64_t> xe = ext(c.x), we = ext(c.w), ye = ext(y.shape());
      const std::int64_t pd = three_d ? c.pad : 0, s_h = c.stride_h;
      const std::vector<double> xv = x.astype(DType::float64).to_vector<double>(),
                                yv = dy.astype(DType::float64).to_vector<double>(),
                                gw = w.grad().astype(DType::float64).to_vector<double>();
      std::size_t at = 0;
      double worst = 0;
      for (std::int64_t o = 0; o < we[0]; ++o)
        for (std::int64_t i = 0; i < we[1]; ++i)
          for (std::int64_t kd = 0; kd < we[2]; ++kd)
            for (std::int64_t kh = 0; kh < we[3]; ++kh)
              for (std::int64_t kw = 0; kw < we[4]; ++kw, ++at) {
                double sum = 0, magnitude = 0;
                for (std::int64_t n = 0; n < ye[0]; ++n)
                  for (std::int64_t od = 0; od < ye[2]; ++od)
                    for (std::int64_t oh = 0; oh < ye[3]; ++oh)
                      for (std::int64_t ow = 0; ow < ye[4]; ++ow) {
                        const std::int64_t id = od - pd + kd, ih = oh * s_h - c.pad + kh,
                                           iw = ow - c.pad + kw * c.dil_w;
                        if (id < 0 || id >= xe[2] || ih < 0 || ih >= xe[3] || iw < 0 || iw >= xe[4]) continue;
                        const double term = yv[static_cast<std::size_t>(
                                                (((n * ye[1] + o) * ye[2] + od) * ye[3] + oh) * ye[4] + ow)] *
                                            xv[static_cast<std::size_t>(
                                                (((n * xe[1] + i) * xe[2] + id) * xe[3] + ih) * xe[4] + iw)];
                        sum += term;
                        magnitude += std::abs(term);
                      }
                worst = std::max(worst, std::abs(gw[at] - sum) / magnitude);
              }
      CHECK(at == gw.size());
      CHECK(worst < (dtype == DType::float32 ? 1e-5 : 1e-13));
    }
}

TEST_CASE("convolutions with no output or input channels give empty results and gradients", "[conv]") {
  const Device d = test::device();
  const Tensor x = ones({1, 8, 3, 32}, d);
  CHECK(conv2d(x, ones({0, 8, 3, 3}, d), {}, {1}, {1}).shape() == Shape{1, 0, 3, 32});
  CHECK(conv_transpose2d(x, ones({8, 0, 3, 3}, d), {}, {1}, {1}).shape() == Shape{1, 0, 3, 32});
  const Tensor empty_x = zeros({1, 0, 3, 32}, d).requires_grad_();
  const Tensor y = conv2d(empty_x, ones({8, 0, 3, 3}, d), {}, {1}, {1});
  CHECK(y.to_vector<float>() == std::vector<float>(8 * 3 * 32, 0.0f));
  sum(y).backward();
  CHECK(empty_x.grad().shape() == Shape{1, 0, 3, 32});
}

TEST_CASE("convolution layers have PyTorch's parameters and initialisation, and name themselves in errors", "[conv]") {
  const Device d = test::device();
  nn::ConvOptions o;
  o.groups = 2;
  o.seed = 3;
  nn::Conv2d conv(4, 6, {3, 2}, o);
  conv.to(d);
  const auto params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].name == "weight");
  CHECK(params[0].slot->value.shape() == Shape{6, 2, 3, 2});
  CHECK(params[1].name == "bias");
  CHECK(params[1].slot->value.shape() == Shape{6});
  const double bound = 1 / std::sqrt(2.0 * 3 * 2);  // fan_in = in / groups * kernel volume
  CHECK(conv.weight().abs().max().item<float>() <= bound);
  CHECK(conv.bias().abs().max().item<float>() <= bound);
  CHECK(conv(ones({1, 4, 5, 5}, d)).shape() == Shape{1, 6, 3, 4});
  CHECK(conv(ones({4, 5, 5}, d)).shape() == Shape{6, 3, 4});  // unbatched
  CHECK_THAT(shape_error([&] { conv(ones({1, 3, 5, 5}, d)); }), ContainsSubstring("Conv2d") && ContainsSubstring("1x3x5x5"));
  CHECK_THROWS_AS(nn::Conv2d(4, 6, {3}, o)(ones({1, 4, 5, 5}, cpu(), float64)), DTypeError);
  CHECK_THROWS_AS(nn::Conv2d(3, 6, {3}, o), ShapeError);  // groups 2 does not divide 3
  nn::ConvTransposeOptions t;
  t.stride = {2};
  t.bias = false;
  nn::ConvTranspose3d up(4, 2, {2}, t);
  CHECK(up.named_parameters().size() == 1);
  CHECK(up.weight().shape() == Shape{4, 2, 2, 2, 2});
  CHECK(up(ones({1, 4, 2, 3, 4})).shape() == Shape{1, 2, 4, 6, 8});
  nn::ConvOptions reflect;
  reflect.padding = {2};
  reflect.padding_mode = nn::PaddingMode::reflect;
  CHECK_THAT(shape_error([&] { nn::Conv1d(1, 1, {3}, reflect)(ones({1, 1, 2})); }),
             ContainsSubstring("Conv1d") && ContainsSubstring("reflect") && ContainsSubstring("1x1x2"));
}

TEST_CASE("a periodic convolution layer trains", "[conv]") {
  const Device d = test::device();
  nn::ConvOptions o;
  o.padding = {1};
  o.padding_mode = nn::PaddingMode::circular;
  o.seed = 1;
  nn::Conv2d conv(2, 2, {3}, o);
  conv.to(d);
  // The target: a fixed periodic stencil of the input.
  const Tensor x = rand({4, 2, 6, 6}, d, 7), w = rand({2, 2, 3, 3}, d, 8) - 0.5;
  const Tensor target = conv2d(pad(x, {1, 1, 1, 1}, nn::PaddingMode::circular), w);
  optim::SGD sgd(0.1);
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    sgd.zero_grad(conv);
    Tensor loss = nn::MSELoss()(conv(x), target);
    loss.backward();
    sgd.step(conv);
    last = loss.item<float>();
    if (step == 0) first = last;
  }
  CHECK(last < 0.05 * first);
}

TEST_CASE("FastDiv divides exactly: by multiply-high below 2^31, plainly above, by one as identity", "[conv]") {
  std::mt19937_64 rng(5);
  const std::int64_t limit = (std::int64_t(1) << 31) - 1;
  for (std::int64_t d : {std::int64_t(1), std::int64_t(2), std::int64_t(3), std::int64_t(5), std::int64_t(7), std::int64_t(9),
                         std::int64_t(27), std::int64_t(64), std::int64_t(100), std::int64_t(127), std::int64_t(4095),
                         std::int64_t(65535), (std::int64_t(1) << 20) + 3, (std::int64_t(1) << 30) + 1, limit}) {
    INFO("divisor " << d);
    const detail::FastDiv fast(d, limit);
    std::vector<std::int64_t> numerators = {0, 1, d - 1, d, d + 1, limit, limit - 1, limit - limit % d, limit - limit % d - 1};
    for (int i = 0; i < 20000; ++i) numerators.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit + 1)));
    for (std::int64_t n : numerators) {
      if (n < 0 || n > limit) continue;
      INFO("numerator " << n);
      REQUIRE(fast.div(n) == n / d);
    }
    const detail::FastDiv wide(d, std::int64_t(1) << 40);  // indices past 2^31: a plain division
    for (std::int64_t n : {std::int64_t(0), d, (std::int64_t(1) << 40) - 1, (std::int64_t(1) << 35) + 17})
      REQUIRE(wide.div(n) == n / d);
  }
}
