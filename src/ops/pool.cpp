// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Pooling over 1, 2 or 3 spatial axes: max, average and adaptive average, each with its gradient.
// One kernel per kind serves every rank: the input is a stack of 3-D grids (grid.hpp), a 1-D or 2-D
// one with unit axes in front, read in place through its strides.
//
// Forward: one thread per output element, which reads its window and writes one value (max pooling
// also its arg max, when a gradient will be needed). Gradient: a gather, one thread per input
// element, which sums the outputs whose windows hold it (max pooling: those whose arg max it is),
// in the outputs' order: the same bits on every run and device, no atomics.
// On the host an index covers a row along the last axis (grid.hpp's GridWalk).
// Bound: memory. A k = s pooling reads each input element once and writes an output a k-th as
// large; its gradient reads the output gradient (and the arg max) once and writes the input
// gradient once. Overlapping windows (k > s) read an element k / s times per axis, from cache.
#include <algorithm>
#include <cmath>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checked.hpp"
#include "core/checks.hpp"
#include "core/fail.hpp"
#include "dispatch/dispatch.hpp"
#include "grid.hpp"
#include "pool.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief One axis of a pooling: output o's window of the input, and the outputs whose windows
/// hold input i. Either kernel-sized windows `stride` apart on the input padded by `pad` on both
/// sides (PyTorch's pooling with dilation 1), or adaptive bins [floor(o in / out), ceil((o + 1) in
/// / out)). A unit axis (in = out = kernel = 1) is the default.
struct PoolAxis {
  std::int64_t in = 1, out = 1, kernel = 1, stride = 1, pad = 0;
  bool adaptive = false;

  /// \brief Output o's window [lo, hi) within the input, and its extent `padded` counting the
  /// padding it covers (count_include_pad's divisor; avg_pool's window ends at in + pad at most).
  KOKKOS_INLINE_FUNCTION void window(std::int64_t o, std::int64_t& lo, std::int64_t& hi, std::int64_t& padded) const {
    if (adaptive) {
      lo = (o / out) * in + ((o % out) * in) / out;
      hi = 1 + ((o + 1) * in - 1) / out;
      padded = hi - lo;
      return;
    }
    const std::int64_t start = o * stride - pad;
    const std::int64_t end = start + kernel < in + pad ? start + kernel : in + pad;
    padded = end - start;
    lo = start > 0 ? start : 0;
    hi = end < in ? end : in;
  }

  /// \brief The outputs [first, last) whose windows hold input element i (last <= first: none).
  KOKKOS_INLINE_FUNCTION void readers(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    if (adaptive) {
      first = (i * out) / in;
      last = ((i + 1) * out + in - 1) / in;
      return;
    }
    // o * stride - pad <= i < o * stride - pad + kernel
    const std::int64_t reach = i + pad - kernel;
    first = reach < 0 ? 0 : reach / stride + 1;
    last = (i + pad) / stride + 1;
    if (last > out) last = out;
  }

  /// \brief readers() of input i from those of input i - 1 (or 0 and 0 for i = 0): both only grow
  /// with i, so a row's inputs take O(1) steps each, with no division.
  KOKKOS_INLINE_FUNCTION void next_readers(std::int64_t i, std::int64_t& first, std::int64_t& last) const {
    if (adaptive) {  // bin o holds i when o in < (i + 1) out and (o + 1) in > i out
      while (first < out && (first + 1) * in <= i * out) ++first;
      while (last < out && last * in < (i + 1) * out) ++last;
      return;
    }
    while (first < out && first * stride - pad + kernel <= i) ++first;
    while (last < out && last * stride - pad <= i) ++last;
  }
};

/// \brief A pooling: the input's planes and grid, and one PoolAxis per grid axis.
struct PoolGrid {
  GridPlanes x;
  PoolAxis axis[3];
  std::int64_t out[3] = {1, 1, 1};  ///< \brief the output grid (axis[a].out)
};

