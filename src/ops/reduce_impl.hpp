// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what the two reduction families share (reduce.cpp: sum, mean, norm, var and
// mean_square; extrema.cpp: max and min): the kernels, reduce_all() over every element, reduce()
// over some axes, and the differentiable forms. Each reduction's kernels are compiled once, in its
// family's file (the extern templates at the end, instantiated there), so the two files build in
// parallel and neither compiles the other's kernels.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "elementwise.hpp"
#include "dispatch/dispatch.hpp"
#include "reduce.hpp"
#include "reductions.hpp"
#include "rows.hpp"

namespace kten::detail {


/// \brief One finished result per row of `len` contiguous elements (a row kernel, rows.hpp): an
/// axis reduction along the last axis, or a whole-tensor reduction too small to split.
template <class T, class Reduction>
struct ReduceRow {
  const T* x;
  T* out;
  std::int64_t len;
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, const Row& row) const {
    const T* p = x + r * len;
    const T acc = row.template fold<Reduction, T>(len, [&](std::int64_t k) { return Reduction::prepare(p[k]); });
    row.once([&]() { out[r] = Reduction::finish(acc, len); });
  }
};

/// \brief Host: each part (of a fixed length) folds its range as a host row does (HostRow: lanes of
/// independent partial results, so neither the add latency nor a serial chain limits the loop),
/// and its result stays partial, folded by FoldPartsKernel.
template <class T, class Reduction>
struct HostPartsKernel {
  static constexpr int Lanes = 128 / sizeof(T);  // HostRow's
  const T* x;
  T* partials;
  std::int64_t n, per_part;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t part) const {
    const std::int64_t begin = part * per_part < n ? part * per_part : n;
    const std::int64_t end = begin + per_part < n ? begin + per_part : n;
    const T* p = x + begin;
    partials[part] = HostRow{}.fold<Reduction, T>(end - begin, [&](std::int64_t k) { return Reduction::prepare(p[k]); });
  }
};

template <class T, class Reduction>
struct FoldPartsKernel {
  const T* partials;
  T* result;
  std::int64_t parts, n;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {
    T acc = Reduction::template identity<T>();
    for (std::int64_t p = 0; p < parts; ++p) acc = Reduction::combine(acc, partials[p]);
    result[0] = Reduction::finish(acc, n);
  }
};

template <class Reduction, class T>
struct Finisher {
  std::int64_t n;
  KOKKOS_INLINE_FUNCTION T operator()(T acc) const { return Reduction::finish(acc, n); }
};

/// \brief GPU: Kokkos' tree reduction in shared memory, written straight into device memory.
template <class T, class Reduction>
struct DeviceReduceKernel {
  const T* x;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, T& acc) const { acc = Reduction::combine(acc, Reduction::prepare(x[i])); }
};

template <class Backend, class T, class Reduction>
void reduce_all_kernel(const Backend& backend, const char* label, const T* x, T* result, std::int64_t n, Reduction) {
  if constexpr (Backend::is_host) {
    // Parts of host_serial_grain elements whatever the thread count, so that the result (the
    // order of the additions) is the same on 1 thread or N; one part below the serial grain.
    constexpr int Lanes = HostPartsKernel<T, Reduction>::Lanes;
    static_assert(host_serial_grain % Lanes == 0, "a part is whole rows of lanes");
    const std::int64_t per_part = host_serial_grain;
    const std::int64_t parts = n <= per_part ? 1 : (n + per_part - 1) / per_part;
    if (parts == 1) return for_each_row(label, backend, RowLayout{1, n, 1}, ReduceRow<T, Reduction>{x, result, n});
    std::vector<T> partial(static_cast<std::size_t>(parts));
    for_each_index(label, backend, parts, HostPartsKernel<T, Reduction>{x, partial.data(), n, per_part}, n);
    for_each_index(label, backend, 1, FoldPartsKernel<T, Reduction>{partial.data(), result, parts, n}, parts);
    backend.space.fence();  // `partial` lives on this stack frame (host kernels finish here anyway)
  } else {
    using Reducer = ReductionReducer<Reduction, T, typename Backend::memory_space>;
    reduce_each_index(label, backend, n, DeviceReduceKernel<T, Reduction>{x}, Reducer(typename Reducer::result_view_type(result)));
    if constexpr (Reduction::has_finish)
      for_each_index(label, backend, 1, UnaryKernel<T, Finisher<Reduction, T>>{result, result, {n}});
  }
}

