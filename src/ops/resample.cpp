// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Resampling (F.interpolate): nearest, linear, bilinear and trilinear, each with its gradient. One
// kernel serves every mode and rank: the input is a stack of 3-D grids (grid.hpp), and each grid
// axis takes one tap (nearest, or an axis in front of a 1-D or 2-D grid) or two (the linear
// family), with PyTorch 1.13's CPU source indices and weights, so values agree with it to rounding
// and NaN/inf propagate as there (a two-tap axis multiplies both taps, even by a weight of 0). One
// difference, in float32: the linear family's scale and source indices are computed in double for
// both dtypes (PyTorch's float32 computes the scale in float32), so float32 reads the taps that
// float64 reads, with the same weights rounded, where a source index near a whole number would
// otherwise fall on either side of it.
//
// Forward: one thread per output element, which reads its 1 to 8 taps in place through the
// input's strides. Gradient: a gather, one thread per input element, which sums the output
// gradients that read it, times their weights (the outputs reading an input element are a range
// along each axis, found by bisection since the source indices grow with the output index; on the
// host, stepped along a row): the same bits on every run and device, no atomics.
// On the host an index covers a row along the last axis (grid.hpp's GridWalk).
// Bound: memory. The forward writes each output once and reads each input element about once
// (neighbouring outputs share taps, from cache); the gradient reads each output gradient about
// once per tap and writes the input gradient once.
#include <algorithm>
#include <cmath>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"
#include "core/kokkos_compat.hpp"
#include "dispatch/dispatch.hpp"
#include "grid.hpp"
#include "registry.hpp"
#include "transfer.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief One grid axis of a resampling, independent of the element type: extents, taps, and the
/// scale the user gave (0: none, the extents decide).
struct ResampleSpec {
  std::int64_t in = 1, out = 1;
  bool linear = false;  ///< \brief two taps (the linear family) or one (nearest; axes not resampled)
  bool align_corners = false;
  double scale = 0;
};

/// \brief A ResampleSpec ready for element type T: where output j reads the input.
template <class T>
struct ResampleAxis {
  std::int64_t in = 1, out = 1;
  bool linear = false, align_corners = false;
  double ratio = 1;         ///< \brief linear: PyTorch's area_pixel_compute_scale (in double, for both dtypes)
  float nearest_scale = 1;  ///< \brief nearest: PyTorch's compute_scales_value<float>

  ResampleAxis() = default;
  explicit ResampleAxis(const ResampleSpec& s) : in(s.in), out(s.out), linear(s.linear), align_corners(s.align_corners) {
    if (s.align_corners) ratio = s.out > 1 ? static_cast<double>(s.in - 1) / static_cast<double>(s.out - 1) : 0.0;
    else ratio = s.scale > 0 ? 1.0 / s.scale : static_cast<double>(s.in) / static_cast<double>(s.out);
    nearest_scale = s.scale > 0 ? static_cast<float>(1.0 / s.scale) : static_cast<float>(s.in) / static_cast<float>(s.out);
  }

  /// \brief PyTorch's nearest_idx: floor(j scale) in float, with its exact cases.
  KOKKOS_INLINE_FUNCTION std::int64_t nearest(std::int64_t j) const {
    if (out == in) return j;
    if (out == 2 * in) return j >> 1;
    const auto i = static_cast<std::int64_t>(static_cast<float>(j) * nearest_scale);  // >= 0: truncation is floor
    return i < in - 1 ? i : in - 1;
  }

  /// \brief Output j's taps i0, i1 and their weights l0, l1 (one tap: i1 = i0, l0 = 1, l1 = 0).
  /// The linear family's source index is computed in double, as PyTorch's CPU kernels do (their
  /// accumulation type for float is double), the weights rounded to T.
  KOKKOS_INLINE_FUNCTION void source(std::int64_t j, std::int64_t& i0, std::int64_t& i1, T& l0, T& l1) const {
    if (!linear || out == in) {
      i0 = i1 = linear ? j : nearest(j);
      l0 = T(1);
      l1 = T(0);
      return;
    }
    double src = align_corners ? ratio * static_cast<double>(j) : ratio * (static_cast<double>(j) + 0.5) - 0.5;
    if (src < 0) src = 0;
    i0 = static_cast<std::int64_t>(src);
    i1 = i0 + (i0 < in - 1 ? 1 : 0);
    l1 = static_cast<T>(src - static_cast<double>(i0));
    l0 = T(1) - l1;
  }