/// \brief An output's window along every axis (PoolAxis::window), set an axis at a time.
struct Window {
  std::int64_t lo[3], hi[3], padded[3];
  KOKKOS_INLINE_FUNCTION void set(const PoolGrid& g, int a, std::int64_t o) { g.axis[a].window(o, lo[a], hi[a], padded[a]); }
  /// \brief avg_pool's divisor: the window's extent with or without the padding it covers.
  KOKKOS_INLINE_FUNCTION std::int64_t divisor(bool count_pad) const {
    return count_pad ? padded[0] * padded[1] * padded[2] : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
  }
};

/// \brief y[o] = the largest element of o's window, NaN when one is NaN; with Indices, arg[o] =
/// its offset (d H + h) W + w within its plane: the first of tied elements, the last NaN, the
/// window's first element when all are -inf (PyTorch's CPU kernels, whose gradients go there).
/// Index i covers one output or a row of them (GridWalk).
template <class T, bool Indices, bool Rows>
struct MaxPoolKernel {
  const T* x;
  T* y;
  std::int64_t* arg;
  PoolGrid g;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    Window win;
    const std::int64_t e1 = g.x.extent[1], e2 = g.x.extent[2];
    walk_outputs<Rows>(g, i, [&](int a, std::int64_t o) { win.set(g, a, o); }, [&](std::int64_t o, std::int64_t at) {
      const T* plane = x + at;
      T best = -static_cast<T>(INFINITY);
      std::int64_t best_at = (win.lo[0] * e1 + win.lo[1]) * e2 + win.lo[2];
      for (std::int64_t d = win.lo[0]; d < win.hi[0]; ++d)
        for (std::int64_t h = win.lo[1]; h < win.hi[1]; ++h)
          for (std::int64_t w = win.lo[2]; w < win.hi[2]; ++w) {
            const T v = plane[g.x.at(d, h, w)];
            if (v > best || v != v) {
              best = v;
              best_at = (d * e1 + h) * e2 + w;
            }
          }
      y[o] = best;
      if constexpr (Indices) arg[o] = best_at;
    });
  }
};

/// \brief y[o] = the sum of o's window / its divisor (Window::divisor); index i covers one output
/// or a row of them (GridWalk).
template <class T, bool Rows>
struct AvgPoolKernel {
  const T* x;
  T* y;
  PoolGrid g;
  bool count_pad;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    Window win;
    walk_outputs<Rows>(g, i, [&](int a, std::int64_t o) { win.set(g, a, o); }, [&](std::int64_t o, std::int64_t at) {
      const T* plane = x + at;
      T sum = 0;
      for (std::int64_t d = win.lo[0]; d < win.hi[0]; ++d)
        for (std::int64_t h = win.lo[1]; h < win.hi[1]; ++h)
          for (std::int64_t w = win.lo[2]; w < win.hi[2]; ++w) sum += plane[g.x.at(d, h, w)];
      y[o] = sum / static_cast<T>(win.divisor(count_pad));
    });
  }
};

/// \brief An input element's offset (d H + h) W + w within its plane (MaxPoolKernel's arg max).
KOKKOS_INLINE_FUNCTION std::int64_t plane_offset(const PoolGrid& g, const std::int64_t (&c)[3]) {
  return (c[0] * g.x.extent[1] + c[1]) * g.x.extent[2] + c[2];
}

/// \brief The flat index of output (d, h, w) of plane p.
KOKKOS_INLINE_FUNCTION std::int64_t output_at(const PoolGrid& g, std::int64_t p, std::int64_t d, std::int64_t h, std::int64_t w) {
  return ((p * g.out[0] + d) * g.out[1] + h) * g.out[2] + w;
}

/// \brief Max pooling's gradient at an input element: the sum of gy over the outputs whose arg
/// max it is, in the outputs' order.
template <class T, bool Rows>
struct MaxPoolGradKernel {
  const T* gy;
  const std::int64_t* arg;
  T* gx;
  PoolGrid g;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    gather_inputs<Rows>(g, i, gx, [&](std::int64_t p, const auto& c, const auto& first, const auto& last) {
      const std::int64_t at = plane_offset(g, c);
      T sum = 0;
      for (std::int64_t d = first[0]; d < last[0]; ++d)
        for (std::int64_t h = first[1]; h < last[1]; ++h)
          for (std::int64_t w = first[2]; w < last[2]; ++w) {
            const std::int64_t o = output_at(g, p, d, h, w);
            if (arg[o] == at) sum += gy[o];
          }
      return sum;
    });
  }
};

