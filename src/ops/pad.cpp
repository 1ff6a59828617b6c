// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// pad (zeros, reflect, replicate, circular) with its gradient: a gather per output element, and
// per input element for the gradient, axis by axis; bandwidth-bound, each element read and
// written once (the host walks whole rows, a GPU one element per thread).
#include <algorithm>
#include <type_traits>
#include <vector>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checked.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "fast_div.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief The source index along one axis of output index o, `before` elements padded in front of
/// an axis of n: -1 where zeros mode fills the value.
KOKKOS_INLINE_FUNCTION std::int64_t pad_source(nn::PaddingMode mode, std::int64_t o, std::int64_t before, std::int64_t n) {
  const std::int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case nn::PaddingMode::reflect: return i < 0 ? -i : 2 * (n - 1) - i;
    case nn::PaddingMode::replicate: return i < 0 ? 0 : n - 1;
    case nn::PaddingMode::circular: return i < 0 ? i + n : i - n;
    default: return -1;
  }
}

/// \brief pad's extents per axis: the output's (and the division by it), the input's, the
/// elements padded in front, and the input's strides.
struct PadGeometry {
  int rank = 0;
  std::int64_t out[kMaxRank] = {}, in[kMaxRank] = {}, before[kMaxRank] = {}, stride[kMaxRank] = {};
  FastDiv by_out[kMaxRank];
};

/// \brief `span` consecutive output elements of pad per index, within one row of the last axis
/// (bandwidth-bound: one read, one write each): the row's coordinates mapped axis by axis to the
/// source row (read through x's strides), then each element's column. A GPU takes one element per
/// index (span 1: adjacent threads, adjacent elements); the host a whole row (span = the last
/// axis), since mapping every element's coordinates is a serial chain of a few operations per axis:
/// one element per index, a circular pad of 8x16x64x64 floats took 40 times a strided copy's time.
template <class T>
struct PadKernel {
  const T* x;
  T* y;
  nn::PaddingMode mode;
  T value;
  PadGeometry p;
  std::int64_t span;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const int last = p.rank - 1;
    const std::int64_t first = index * span, row = p.by_out[last].div(first), column = first - row * p.out[last];
    T* out = y + first;
    std::int64_t rest = row, offset = 0;
    for (int a = last - 1; a >= 0; --a) {
      const std::int64_t next = p.by_out[a].div(rest);
      const std::int64_t i = pad_source(mode, rest - next * p.out[a], p.before[a], p.in[a]);
      rest = next;
      if (i < 0) {
        for (std::int64_t e = 0; e < span; ++e) out[e] = value;
        return;
      }
      offset += i * p.stride[a];
    }
    for (std::int64_t e = 0; e < span; ++e) {
      const std::int64_t i = pad_source(mode, column + e, p.before[last], p.in[last]);
      out[e] = i < 0 ? value : x[offset + i * p.stride[last]];
    }
  }
};

/// \brief pad's gradient along one axis (extent out -> n), `span` input elements per index: one on
/// a GPU; on the host the run of `inner` elements of one axis coordinate (or, along the last axis,
/// a whole row of n coordinates), so that finding the padded outputs that read a coordinate, a few
/// operations, is shared by its run and no element's coordinates are divided out. Each element is
/// the sum, in a fixed order, of the output elements that read it (itself, then the padded ones in
/// order).
template <class T>
struct PadFoldKernel {
  const T* g;
  T* dx;
  nn::PaddingMode mode;
  std::int64_t inner, n, out, before, span;
  FastDiv by_inner, by_n;  // the coordinates without a divide (PadKernel)
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t first = index * span, rows = by_inner.div(first), outer = by_n.div(rows);
    const std::int64_t in_inner = first - rows * inner, width = span < inner ? span : inner;
    const T* slab = g + outer * out * inner + in_inner;
    for (std::int64_t i = rows - outer * n, k = 0; k < span / width; ++i, ++k) {
      T* d = dx + first + k * inner;
      for (std::int64_t e = 0; e < width; ++e) d[e] = slab[(i + before) * inner + e];
      for (std::int64_t o = 0; o < out; ++o) {
        if (o == before) o = before + n;  // skip the copied interior
        if (o < out && pad_source(mode, o, before, n) == i)
          for (std::int64_t e = 0; e < width; ++e) d[e] += slab[o * inner + e];
      }
    }
  }
};

const char* mode_name(nn::PaddingMode mode) {
  switch (mode) {
    case nn::PaddingMode::zeros: return "zeros";
    case nn::PaddingMode::reflect: return "reflect";
    case nn::PaddingMode::replicate: return "replicate";
    default: return "circular";
  }
}