// GPU, reducing an axis with inner > 1 (columns): x is `outer` blocks of `len` rows of `inner`
// columns. One thread per column of a tile of kColumnTileRows consecutive rows writes that tile's
// partial result: adjacent threads read adjacent columns (coalesced), and outer * tiles * inner
// threads keep the GPU busy, where one thread per output walking all `len` rows left it idle
// (sum(x, 0) of 65536 x 1024 read at 2% of the H100's bandwidth). The tiles' partial results are
// folded by the same kernel, a level at a time, until one tile covers the axis: the order of
// additions depends on the shape alone. Prepare: it reads x; otherwise partial results. Finish:
// the tile covers the axis, so it writes finished results.
constexpr std::int64_t kColumnTileRows = 64;

template <class T, class Reduction>
struct ColumnTileKernel {
  const T* x;
  T* out;  // [outer][tiles][inner]
  std::int64_t len, inner, tiles, count;  // count: the elements a finished result folds
  bool prepare, finish;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t j = index % inner, tile = (index / inner) % tiles, o = index / (inner * tiles);
    const std::int64_t k0 = tile * kColumnTileRows, k1 = len - k0 < kColumnTileRows ? len : k0 + kColumnTileRows;
    const T* p = x + (o * len + k0) * inner + j;
    T acc = Reduction::template identity<T>();
    for (std::int64_t k = k0; k < k1; ++k, p += inner) acc = Reduction::combine(acc, prepare ? Reduction::prepare(*p) : *p);
    out[index] = finish ? Reduction::finish(acc, count) : acc;
  }
};

/// \brief The elements of the partial results a GPU column reduction of `outer` blocks of `len` x
/// `inner` writes before its last level (0 when one tile covers the axis): under x's own count / 63.
inline std::int64_t column_partials(std::int64_t outer, std::int64_t len, std::int64_t inner) {
  std::int64_t total = 0;
  for (; len > kColumnTileRows; len = (len + kColumnTileRows - 1) / kColumnTileRows)
    total += outer * ((len + kColumnTileRows - 1) / kColumnTileRows) * inner;
  return total;
}

/// \brief GPU: the column reduction by levels of tiles, its partial results in `partials`
/// (column_partials(outer, len, inner) elements).
template <class Backend, class T, class Reduction>
void device_column_reduction(const Backend& backend, const char* label, const T* x, T* out, T* partials,
                             std::int64_t outer, std::int64_t len, std::int64_t inner) {
  const T* level = x;
  std::int64_t rows = len;
  bool prepare = true;
  for (; rows > kColumnTileRows; rows = (rows + kColumnTileRows - 1) / kColumnTileRows, prepare = false) {
    const std::int64_t tiles = (rows + kColumnTileRows - 1) / kColumnTileRows;
    for_each_index(label, backend, outer * tiles * inner,
                   ColumnTileKernel<T, Reduction>{level, partials, rows, inner, tiles, len, prepare, false}, outer * rows * inner);
    level = partials;
    partials += outer * tiles * inner;
  }
  for_each_index(label, backend, outer * inner, ColumnTileKernel<T, Reduction>{level, out, rows, inner, 1, len, prepare, true},
                 outer * rows * inner);
}