/// \brief Average pooling's gradient at an input element: the sum of gy[o] / the divisor of o over
/// the outputs o whose windows hold it, in the outputs' order.
template <class T, bool Rows>
struct AvgPoolGradKernel {
  const T* gy;
  T* gx;
  PoolGrid g;
  bool count_pad;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    gather_inputs<Rows>(g, i, gx, [&](std::int64_t p, const auto&, const auto& first, const auto& last) {
      T sum = 0;
      Window win;
      for (std::int64_t d = first[0]; d < last[0]; ++d) {
        win.set(g, 0, d);
        for (std::int64_t h = first[1]; h < last[1]; ++h) {
          win.set(g, 1, h);
          for (std::int64_t w = first[2]; w < last[2]; ++w) {
            win.set(g, 2, w);
            sum += gy[output_at(g, p, d, h, w)] / static_cast<T>(win.divisor(count_pad));
          }
        }
      }
      return sum;
    });
  }
};

/// \brief An op's kernel labels, by its number of spatial axes.
struct PoolLabels {
  const char* forward;
  const char* grad;
};
constexpr PoolLabels max_pool_labels[3] = {{"kten::max_pool1d", "kten::max_pool1d_grad"},
                                           {"kten::max_pool2d", "kten::max_pool2d_grad"},
                                           {"kten::max_pool3d", "kten::max_pool3d_grad"}};
constexpr PoolLabels avg_pool_labels[3] = {{"kten::avg_pool1d", "kten::avg_pool1d_grad"},
                                           {"kten::avg_pool2d", "kten::avg_pool2d_grad"},
                                           {"kten::avg_pool3d", "kten::avg_pool3d_grad"}};
constexpr PoolLabels adaptive_labels[3] = {{"kten::adaptive_avg_pool1d", "kten::adaptive_avg_pool1d_grad"},
                                           {"kten::adaptive_avg_pool2d", "kten::adaptive_avg_pool2d_grad"},
                                           {"kten::adaptive_avg_pool3d", "kten::adaptive_avg_pool3d_grad"}};

// a + b, or a ShapeError naming the op when the sum of sizes does not fit.
std::int64_t add_sizes(const char* op, std::int64_t a, std::int64_t b) {
  const auto sum = checked_add(a, b);
  if (!sum) fail<ShapeError>(op, "the sizes ", a, " and ", b, " overflow 64-bit arithmetic");
  return *sum;
}

// PyTorch's pooling checks: C and the grid non-empty (a batch of 0 is allowed).
void check_planes(const char* op, const Tensor& x, const GridPlanes& g) {
  if (g.channels == 0 || g.plane_size() == 0)
    fail<ShapeError>(op, "expects non-empty channels and spatial axes (a batch of 0 is allowed), got shape ", x.shape());
}

// The pooling of x over its last `spatial` axes by windows of `kernel` elements, `stride` apart
// (empty: the kernel), on x padded by `padding` on both sides; ShapeError where PyTorch refuses.
PoolGrid pool_grid(const char* op, const Tensor& x, int spatial, const Shape& kernel, const Shape& stride,
                   const Shape& padding, bool ceil_mode) {
  PoolGrid g;
  g.x = grid_planes(op, x, spatial, /*unbatched=*/true);
  check_planes(op, x, g.x);
  std::int64_t k[3], s[3], p[3];
  per_axis(op, "kernel", kernel, spatial, 1, k);
  per_axis(op, "stride", stride.empty() ? kernel : stride, spatial, 1, s);
  per_axis(op, "padding", padding, spatial, 0, p);
  for (int a = 3 - spatial; a < 3; ++a) {
    if (k[a] < 1 || s[a] < 1 || p[a] < 0)
      fail<ShapeError>(op, "kernel and stride must be >= 1 and padding >= 0; got ", k[a], ", ", s[a], " and ", p[a],
                       " along an axis (input shape ", x.shape(), ")");
    if (p[a] > k[a] / 2)
      fail<ShapeError>(op, "padding ", padding, " is more than half the kernel ", kernel, " (as PyTorch refuses)");
    const std::int64_t in = g.x.extent[a], padded = add_sizes(op, in, 2 * p[a]);
    if (k[a] > padded)
      fail<ShapeError>(op, "kernel ", kernel, " is larger than the input ", x.shape(), " padded by ", padding,
                       ": the output would be empty");
    // PyTorch's pooling_output_shape: the last window starts inside the input or its left padding.
    std::int64_t out = add_sizes(op, padded - k[a], ceil_mode ? s[a] - 1 : 0) / s[a] + 1;
    if (ceil_mode && (out - 1) * s[a] >= in + p[a]) --out;
    g.axis[a] = PoolAxis{in, out, k[a], s[a], p[a], false};
    g.out[a] = out;
  }
  return g;
}