  /// \brief The weight with which output j reads input i (0 when it does not).
  KOKKOS_INLINE_FUNCTION KTEN_OUT_OF_LINE_ON_AMD T weight(std::int64_t j, std::int64_t i) const {
    std::int64_t i0, i1;
    T l0, l1;
    source(j, i0, i1, l0, l1);
    return (i0 == i ? l0 : T(0)) + (i1 == i ? l1 : T(0));
  }

  /// \brief The outputs [first, last) that read input i: the first whose i1 reaches i, to the
  /// first whose i0 passes it (both grow with j).
  KOKKOS_INLINE_FUNCTION void readers(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    first = first_output([&](std::int64_t, std::int64_t i1) { return i1 >= i; });
    last = first_output([&](std::int64_t i0, std::int64_t) { return i0 > i; });
  }

  /// \brief readers() of input i from those of input i - 1 (or 0 and 0 for i = 0): both only grow
  /// with i, so a row's inputs take O(1) steps each rather than a bisection each.
  KOKKOS_INLINE_FUNCTION void next_readers(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    std::int64_t i0, i1;
    T l0, l1;
    for (; first < out; ++first) {
      source(first, i0, i1, l0, l1);
      if (i1 >= i) break;
    }
    for (; last < out; ++last) {
      source(last, i0, i1, l0, l1);
      if (i0 > i) break;
    }
  }

  /// \brief The first output j in [0, out) whose taps satisfy `past` (false, then true as j
  /// grows); out when none does.
  template <class Past>
  KOKKOS_INLINE_FUNCTION std::int64_t first_output(const Past& past) const {
    std::int64_t lo = 0, hi = out;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      std::int64_t i0, i1;
      T l0, l1;
      source(mid, i0, i1, l0, l1);
      if (past(i0, i1)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
};

/// \brief A resampling: the input's planes and grid, and one axis per grid axis.
template <class T>
struct ResampleGrid {
  GridPlanes x;
  ResampleAxis<T> axis[3];
  std::int64_t out[3] = {1, 1, 1};

  ResampleGrid(const GridPlanes& planes, const ResampleSpec (&specs)[3]) : x(planes) {
    for (int a = 0; a < 3; ++a) {
      axis[a] = ResampleAxis<T>(specs[a]);
      out[a] = specs[a].out;
    }
  }
};

/// \brief y[o] from o's taps: along each two-tap axis t0 l0 + t1 l1 of the results along the
/// axes inside it (PyTorch's order), a one-tap axis its one value. Index i covers one output or a
/// row of them (GridWalk).
template <class T, bool Rows>
struct ResampleKernel {
  const T* x;
  T* y;
  ResampleGrid<T> g;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t i0[3], i1[3];
    T l0[3], l1[3];
    const std::int64_t* s = g.x.stride;
    const auto place = [&](int a, std::int64_t o) { g.axis[a].source(o, i0[a], i1[a], l0[a], l1[a]); };
    walk_outputs<Rows>(g, i, place, [&](std::int64_t o, std::int64_t at_plane) {
      const T* plane = x + at_plane;
      const auto along_w = [&](std::int64_t at) {
        const T t0 = plane[at + i0[2] * s[2]];
        return g.axis[2].linear ? t0 * l0[2] + plane[at + i1[2] * s[2]] * l1[2] : t0;
      };
      const auto along_h = [&](std::int64_t at) {
        const T t0 = along_w(at + i0[1] * s[1]);
        return g.axis[1].linear ? t0 * l0[1] + along_w(at + i1[1] * s[1]) * l1[1] : t0;
      };
      const T t0 = along_h(i0[0] * s[0]);
      y[o] = g.axis[0].linear ? t0 * l0[0] + along_h(i1[0] * s[0]) * l1[0] : t0;
    });
  }
};

/// \brief The gradient at an input element (gx contiguous; index i covers one or a row, GridWalk):
/// the sum over the outputs o that read it of gy[o] times the product of its weights along the
/// three axes, in the outputs' order.
template <class T, bool Rows>
struct ResampleGradKernel {
  const T* gy;
  T* gx;
  ResampleGrid<T> g;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    gather_inputs<Rows>(g, i, gx, [&](std::int64_t p, const auto& c, const auto& first, const auto& last) {
      T sum = 0;
      for (std::int64_t d = first[0]; d < last[0]; ++d) {
        const T wd = g.axis[0].weight(d, c[0]);
        for (std::int64_t h = first[1]; h < last[1]; ++h) {
          const T wh = wd * g.axis[1].weight(h, c[1]);
          const std::int64_t row = ((p * g.out[0] + d) * g.out[1] + h) * g.out[2];
          for (std::int64_t w = first[2]; w < last[2]; ++w) sum += gy[row + w] * (wh * g.axis[2].weight(w, c[2]));
        }
      }
      return sum;
    });
  }
};