// Host, reducing an axis with inner > 1 (columns): x is `outer` blocks of `len` rows of `inner`
// columns. Each index folds a tile, `rows_per_tile` consecutive rows of up to a page (4 KiB) of
// adjacent columns, into one partial result per column, kept in L1: every row's segment is read
// contiguously, a page at a time, so the loads vectorise and the hardware prefetcher and TLB keep
// up (narrow blocks of columns swept down the rows touch a new page per row and ran at half the
// bandwidth). Tiles depend on the shape only, so the order of combining is the same on any number
// of threads. Prepare: the tile reads x (prepare each element); otherwise it reads partial results
// (combine only). Finish: the tile covers every row, so it writes finished results.
template <class T, class Reduction, bool Prepare, bool Finish>
struct HostColumnTiles {
  static constexpr std::int64_t Cols = 4096 / sizeof(T);
  const T* x;
  T* out;  // [outer][tiles_down][inner] partial results, or [outer][inner] finished ones
  std::int64_t len, inner, rows_per_tile, tiles_down, tiles_across, count;  // count: the elements a result folds
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t across = index % tiles_across, down = (index / tiles_across) % tiles_down;
    const std::int64_t o = index / (tiles_across * tiles_down);
    const std::int64_t j0 = across * Cols, width = inner - j0 < Cols ? inner - j0 : Cols;
    const std::int64_t k0 = down * rows_per_tile, k1 = len - k0 < rows_per_tile ? len : k0 + rows_per_tile;
    T acc[Cols];
    for (std::int64_t j = 0; j < width; ++j) acc[j] = Reduction::template identity<T>();
    for (std::int64_t k = k0; k < k1; ++k) {
      const T* row = x + (o * len + k) * inner + j0;
      for (std::int64_t j = 0; j < width; ++j) acc[j] = Reduction::combine(acc[j], Prepare ? Reduction::prepare(row[j]) : row[j]);
    }
    T* o_row = out + (o * tiles_down + down) * inner + j0;
    for (std::int64_t j = 0; j < width; ++j) o_row[j] = Finish ? Reduction::finish(acc[j], count) : acc[j];
  }
};

/// \brief Host: reduces the columns of `outer` blocks of `len` x `inner` by tiles of 64 rows, then
/// folds the tiles' partial results (a 64th of x) the same way, in one tile down.
template <class Backend, class T, class Reduction>
void host_column_reduction(const Backend& backend, const char* label, const T* x, T* out, std::int64_t outer,
                           std::int64_t len, std::int64_t inner) {
  constexpr std::int64_t rows_per_tile = 64;
  using Last = HostColumnTiles<T, Reduction, true, true>;
  const std::int64_t across = (inner + Last::Cols - 1) / Last::Cols, work = outer * len * inner;
  if (len <= rows_per_tile)
    return for_each_index(label, backend, outer * across, Last{x, out, len, inner, len, 1, across, len}, work);
  const std::int64_t down = (len + rows_per_tile - 1) / rows_per_tile;
  std::vector<T> partial(static_cast<std::size_t>(outer * down * inner));  // at most x's element count: fits
  for_each_index(label, backend, outer * down * across,
                 HostColumnTiles<T, Reduction, true, false>{x, partial.data(), len, inner, rows_per_tile, down, across, len}, work);
  for_each_index(label, backend, outer * across,
                 HostColumnTiles<T, Reduction, false, true>{partial.data(), out, down, inner, down, 1, across, len},
                 outer * down * inner);
  backend.space.fence();  // `partial` lives on this stack frame
}

template <class Backend, class T, class Reduction>
void reduce_axis_kernel(const Backend& backend, const char* label, const T* x, T* out, T* partials, std::int64_t outer,
                        std::int64_t len, std::int64_t inner, Reduction) {
  // The last axis: row kernels (a host thread's lanes of independent partial sums, not one chain
  // of dependent adds, 8x slower; a GPU team's coalesced reads, not one thread reading with
  // stride `len`).
  if (inner == 1) return for_each_row(label, backend, RowLayout{outer, len, 1}, ReduceRow<T, Reduction>{x, out, len});
  if constexpr (Backend::is_host) {
    return host_column_reduction<Backend, T, Reduction>(backend, label, x, out, outer, len, inner);
  } else {
    device_column_reduction<Backend, T, Reduction>(backend, label, x, out, partials, outer, len, inner);
  }
}