// Adaptive pooling of x's last `spatial` axes to `output_size`.
PoolGrid adaptive_grid(const char* op, const Tensor& x, int spatial, const Shape& output_size) {
  PoolGrid g;
  g.x = grid_planes(op, x, spatial, /*unbatched=*/true);
  check_planes(op, x, g.x);
  std::int64_t out[3];
  per_axis(op, "output_size", output_size, spatial, 1, out);
  for (int a = 3 - spatial; a < 3; ++a) {
    if (out[a] < 1) fail<ShapeError>(op, "output_size ", output_size, " must be >= 1 (input shape ", x.shape(), ")");
    if (!checked_mul(g.x.extent[a] + 1, out[a] + 1))  // the bins' arithmetic forms (o + 1) in and (i + 1) out
      fail<ShapeError>(op, "output_size ", output_size, " and input shape ", x.shape(), " overflow 64-bit arithmetic");
    g.axis[a] = PoolAxis{g.x.extent[a], out[a], 1, 1, 0, true};
    g.out[a] = out[a];
  }
  return g;
}

// The elements a pooling touches: its outputs, and its input once.
std::int64_t pool_work(const Tensor& x, const Tensor& y) { return std::max(x.numel(), y.numel()); }

// A pooling's attributes for a trace, in the registry's form: kernel, stride and padding (one per
// spatial axis each), then `flags`; an adaptive pooling's are its output size.
ops::OpAttrs pool_attrs(const PoolGrid& g, int spatial, std::initializer_list<bool> flags) {
  ops::OpAttrs a;
  if (g.axis[2].adaptive) {
    a.ints.assign(g.out + 3 - spatial, g.out + 3);
    return a;
  }
  for (int i = 3 - spatial; i < 3; ++i) a.ints.push_back(g.axis[i].kernel);
  for (int i = 3 - spatial; i < 3; ++i) a.ints.push_back(g.axis[i].stride);
  for (int i = 3 - spatial; i < 3; ++i) a.ints.push_back(g.axis[i].pad);
  for (bool f : flags) a.ints.push_back(f ? 1 : 0);
  return a;
}

}  // namespace

Tensor max_pool(const Tensor& x, int spatial, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode) {
  const PoolLabels label = max_pool_labels[spatial - 1];
  const PoolGrid g = pool_grid(label.forward, x, spatial, kernel, stride, padding, ceil_mode);
  Tensor y = empty(grid_result_shape(x, spatial, g.out), x.device(), x.dtype());
  const std::int64_t work = pool_work(x, y);
  if (!recording(x)) {
    launch_views(label.forward, [&](const auto& backend, auto* px, auto* py) {
      using T = std::remove_pointer_t<decltype(px)>;
      constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
      for_each_index(label.forward, backend, GridWalk<rows>::indices(y.numel(), g.out),
                     MaxPoolKernel<T, false, rows>{px, py, nullptr, g}, work);
    }, x, y);
    return y;
  }
  const Tensor arg = empty(y.shape(), x.device(), DType::int64);
  launch_views(label.forward, [&](const auto& backend, auto* px, auto* py, std::int64_t* pa) {
    using T = std::remove_pointer_t<decltype(px)>;
    constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
    for_each_index(label.forward, backend, GridWalk<rows>::indices(y.numel(), g.out), MaxPoolKernel<T, true, rows>{px, py, pa, g},
                   work);
  }, x, y, Fixed<std::int64_t>{arg});
  record(label.forward, y, {&x}, [label, g, arg, x_shape = x.shape()](const Tensor& g_in, const Needs&) {
    const Tensor gy = g_in.contiguous();
    Tensor gx = empty(x_shape, gy.device(), gy.dtype());
    launch(label.grad, [&](const auto& backend, auto* pgy, auto* pgx, const std::int64_t* pa) {
      using T = std::remove_pointer_t<decltype(pgy)>;
      constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
      for_each_index(label.grad, backend, GridWalk<rows>::indices(gx.numel(), g.x.extent), MaxPoolGradKernel<T, rows>{pgy, pa, pgx, g},
                     pool_work(gx, gy));
    }, gy, gx, Fixed<std::int64_t>{arg});
    return Grads{gx};
  }, [&] { return pool_attrs(g, spatial, {ceil_mode}); });
  return y;
}