// Each mode's kernel labels and its rank.
struct ModeInfo {
  const char* forward;
  const char* grad;
  int spatial;  // 0: any of 1 to 3 (nearest)
  const char* layout;
};
ModeInfo mode_info(nn::InterpolateMode mode) {
  switch (mode) {
    case nn::InterpolateMode::nearest: return {"kten::interpolate_nearest", "kten::interpolate_nearest_grad", 0, ""};
    case nn::InterpolateMode::linear: return {"kten::interpolate_linear", "kten::interpolate_linear_grad", 1, "(N, C, L)"};
    case nn::InterpolateMode::bilinear: return {"kten::interpolate_bilinear", "kten::interpolate_bilinear_grad", 2, "(N, C, H, W)"};
    case nn::InterpolateMode::trilinear: return {"kten::interpolate_trilinear", "kten::interpolate_trilinear_grad", 3, "(N, C, D, H, W)"};
  }
  fail("kten::interpolate", "unknown mode ", static_cast<int>(mode));
}

// F.interpolate to `size` or by `scale` (exactly one given).
Tensor interpolate_to(const Tensor& x, const Shape* size, const std::vector<double>* scale, nn::InterpolateMode mode,
                      bool align_corners) {
  const ModeInfo info = mode_info(mode);
  const char* op = info.forward;
  check_defined(x, op);
  const int spatial = info.spatial ? info.spatial : x.ndim() - 2;
  if (spatial < 1 || spatial > 3 || x.ndim() != spatial + 2)
    fail<ShapeError>(op, info.spatial ? "takes " : "takes (N, C, L), (N, C, H, W) or (N, C, D, H, W)", info.layout,
                     ", got shape ", x.shape());
  if (align_corners && !info.spatial)
    fail(op, "align_corners applies to the linear modes only (as PyTorch); nearest takes align_corners = false");
  const GridPlanes planes = grid_planes(op, x, spatial, /*unbatched=*/false);
  if (planes.channels == 0 || planes.plane_size() == 0)
    fail<ShapeError>(op, "expects non-empty channels and spatial axes (a batch of 0 is allowed), got shape ", x.shape());
  ResampleSpec specs[3];
  std::int64_t sizes[3] = {1, 1, 1};
  double scales[3] = {0, 0, 0};
  if (size) per_axis(op, "size", *size, spatial, 1, sizes);
  else per_axis(op, "scale", *scale, spatial, 0.0, scales);
  for (int a = 3 - spatial; a < 3; ++a) {
    const std::int64_t in = planes.extent[a];
    if (!size) {
      const double extent = std::floor(static_cast<double>(in) * scales[a]);  // PyTorch's output size
      if (!(scales[a] > 0) || !(extent < 0x1p62))
        fail<ShapeError>(op, "scale ", scales[a], " must be positive and finite, and keep the extents in range (input shape ",
                         x.shape(), ")");
      sizes[a] = static_cast<std::int64_t>(extent);
    }
    if (sizes[a] < 1)
      fail<ShapeError>(op, "the output extents must be >= 1; input shape ", x.shape(), " gives ", sizes[a], " along axis ",
                       x.ndim() - 3 + a);
    specs[a] = ResampleSpec{in, sizes[a], info.spatial != 0, align_corners, scales[a]};
  }
  Tensor y = empty(grid_result_shape(x, spatial, sizes), x.device(), x.dtype());
  launch_views(op, [&](const auto& backend, auto* px, auto* py) {
    using T = std::remove_pointer_t<decltype(px)>;
    constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
    for_each_index(op, backend, GridWalk<rows>::indices(y.numel(), sizes), ResampleKernel<T, rows>{px, py, ResampleGrid<T>(planes, specs)},
                   std::max(x.numel(), y.numel()));
  }, x, y);
  if (recording(x))
    record(op, y, {&x}, [info, planes, specs, x_shape = x.shape()](const Tensor& g_in, const Needs&) {
      const Tensor gy = g_in.contiguous();
      Tensor gx = empty(x_shape, gy.device(), gy.dtype());  // its grid is x's (the kernel uses no strides of x)
      launch(info.grad, [&](const auto& backend, auto* pgy, auto* pgx) {
        using T = std::remove_pointer_t<decltype(pgy)>;
        constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
        for_each_index(info.grad, backend, GridWalk<rows>::indices(gx.numel(), planes.extent),
                       ResampleGradKernel<T, rows>{pgy, pgx, ResampleGrid<T>(planes, specs)}, std::max(gx.numel(), gy.numel()));
      }, gy, gx);
      return Grads{gx};
    }, [&] {  // the output extents, the mode and align_corners; the scales when given (PyTorch's coordinates follow them)
      ops::OpAttrs a;
      a.ints.assign(sizes + 3 - spatial, sizes + 3);
      a.ints.push_back(static_cast<std::int64_t>(mode));
      a.ints.push_back(align_corners ? 1 : 0);
      if (!size) a.reals.assign(scales + 3 - spatial, scales + 3);
      return a;
    });
  return y;
}

}  // namespace
}  // namespace detail