// Reductions read a strided view through one contiguous copy on its device (counted in
// stats().contiguous_copies): the kernels below assume contiguous rows.
template <class Reduction>
Tensor reduce_all(const Tensor& x_in) {
  constexpr const char* op = Reduction::label;
  check_defined(x_in, op);
  const Tensor x = x_in.contiguous();
  if (Reduction::extreme && x.numel() == 0)
    fail<ShapeError>(op, "the tensor is empty (shape ", x.shape(), "), so it has no ", Reduction::extreme, " element");
  Tensor out = empty({}, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* in, auto* result) { reduce_all_kernel(backend, op, in, result, x.numel(), Reduction{}); },
         x, out);
  return out;
}

// A reduction over the axes `r` names, shaped r.shape(). One kernel when the reduced axes are one
// block (axes of extent 1 aside): (outer, len, inner) over x itself, after one contiguous() copy
// of a strided x. Reduced axes apart from each other (sum(x, {0, 2})) are permuted to the end and
// gathered by one contiguous() copy, then reduced as rows: that copy writes and reads x once more,
// so such a reduction moves about three times the bytes of x instead of one, and is bound by that
// (a strided reduction kernel could read x in place).
template <class Reduction>
Tensor reduce(const Tensor& x_in, const ReducedAxes& r) {
  constexpr const char* op = Reduction::label;
  check_defined(x_in, op);
  const Tensor x_any = x_in.detach();  // the gathers below are not for the tape
  if (r.all) return reduce_all<Reduction>(x_any).reshape(r.shape());
  if (Reduction::extreme && r.len == 0)
    fail<ShapeError>(op, "the reduced axes of shape ", x_in.shape(), " hold no element, so there is no ",
                     Reduction::extreme, " one");
  const Shape& s = x_any.shape();
  int blocks = 0, first = -1, last = -1;
  for (int d = 0; d < x_any.ndim(); ++d) {
    if (s[d] == 1) continue;
    if (r.reduced[d] && (last < 0 || !r.reduced[last])) ++blocks;
    if (r.reduced[d] && first < 0) first = d;
    last = d;
  }
  Tensor x;
  std::int64_t outer = 1, inner = 1;
  if (blocks <= 1) {
    x = x_any.contiguous();
    for (int d = 0; d < x.ndim(); ++d) {
      if (r.reduced[d]) continue;
      (first >= 0 && d > first ? inner : outer) *= s[d];
    }
  } else {
    std::vector<int> order;
    for (int d = 0; d < x_any.ndim(); ++d)
      if (!r.reduced[d]) order.push_back(d);
    for (int d = 0; d < x_any.ndim(); ++d)
      if (r.reduced[d]) order.push_back(d);
    x = x_any.permute(order).contiguous();
    for (std::int64_t e : r.kept) outer *= e;
  }
  Tensor out = empty(r.shape(), x.device(), x.dtype());
  // A GPU's column reduction writes its tiles' partial results here (the host keeps its own).
  const Tensor partials = empty({x.device().is_gpu() && inner > 1 ? column_partials(outer, r.len, inner) : 0}, x.device(), x.dtype());
  if (out.numel() > 0)
    launch(op, [&](const auto& backend, auto* in, auto* o, auto* p) {
      reduce_axis_kernel(backend, op, in, o, p, outer, r.len, inner, Reduction{});
    }, x, out, partials);
  return out;
}

/// \brief Where x holds its reduction's extreme value y: 1, else 0 (NaN matches NaN, as PyTorch).
struct ExtremeMask {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T y) const {
    return x == y || (x != x && y != y) ? T(1) : T(0);
  }
};
/// \brief g / y, and 0 where y is 0: the norm's gradient scale (PyTorch masks the zero norm too).
struct DivOrZero {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T g, T y) const { return y == T(0) ? T(0) : g / y; }
};

// A result of the reduction over r's axes (y or its gradient g, with or without keepdim) seen with
// x's shape: the reduced axes put back as extent 1, then stretched with stride 0.
inline Tensor spread(const Tensor& t, const Shape& shape, const ReducedAxes& r) {
  return t.reshape(r.keepdim).expand(shape);
}