namespace {

// Average pooling (avg_pool and adaptive_avg_pool) of x over the grid g.
Tensor avg_pool(const PoolLabels& label, int spatial, const Tensor& x, const PoolGrid& g, bool ceil_mode, bool count_pad) {
  Tensor y = empty(grid_result_shape(x, spatial, g.out), x.device(), x.dtype());
  launch_views(label.forward, [&](const auto& backend, auto* px, auto* py) {
    using T = std::remove_pointer_t<decltype(px)>;
    constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
    for_each_index(label.forward, backend, GridWalk<rows>::indices(y.numel(), g.out), AvgPoolKernel<T, rows>{px, py, g, count_pad},
                   pool_work(x, y));
  }, x, y);
  if (recording(x))
    record(label.forward, y, {&x}, [label, g, count_pad, x_shape = x.shape()](const Tensor& g_in, const Needs&) {
      const Tensor gy = g_in.contiguous();
      Tensor gx = empty(x_shape, gy.device(), gy.dtype());
      launch(label.grad, [&](const auto& backend, auto* pgy, auto* pgx) {
        using T = std::remove_pointer_t<decltype(pgy)>;
        constexpr bool rows = std::decay_t<decltype(backend)>::is_host;
        for_each_index(label.grad, backend, GridWalk<rows>::indices(gx.numel(), g.x.extent),
                       AvgPoolGradKernel<T, rows>{pgy, pgx, g, count_pad}, pool_work(gx, gy));
      }, gy, gx);
      return Grads{gx};
    }, [&] { return pool_attrs(g, spatial, {ceil_mode, count_pad}); });
  return y;
}

Tensor avg_pool_of(int spatial, const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding,
                   bool ceil_mode, bool count_include_pad) {
  const PoolLabels label = avg_pool_labels[spatial - 1];
  return avg_pool(label, spatial, x, pool_grid(label.forward, x, spatial, kernel, stride, padding, ceil_mode), ceil_mode,
                  count_include_pad);
}

Tensor adaptive_avg_pool_of(int spatial, const Tensor& x, const Shape& output_size) {
  const PoolLabels label = adaptive_labels[spatial - 1];
  return avg_pool(label, spatial, x, adaptive_grid(label.forward, x, spatial, output_size), false, true);
}

}  // namespace
}  // namespace detail

Tensor max_pool1d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding) {
  return detail::max_pool(x, 1, kernel, stride, padding, false);
}
Tensor max_pool2d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding) {
  return detail::max_pool(x, 2, kernel, stride, padding, false);
}
Tensor max_pool3d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding) {
  return detail::max_pool(x, 3, kernel, stride, padding, false);
}
Tensor avg_pool1d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  return detail::avg_pool_of(1, x, kernel, stride, padding, ceil_mode, count_include_pad);
}
Tensor avg_pool2d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  return detail::avg_pool_of(2, x, kernel, stride, padding, ceil_mode, count_include_pad);
}
Tensor avg_pool3d(const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  return detail::avg_pool_of(3, x, kernel, stride, padding, ceil_mode, count_include_pad);
}
Tensor adaptive_avg_pool1d(const Tensor& x, const Shape& output_size) { return detail::adaptive_avg_pool_of(1, x, output_size); }
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) { return detail::adaptive_avg_pool_of(2, x, output_size); }
Tensor adaptive_avg_pool3d(const Tensor& x, const Shape& output_size) { return detail::adaptive_avg_pool_of(3, x, output_size); }

}  // namespace kten