Tensor interpolate(const Tensor& x, const Shape& size, nn::InterpolateMode mode, bool align_corners) {
  return detail::interpolate_to(x, &size, nullptr, mode, align_corners);
}

Tensor interpolate(const Tensor& x, const std::vector<double>& scale, nn::InterpolateMode mode, bool align_corners) {
  return detail::interpolate_to(x, nullptr, &scale, mode, align_corners);
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

void check_resize(const OnnxNode& n) {
  const std::string mode = node_text(n, "mode", "nearest");
  const std::string coordinates = node_text(n, "coordinate_transformation_mode", "half_pixel");
  if (mode == "nearest") {
    if (coordinates != "asymmetric")
      onnx_refuse(n, "nearest with coordinate_transformation_mode " + coordinates + " (asymmetric)");
    const std::string rounding = node_text(n, "nearest_mode", "round_prefer_floor");
    if (rounding != "floor") onnx_refuse(n, "nearest_mode " + rounding + " (floor)");
  } else if (mode == "linear") {
    if (coordinates != "half_pixel" && coordinates != "align_corners")
      onnx_refuse(
          n, "linear with coordinate_transformation_mode " + coordinates + " (half_pixel, align_corners)");
  } else {
    onnx_refuse(n, "mode " + mode + " (nearest, linear)");
  }
  if (node_int(n, "exclude_outside", 0) != 0) onnx_refuse(n, "exclude_outside 1");
  // Opset 18's: antialias (only 0, PyTorch's interpolate), keep_aspect_ratio_policy (only stretch,
  // sizes as given), axes (scales or sizes for those axes only).
  if (node_int(n, "antialias", 0) != 0) onnx_refuse(n, "antialias 1");
  const std::string policy = node_text(n, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") onnx_refuse(n, "keep_aspect_ratio_policy " + policy + " (stretch)");
  if (n.opset < 18)
    for (const char* newer : {"antialias", "keep_aspect_ratio_policy", "axes"})
      if (n.attributes.count(newer))
        onnx_invalid(n,
                     std::string(newer) + " is an attribute from opset 18, not " + std::to_string(n.opset));
}

// Resize's scales or sizes over every axis: opset 18's `axes` give them for those axes only, the
// others keep theirs (`unit`: 1 for scales, the extent for sizes).
template <class T>
std::vector<T> every_axis(const OnnxCall& c, const Tensor& x, std::vector<T> given,
                          const std::function<T(int)>& unit) {
  const OnnxAttribute* a = c.attr("axes");
  if (!a) return given;
  std::vector<int> axes;
  for (std::int64_t v : a->ints) axes.push_back(onnx_axis(c, v, x.ndim()));
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  refuse_repeated_axes(c, sorted);
  if (given.size() != axes.size())
    fail<FormatError>("onnx", c.where(), ": ", given.size(), " scales or sizes for ", axes.size(), " axes");
  std::vector<T> all;
  for (int i = 0; i < x.ndim(); ++i) all.push_back(unit(i));
  for (std::size_t i = 0; i < axes.size(); ++i) all[static_cast<std::size_t>(axes[i])] = given[i];
  return all;
}

std::vector<Tensor> onnx_resize(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int spatial = spatial_axes(c, x);
  const bool linear = node_text(c.node, "mode", "nearest") == "linear";
  const bool corners = node_text(c.node, "coordinate_transformation_mode", "half_pixel") == "align_corners";
  constexpr nn::InterpolateMode linear_by_rank[3] = {
      nn::InterpolateMode::linear, nn::InterpolateMode::bilinear, nn::InterpolateMode::trilinear};
  const nn::InterpolateMode mode = linear ? linear_by_rank[spatial - 1] : nn::InterpolateMode::nearest;
  // Scales when given (not empty), else sizes; the batch and channel axes keep their extents.
  if (c.has(2) && c.at(2).numel() > 0) {
    const Tensor& given = c.host.size() > 2 && c.host[2].defined() ? c.host[2] : c.at(2);
    std::vector<double> scales(static_cast<std::size_t>(given.numel()));
    if (!given.device().is_cpu())
      scales = given.astype(float64).to_vector<double>();
    else
      kten::detail::read_cpu_values(given.astype(float64), scales.data(), float64, scales.size());
    scales = every_axis<double>(c, x, scales, [](int) { return 1.0; });
    // ONNX's align_corners maps through the unrounded length (extent x scale), PyTorch's (kten's)
    // through the output's extent: they agree only where the product is a whole number.
    for (std::size_t a = 2; corners && a < scales.size(); ++a)
      if (const double length = static_cast<double>(x.size(static_cast<int>(a))) * scales[a];
          length != std::floor(length))
        fail<FormatError>("onnx", c.where(), ": align_corners with scale ", scales[a], " of extent ",
                          x.size(static_cast<int>(a)), " (a length of ", length,
                          ", not a whole number) is not supported; give sizes");
    if (scales.size() != static_cast<std::size_t>(x.ndim()) || scales[0] != 1 || scales[1] != 1)
      fail<FormatError>("onnx", c.where(),
                        ": scales must hold one per axis, 1 for the batch and channel axes");
    return {interpolate(x, std::vector<double>(scales.begin() + 2, scales.end()), mode, corners)};
  }
  if (!c.has(3)) fail<FormatError>("onnx", c.where(), ": neither scales nor sizes is given");
  const std::vector<std::int64_t> sizes =
      every_axis<std::int64_t>(c, x, c.ints(3), [&](int i) { return x.size(i); });
  if (sizes.size() != static_cast<std::size_t>(x.ndim()) || sizes[0] != x.size(0) || sizes[1] != x.size(1))
    fail<FormatError>("onnx", c.where(),
                      ": sizes must hold one per axis, the batch and channel axes' own extents");
  return {interpolate(x, Shape(sizes.begin() + 2, sizes.end()), mode, corners)};
}

// interpolate as Resize: by its scales when it was given them (PyTorch's coordinates follow the
// scales), else to its sizes, with the batch and channel extents taken from the input at run time.
std::function<std::string(OnnxEmit&)> resize_row(int dims) {
  return [dims](OnnxEmit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const std::vector<std::int64_t> sizes = e.ints(0, n);
    const auto mode = static_cast<nn::InterpolateMode>(e.i(n));
    const bool corners = e.i(n + 1) != 0;
    std::vector<OnnxAttr> attrs;
    if (mode == nn::InterpolateMode::nearest) {
      attrs = {attr_s("mode", "nearest"), attr_s("coordinate_transformation_mode", "asymmetric"),
               attr_s("nearest_mode", "floor")};
    } else {
      attrs = {attr_s("mode", "linear"),
               attr_s("coordinate_transformation_mode", corners ? "align_corners" : "half_pixel")};
    }
    // Scales are float in ONNX: used only when the float scale gives the same extents.
    bool by_scale = e.op.attrs.reals.size() == n;
    std::vector<float> scales{1.f, 1.f};
    for (std::size_t a = 0; by_scale && a < n; ++a) {
      scales.push_back(static_cast<float>(e.r(a)));
      by_scale = std::floor(static_cast<double>(e.t(0).shape()[a + 2]) *
                            static_cast<double>(scales.back())) == static_cast<double>(sizes[a]);
    }
    if (by_scale) return e.node("Resize", {e.in[0], "", e.w.constant(tensor(scales, cpu()))}, attrs);
    const std::string batch_channels = e.node("Shape", {e.in[0]}, {attr_i("start", 0), attr_i("end", 2)});
    const std::string shape = e.node("Concat", {batch_channels, e.w.ints(sizes)}, {attr_i("axis", 0)});
    return e.node("Resize", {e.in[0], "", "", shape}, attrs);
  };
}

}  // namespace

// The registry's rows of this family (registry.hpp). Attributes: interpolate_size's `ints` are the
// size (one value, or one per spatial axis), then the mode (nn::InterpolateMode's order) and
// align_corners (0 or 1); interpolate_scale's `reals` are the scale, its `ints` the mode and
// align_corners.
std::vector<OpDef> resample_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"interpolate_size", "interpolate(Tensor,Shape,nn::InterpolateMode,bool)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) {
         const std::size_t n = a.ints.size() < 2 ? 0 : a.ints.size() - 2;
         const auto mode = static_cast<nn::InterpolateMode>(a.ints.at(n));
         return interpolate(x[0], Shape(a.ints.begin(), a.ints.begin() + static_cast<std::ptrdiff_t>(n)), mode, a.ints.at(n + 1) != 0);
       }},
      {"interpolate_scale", "interpolate(Tensor,vector<double>,nn::InterpolateMode,bool)", 1, {Domain::real},
       DTypes::floating, true,
       [](X x, A a) { return interpolate(x[0], a.reals, static_cast<nn::InterpolateMode>(a.ints.at(0)), a.ints.at(1) != 0); }},
  };
  set_onnx(rows, "interpolate_size",
           {{"Resize", 13, kOnnxLastOpset, 1, 4, 1, true, onnx_resize, check_resize, 0b1110}},
           {{"kten::interpolate_linear", resize_row(1)},
            {"kten::interpolate_bilinear", resize_row(2)},
            {"kten::interpolate_trilinear", resize_row(3)},
            {"kten::interpolate_nearest", [](OnnxEmit& e) { return resize_row(e.t(0).ndim() - 2)(e); }}});
  return rows;
}

}  // namespace kten::ops