// A reduction over the axes `r` names, and its gradient.
template <class Reduction>
Tensor differentiable_reduction(const Tensor& x, const ReducedAxes& r) {
  Tensor y = reduce<Reduction>(x, r);
  if (!recording(x)) return y;
  record(Reduction::label, y, {&x}, [x = saved(x), y = saved(y), r](const Tensor& g, const Needs&) {
    const Shape& shape = x.shape();
    if constexpr (std::is_same_v<Reduction, SumReduction>) {
      return Grads{spread(g, shape, r)};
    } else if constexpr (std::is_same_v<Reduction, MeanReduction>) {
      return Grads{spread(g / static_cast<double>(r.len), shape, r)};
    } else if constexpr (Reduction::extreme != nullptr) {
      // Ties share the gradient evenly (torch.amax, torch.amin).
      const Tensor mask = elementwise_binary("kten::extreme_grad", x, spread(y, shape, r), ExtremeMask{});
      ReducedAxes count_axes = r;
      count_axes.keep = true;
      return Grads{mask * spread(g.reshape(r.keepdim) / reduce<SumReduction>(mask, count_axes), shape, r)};
    } else {
      const Tensor scale = elementwise_binary("kten::norm_grad", g, y, DivOrZero{});
      return Grads{x * spread(scale, shape, r)};
    }
  }, [&r] {  // the reduced axes, and keepdim
    ops::OpAttrs a;
    for (std::size_t d = 0; d < r.reduced.size(); ++d)
      if (r.reduced[d]) a.ints.push_back(static_cast<std::int64_t>(d));
    a.keepdim = r.keep;
    return a;
  });
  return y;
}

// The reduction over all axes, one axis or several (`keepdim` keeps them as extent 1).
template <class Reduction>
Tensor reduction(const Tensor& x, const std::vector<int>& axes, bool keepdim = false) {
  check_defined(x, Reduction::label);
  return differentiable_reduction<Reduction>(x, reduced_axes(Reduction::label, x, axes, keepdim));
}

// Compiled in reduce.cpp (sum, mean, norm, mean_square, the variance's two) and extrema.cpp (max, min).
#define KTEN_REDUCTION_KERNELS(prefix, Reduction)                          \
  prefix template Tensor reduce_all<Reduction>(const Tensor&);             \
  prefix template Tensor reduce<Reduction>(const Tensor&, const ReducedAxes&);
KTEN_REDUCTION_KERNELS(extern, SumReduction)
KTEN_REDUCTION_KERNELS(extern, MeanReduction)
KTEN_REDUCTION_KERNELS(extern, NormReduction)
KTEN_REDUCTION_KERNELS(extern, MeanSquareReduction)
KTEN_REDUCTION_KERNELS(extern, SquaredDeviationReduction)
KTEN_REDUCTION_KERNELS(extern, MaxReduction)
KTEN_REDUCTION_KERNELS(extern, MinReduction)

}  // namespace kten::detail

// A reduction's three public forms (over every axis, along one, over several) from a function
// f(x, axes, keepdim), and their rows in the op registry.
#define KTEN_REDUCTION_FORMS(name, f)                                                                  \
  Tensor name(const Tensor& x) { return f(x, {}, false); }                                            \
  Tensor name(const Tensor& x, int axis) { return f(x, {axis}, false); }                              \
  Tensor name(const Tensor& x, const std::vector<int>& axes, bool keepdim) { return f(x, axes, keepdim); }
#define KTEN_REDUCTION_OPS(name, domain)                                                                   \
  {#name, #name "(Tensor)", 1, {domain}, DTypes::floating, true, [](X x, A) { return name(x[0]); }},         \
  {#name "_axis", #name "(Tensor,int)", 1, {domain}, DTypes::floating, true,                                 \
   [](X x, A a) { return name(x[0], axis_of(a)); }},                                                        \
  {#name "_axes", #name "(Tensor,vector<int>,bool)", 1, {domain}, DTypes::floating, true,                    \
   [](X x, A a) { return name(x[0], axes_of(a), a.keepdim); }}