namespace kten::ops {

namespace {
// A pooling's sizes from attrs.ints: kernel, stride and padding, `per` values each, then `flags`
// 0/1 values (avg_pool's ceil_mode and count_include_pad).
struct PoolSizes {
  Shape kernel, stride, padding;
  bool flag(std::size_t i) const { return flags.at(i) != 0; }
  Shape flags;
};
PoolSizes pool_sizes(const OpAttrs& a, std::size_t flags) {
  if (a.ints.size() < flags || (a.ints.size() - flags) % 3 != 0)
    detail::fail("kten::ops", "a pooling's attributes are kernel, stride and padding (equally many values), then ", flags, " flags");
  const auto per = static_cast<std::ptrdiff_t>((a.ints.size() - flags) / 3);
  const auto at = a.ints.begin();
  return {Shape(at, at + per), Shape(at + per, at + 2 * per), Shape(at + 2 * per, at + 3 * per), Shape(at + 3 * per, a.ints.end())};
}
}  // namespace

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

void check_max_pool(const OnnxNode& n) {
  check_window(n, /*same_allowed=*/true);
  if (node_int(n, "storage_order", 0) != 0) onnx_refuse(n, "storage_order 1");
  if (n.outputs.size() > 1 && n.outputs[1] >= 0) onnx_refuse(n, "the Indices output");
  const auto it = n.attributes.find("dilations");
  if (it != n.attributes.end())
    for (std::int64_t d : it->second.ints)
      if (d != 1) onnx_refuse(n, "a dilation of " + std::to_string(d));
}

std::vector<Tensor> onnx_max_pool(OnnxCall& c) {
  Tensor x = c.at(0);
  const int spatial = spatial_axes(c, x);
  Window win = window_of(c, x, {});
  if (c.attr_int("ceil_mode", 0) != 0)
    for (int i = 0; i < spatial; ++i) {
      // The last window may run past the end, as long as it starts inside the input or its left pad.
      const std::int64_t span = x.size(i + 2) + win.begin[i] + win.end[i];
      std::int64_t out = (span - win.kernel[i] + win.stride[i] - 1) / win.stride[i] + 1;
      if ((out - 1) * win.stride[i] >= x.size(i + 2) + win.begin[i]) --out;
      win.end[i] += std::max<std::int64_t>(0, (out - 1) * win.stride[i] + win.kernel[i] - span);
    }
  if (!win.pool_pads()) {  // -inf never wins a window
    x = pad(x, torch_pads(win.begin, win.end), nn::PaddingMode::zeros,
            -std::numeric_limits<double>::infinity());
    win.begin.assign(win.begin.size(), 0);
  }
  using Pool = Tensor (*)(const Tensor&, const Shape&, const Shape&, const Shape&);
  const Pool by_rank[3] = {max_pool1d, max_pool2d, max_pool3d};
  return {by_rank[spatial - 1](x, win.kernel, win.stride, win.begin)};
}

void check_average_pool(const OnnxNode& n) {
  check_window(n, /*same_allowed=*/true);
  const auto dilations = n.attributes.find("dilations");  // an attribute from opset 19
  if (dilations != n.attributes.end())
    for (std::int64_t d : dilations->second.ints)
      if (d != 1) onnx_refuse(n, "a dilation of " + std::to_string(d));
  // Pads the pool cannot take are padded first, and then which ceil_mode windows count the end pad
  // would differ.
  const auto pads = n.attributes.find("pads"), kernel = n.attributes.find("kernel_shape");
  if (pads != n.attributes.end() && kernel != n.attributes.end() && node_int(n, "ceil_mode", 0) != 0) {
    const std::vector<std::int64_t>& p = pads->second.ints;
    const std::vector<std::int64_t>& k = kernel->second.ints;
    for (std::size_t i = 0; i < p.size() / 2 && i < k.size(); ++i)
      if (p[i] != p[i + p.size() / 2] || 2 * p[i] > k[i])
        onnx_refuse(n, "pads uneven or over half the kernel (" + std::to_string(p[i]) + " and " +
                           std::to_string(p[i + p.size() / 2]) + " for a kernel of " + std::to_string(k[i]) +
                           ") with ceil_mode 1");
  }
}

std::vector<Tensor> onnx_average_pool(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const int spatial = spatial_axes(c, x);
  const Window win = window_of(c, x, {});
  const bool ceil_mode = c.attr_int("ceil_mode", 0) != 0, count_pad = c.attr_int("count_include_pad", 0) != 0;
  using Pool = Tensor (*)(const Tensor&, const Shape&, const Shape&, const Shape&, bool, bool);
  const Pool by_rank[3] = {avg_pool1d, avg_pool2d, avg_pool3d};
  if (win.pool_pads())
    return {by_rank[spatial - 1](x, win.kernel, win.stride, win.begin, ceil_mode, count_pad)};
  // Pads kten's pools do not take (uneven, from auto_pad SAME_* too, or over half the kernel): the zeros padded
  // first and counted, then, unless ONNX counts them, each mean rescaled by the window's share of
  // real elements (the same pool over ones).
  const Shape pads = torch_pads(win.begin, win.end), none(win.begin.size(), 0);
  const Tensor sums = by_rank[spatial - 1](pad(x, pads), win.kernel, win.stride, none, ceil_mode, true);
  if (count_pad) return {sums};
  Shape one_plane(x.shape());
  one_plane[0] = one_plane[1] = 1;
  const Tensor share =
      by_rank[spatial - 1](pad(ones(one_plane, x.device(), x.dtype()), pads), win.kernel, win.stride, none,
                           ceil_mode, true);
  return {sums / share};
}

std::vector<Tensor> onnx_global_average_pool(OnnxCall& c) {
  const Tensor& x = c.at(0);
  std::vector<int> axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  if (axes.empty()) fail<ShapeError>("onnx", c.where(), ": the input must be (N, C, ...), not ", x.shape());
  return {mean(x, axes, true)};
}

// MaxPool and AveragePool: kernel, stride, padding, then ceil_mode (and count_include_pad).
std::function<std::string(OnnxEmit&)> pooling(int dims, bool average) {
  return [dims, average](OnnxEmit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const std::vector<std::int64_t> pad = e.ints(2 * n, n);
    std::vector<OnnxAttr> attrs{attr_is("kernel_shape", e.ints(0, n)), attr_is("strides", e.ints(n, n)),
                                attr_is("pads", onnx_pads(pad, pad)), attr_i("ceil_mode", e.i(3 * n))};
    if (average) attrs.push_back(attr_i("count_include_pad", e.i(3 * n + 1)));
    return e.node(average ? "AveragePool" : "MaxPool", {e.in[0]}, attrs);
  };
}

// Adaptive average pooling: GlobalAveragePool to one value, else an AveragePool where the output
// divides the input (the bins are then equal windows); other sizes have no ONNX form.
std::function<std::string(OnnxEmit&)> adaptive_pooling(int dims) {
  return [dims](OnnxEmit& e) {
    spatial_of(e, dims);
    const Shape& x = e.t(0).shape();
    const std::vector<std::int64_t> out = e.ints(0, static_cast<std::size_t>(dims));
    bool global = true, even = true;
    std::vector<std::int64_t> kernel;
    for (int a = 0; a < dims; ++a) {
      const std::int64_t in = x[static_cast<std::size_t>(a) + 2];
      global = global && out[a] == 1;
      even = even && in % out[a] == 0;
      kernel.push_back(in / out[a]);
    }
    if (global) return e.node("GlobalAveragePool", {e.in[0]});
    if (!even)
      e.refuse("output size " + shape_str(out) + " does not divide the input " + shape_str(x) +
               " (ONNX has no adaptive pooling; an AveragePool needs equal windows)");
    return e.node("AveragePool", {e.in[0]},
                  {attr_is("kernel_shape", kernel), attr_is("strides", kernel),
                   attr_is("pads", std::vector<std::int64_t>(2 * static_cast<std::size_t>(dims), 0))});
  };
}

}  // namespace

