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
    std::int64_t first, p, c[3], count, i0[3], i1[3];
    T l0[3], l1[3];
    GridWalk<Rows>::start(i, g.out, first, p, c, count);
    g.axis[0].source(c[0], i0[0], i1[0], l0[0], l1[0]);
    g.axis[1].source(c[1], i0[1], i1[1], l0[1], l1[1]);
    const T* plane = x + g.x.plane(p);
    const std::int64_t* s = g.x.stride;
    for (std::int64_t k = 0; k < count; ++k) {
      g.axis[2].source(c[2] + k, i0[2], i1[2], l0[2], l1[2]);
      const auto along_w = [&](std::int64_t at) {
        const T t0 = plane[at + i0[2] * s[2]];
        return g.axis[2].linear ? t0 * l0[2] + plane[at + i1[2] * s[2]] * l1[2] : t0;
      };
      const auto along_h = [&](std::int64_t at) {
        const T t0 = along_w(at + i0[1] * s[1]);
        return g.axis[1].linear ? t0 * l0[1] + along_w(at + i1[1] * s[1]) * l1[1] : t0;
      };
      const T t0 = along_h(i0[0] * s[0]);
      y[first + k] = g.axis[0].linear ? t0 * l0[0] + along_h(i1[0] * s[0]) * l1[0] : t0;
    }
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
    std::int64_t first_i, p, c[3], count, first[3], last[3];
    GridWalk<Rows>::start(i, g.x.extent, first_i, p, c, count);
    g.axis[0].readers(c[0], first[0], last[0]);
    g.axis[1].readers(c[1], first[1], last[1]);
    first[2] = last[2] = 0;
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t cw = c[2] + k;
      if constexpr (Rows) g.axis[2].next_readers(cw, first[2], last[2]);  // the row starts at c[2] = 0
      else g.axis[2].readers(cw, first[2], last[2]);
      T sum = 0;
      for (std::int64_t d = first[0]; d < last[0]; ++d) {
        const T wd = g.axis[0].weight(d, c[0]);
        for (std::int64_t h = first[1]; h < last[1]; ++h) {
          const T wh = wd * g.axis[1].weight(h, c[1]);
          const std::int64_t row = ((p * g.out[0] + d) * g.out[1] + h) * g.out[2];
          for (std::int64_t w = first[2]; w < last[2]; ++w) sum += gy[row + w] * (wh * g.axis[2].weight(w, cw));
        }
      }
      gx[first_i + k] = sum;
    }
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

// The registry's rows of this family (registry.hpp). Attributes: interpolate_size's `ints` are the
// size (one value, or one per spatial axis), then the mode (nn::InterpolateMode's order) and
// align_corners (0 or 1); interpolate_scale's `reals` are the scale, its `ints` the mode and
// align_corners.
std::vector<OpDef> resample_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  return {
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
}

}  // namespace kten::ops