/// \brief The gradient of a non-zeros pad along one axis.
Tensor pad_fold(const Tensor& g, int axis, std::int64_t n, std::int64_t before, nn::PaddingMode mode) {
  constexpr const char* op = "kten::pad_grad";
  Shape shape = g.shape();
  const std::int64_t out = shape[axis];
  shape[axis] = n;
  std::int64_t inner = 1;
  for (int a = axis + 1; a < g.ndim(); ++a) inner *= shape[a];
  Tensor dx = empty(shape, g.device(), g.dtype());
  const std::int64_t numel = dx.numel();
  if (numel == 0) return dx;
  launch(op, [&](const auto& backend, auto* pg, auto* pdx) {
    using T = std::remove_pointer_t<decltype(pdx)>;
    // The host's runs: `inner` elements, or a row of the axis when it is the last (inner 1).
    const std::int64_t span = !std::decay_t<decltype(backend)>::is_host ? 1 : inner > 1 ? inner : n;
    for_each_index(op, backend, numel / span,
                   PadFoldKernel<T>{pg, pdx, mode, inner, n, out, before, span, FastDiv(inner, numel), FastDiv(n, numel / inner)},
                   numel);
  }, g, dx);
  return dx;
}

}  // namespace
}  // namespace detail

using detail::fail;

Tensor pad(const Tensor& x, const Shape& pads, nn::PaddingMode mode, double value) {
  constexpr const char* op = "kten::pad";
  detail::check_defined(x, op);
  const int rank = x.ndim(), padded = static_cast<int>(pads.size() / 2);
  if (pads.size() % 2 != 0 || padded > rank)
    fail<ShapeError>(op, "pads ", pads, " must be (before, after) pairs for at most the ", rank, " axes of shape ", x.shape());
  if (rank > detail::kMaxRank) fail<ShapeError>(op, "supports up to ", detail::kMaxRank, " axes, got shape ", x.shape());
  detail::PadGeometry geometry;
  geometry.rank = rank;
  Shape out_shape = x.shape();
  for (int a = 0; a < rank; ++a) {
    const int pair = rank - 1 - a;  // pads list the last axis first
    const std::int64_t before = pair < padded ? pads[2 * pair] : 0, after = pair < padded ? pads[2 * pair + 1] : 0;
    const std::int64_t n = x.shape()[a];
    if (before < 0 || after < 0) fail<ShapeError>(op, "pads ", pads, " must be >= 0 (shape ", x.shape(), ")");
    const bool wraps = mode == nn::PaddingMode::reflect ? std::max(before, after) >= n
                       : mode == nn::PaddingMode::circular ? std::max(before, after) > n
                       : mode == nn::PaddingMode::replicate ? n == 0 : false;
    if ((before > 0 || after > 0) && wraps)
      fail<ShapeError>(op, detail::mode_name(mode), " padding ", pads, " cannot pad axis ", a, " of shape ", x.shape(),
                       mode == nn::PaddingMode::reflect ? " (each pad must be smaller than the axis)"
                       : mode == nn::PaddingMode::circular ? " (each pad must be at most the axis)" : " (the axis is empty)");
    const auto with_before = detail::checked_add(n, before);
    const auto padded_extent = with_before ? detail::checked_add(*with_before, after) : with_before;
    if (!padded_extent) fail<ShapeError>(op, "pads ", pads, " make axis ", a, " of shape ", x.shape(), " longer than 64 bits can count");
    geometry.out[a] = out_shape[a] = *padded_extent;
    geometry.in[a] = n;
    geometry.before[a] = before;
    geometry.stride[a] = x.strides()[a];
  }
  if (mode == nn::PaddingMode::zeros) detail::check_scalar_fits(op, value, x.dtype());
  Tensor y = empty(out_shape, x.device(), x.dtype());
  if (rank == 0) geometry.rank = 1, geometry.out[0] = geometry.in[0] = 1;  // a scalar: one row of one element
  for (int a = 0; a < geometry.rank; ++a) geometry.by_out[a] = detail::FastDiv(geometry.out[a], y.numel());
  const Tensor xd = x.detach();
  if (y.numel() > 0)
    detail::launch_views(op, [&](const auto& backend, auto* px, auto* py) {
      using T = std::remove_pointer_t<decltype(py)>;
      const std::int64_t span = std::decay_t<decltype(backend)>::is_host ? geometry.out[geometry.rank - 1] : 1;
      detail::for_each_index(op, backend, y.numel() / span, detail::PadKernel<T>{px, py, mode, static_cast<T>(value), geometry, span},
                             y.numel());
    }, xd, y);
  if (detail::recording(x)) {
    std::vector<std::int64_t> before(geometry.before, geometry.before + rank), in(geometry.in, geometry.in + rank);
    detail::record(op, y, {&x}, [before, in, mode](const Tensor& g, const detail::Needs&) {
      Tensor dx = g;
      for (int a = 0; a < static_cast<int>(in.size()); ++a) {
        if (dx.shape()[a] == in[a]) continue;
        dx = mode == nn::PaddingMode::zeros ? dx.narrow(a, before[a], in[a]) : detail::pad_fold(dx.contiguous(), a, in[a], before[a], mode);
      }
      return detail::Grads{dx.contiguous()};
    }, [&] {  // the registry's: the pads, then the mode's index and the value
      ops::OpAttrs a = ops::OpAttrs::of_ints(pads);
      a.reals = {static_cast<double>(static_cast<int>(mode)), value};
      return a;
    });
  }
  return y;
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto pad, what save() writes for it ---

namespace {

using kten::detail::fail;

void check_pad(const OnnxNode& n) {
  const std::string mode = node_text(n, "mode", "constant");
  if (mode == "wrap" && n.opset < 19)
    onnx_invalid(n, "mode wrap is an opset-19 mode, not of opset " + std::to_string(n.opset));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    onnx_refuse(n, "mode " + mode + " (constant, reflect, edge, wrap)");
}

std::vector<Tensor> pad_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> pads = c.ints(1);
  if (c.has(3)) {  // opset 18: the pads are for these axes only, the others unpadded
    if (c.opset() < 18)
      fail<FormatError>("onnx", c.where(), ": axes is an input from opset 18, not ", c.opset());
    std::vector<int> axes;
    for (std::int64_t a : c.ints(3)) axes.push_back(onnx_axis(c, a, x.ndim()));
    if (pads.size() != 2 * axes.size())
      fail<ShapeError>("onnx", c.where(), ": pads holds ", pads.size(), " values for ", axes.size(), " axes");
    std::vector<int> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    refuse_repeated_axes(c, sorted);
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(x.ndim()), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      all[static_cast<std::size_t>(axes[i])] = pads[i];
      all[static_cast<std::size_t>(axes[i] + x.ndim())] = pads[i + axes.size()];
    }
    pads = all;
  }
  if (pads.size() != 2 * static_cast<std::size_t>(x.ndim()))
    fail<ShapeError>("onnx", c.where(), ": pads holds ", pads.size(), " values for a rank-", x.ndim(),
                     " input");
  if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; }))
    fail<FormatError>("onnx", c.where(), ": negative pads (cropping) are not supported");
  const std::string mode = node_text(c.node, "mode", "constant");
  const double value = c.has(2) ? c.real(2) : 0.0;
  // kten's order from the last axis; leading axes without padding are left out.
  Shape begin(pads.begin(), pads.begin() + x.ndim()), end(pads.begin() + x.ndim(), pads.end());
  while (!begin.empty() && begin.front() == 0 && end.front() == 0) {
    begin.erase(begin.begin());
    end.erase(end.begin());
  }
  if (begin.empty()) return {x};
  const nn::PaddingMode m = mode == "reflect" ? nn::PaddingMode::reflect
                            : mode == "edge"  ? nn::PaddingMode::replicate
                            : mode == "wrap"  ? nn::PaddingMode::circular
                                              : nn::PaddingMode::zeros;
  return {pad(x, torch_pads(begin, end), m, value)};
}