// The registry's rows of this family (registry.hpp). Attributes: `ints` holds kernel, stride and
// padding (one value, or one per spatial axis, each), then avg_pool's ceil_mode and
// count_include_pad as 0 or 1; adaptive pooling's `ints` is the output size.
std::vector<OpDef> pool_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"max_pool1d", "max_pool1d(Tensor,Shape,Shape,Shape)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { const PoolSizes s = pool_sizes(a, 0); return max_pool1d(x[0], s.kernel, s.stride, s.padding); }},
      {"max_pool2d", "max_pool2d(Tensor,Shape,Shape,Shape)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { const PoolSizes s = pool_sizes(a, 0); return max_pool2d(x[0], s.kernel, s.stride, s.padding); }},
      {"max_pool3d", "max_pool3d(Tensor,Shape,Shape,Shape)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { const PoolSizes s = pool_sizes(a, 0); return max_pool3d(x[0], s.kernel, s.stride, s.padding); }},
      {"avg_pool1d", "avg_pool1d(Tensor,Shape,Shape,Shape,bool,bool)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) {
         const PoolSizes s = pool_sizes(a, 2);
         return avg_pool1d(x[0], s.kernel, s.stride, s.padding, s.flag(0), s.flag(1));
       }},
      {"avg_pool2d", "avg_pool2d(Tensor,Shape,Shape,Shape,bool,bool)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) {
         const PoolSizes s = pool_sizes(a, 2);
         return avg_pool2d(x[0], s.kernel, s.stride, s.padding, s.flag(0), s.flag(1));
       }},
      {"avg_pool3d", "avg_pool3d(Tensor,Shape,Shape,Shape,bool,bool)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) {
         const PoolSizes s = pool_sizes(a, 2);
         return avg_pool3d(x[0], s.kernel, s.stride, s.padding, s.flag(0), s.flag(1));
       }},
      {"adaptive_avg_pool1d", "adaptive_avg_pool1d(Tensor,Shape)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return adaptive_avg_pool1d(x[0], a.ints); }},
      {"adaptive_avg_pool2d", "adaptive_avg_pool2d(Tensor,Shape)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return adaptive_avg_pool2d(x[0], a.ints); }},
      {"adaptive_avg_pool3d", "adaptive_avg_pool3d(Tensor,Shape)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return adaptive_avg_pool3d(x[0], a.ints); }},
  };
  // MaxPool, AveragePool and GlobalAveragePool take 1 to 3 spatial axes: the 2-D rows carry them.
  set_onnx(rows, "max_pool1d", {}, {{"kten::max_pool1d", pooling(1, false)}});
  set_onnx(rows, "avg_pool1d", {}, {{"kten::avg_pool1d", pooling(1, true)}});
  set_onnx(rows, "adaptive_avg_pool1d", {}, {{"kten::adaptive_avg_pool1d", adaptive_pooling(1)}});
  set_onnx(rows, "max_pool2d",
           {{"MaxPool", 13, kOnnxLastOpset, 1, 1, 2, true, onnx_max_pool, check_max_pool, 0}},
           {{"kten::max_pool2d", pooling(2, false)}});
  set_onnx(rows, "avg_pool2d",
           {{"AveragePool", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_average_pool, check_average_pool, 0}},
           {{"kten::avg_pool2d", pooling(2, true)}});
  set_onnx(rows, "adaptive_avg_pool2d",
           {{"GlobalAveragePool", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_global_average_pool, nullptr, 0}},
           {{"kten::adaptive_avg_pool2d", adaptive_pooling(2)}});
  set_onnx(rows, "max_pool3d", {}, {{"kten::max_pool3d", pooling(3, false)}});
  set_onnx(rows, "avg_pool3d", {}, {{"kten::avg_pool3d", pooling(3, true)}});
  set_onnx(rows, "adaptive_avg_pool3d", {}, {{"kten::adaptive_avg_pool3d", adaptive_pooling(3)}});
  return rows;
}

}  // namespace kten::ops