// pad: constant, reflect and edge as Pad; circular (which ONNX 17 has not) as each padded axis'
// wrapped ends cut by Slice and joined by Concat.
std::string pad_row(OnnxEmit& e) {
  const int rank = e.t(0).ndim();
  const std::vector<std::int64_t>& pads = e.op.attrs.ints;
  const auto mode = static_cast<nn::PaddingMode>(static_cast<int>(e.r(0)));
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0), end(static_cast<std::size_t>(rank), 0);
  for (std::size_t k = 0; 2 * k + 1 < pads.size(); ++k) {  // kten's pairs run from the last axis back
    begin[static_cast<std::size_t>(rank) - 1 - k] = pads[2 * k];
    end[static_cast<std::size_t>(rank) - 1 - k] = pads[2 * k + 1];
  }
  if (mode != nn::PaddingMode::circular) {
    const char* onnx_mode = mode == nn::PaddingMode::reflect     ? "reflect"
                            : mode == nn::PaddingMode::replicate ? "edge"
                                                                 : "constant";
    std::vector<std::string> inputs{e.in[0], e.w.ints(onnx_pads(begin, end))};
    if (mode == nn::PaddingMode::zeros) inputs.push_back(e.scalar(e.r(1)));
    return e.node("Pad", inputs, {attr_s("mode", onnx_mode)});
  }
  std::string y = e.in[0];
  for (int a = 0; a < rank; ++a) {
    const auto b = begin[static_cast<std::size_t>(a)], f = end[static_cast<std::size_t>(a)];
    if (b == 0 && f == 0) continue;
    std::vector<std::string> parts;
    const std::string axis = e.w.ints({a});
    if (b > 0)
      parts.push_back(
          e.node("Slice", {y, e.w.ints({-b}), e.w.ints({std::numeric_limits<std::int64_t>::max()}), axis}));
    parts.push_back(y);
    if (f > 0) parts.push_back(e.node("Slice", {y, e.w.ints({0}), e.w.ints({f}), axis}));
    y = e.node("Concat", parts, {attr_i("axis", a)});
  }
  return y;
}

}  // namespace

// The registry's row of pad (registry.hpp).
std::vector<OpDef> pad_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"pad", "pad(Tensor,Shape,nn::PaddingMode,double)", 1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return pad(x[0], a.ints, static_cast<nn::PaddingMode>(static_cast<int>(a.reals.at(0))), a.reals.at(1)); }},
  };
  set_onnx(rows, "pad", {{"Pad", 13, kOnnxLastOpset, 2, 4, 1, true, pad_op, check_pad, 0b1110}},
           {{"kten::pad", pad_row}});
  return rows;
}

}  // namespace kten::ops
