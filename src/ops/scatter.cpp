// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Graph ops: scatter_add, scatter_reduce, index_add and embedding, deterministic on every device.
//
// Many sources add into one destination. Atomic float adds would make the sum's order, and so its
// bits, depend on thread timing; instead the indices are segmented first (a counting sort into CSR
// form: for each destination, its sources), then one thread per destination element reduces its
// sources in the order of their position along the axis. The result is the same bits run to run,
// for every thread count and on every device, and it equals a sequential loop over the sources.
//
// The segmentation works on the index tensor's distinct part only: axes along which the index is
// broadcast (stride 0, as index_add's and an expanded edge list's feature axis) share one segment
// list, so for a graph of E edges it sorts E indices, not E x features. cpu()'s scatter_add of whole
// rows (an edge list along axis 0, index_add's) needs no segments: each thread owns a range of
// destination rows and walks the sources in order (ScatterAddRowsKernel), the same steps and bits.
//
// Index checks: every kernel that reads an index checks it (index_errors.hpp) and skips one out of
// range; no host synchronisation.
#include <algorithm>
#include <string>
#include <utility>

#include <kten/ops.hpp>
#include <kten/info.hpp>

#include "autograd/autograd.hpp"
#include "core/checked.hpp"
#include "core/checks.hpp"
#include "dispatch/index_errors.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

enum class Reduce { sum, mean, amax, amin };

/// \brief The positions of a scatter: x's (and the result's) shape, the index's, and where each
/// operand's elements lie. "Fiber" is a position off the scatter axis; the index's distinct fibers
/// are those along the axes where it has extent > 1 and a nonzero stride ("varying" axes; the
/// others broadcast one index fiber to many).
struct ScatterGeometry {
  int rank = 0;
  int axis = 0;
  std::int64_t extent[kMaxRank] = {};        ///< \brief x's shape
  std::int64_t out_stride[kMaxRank] = {};    ///< \brief the result's (contiguous) strides
  std::int64_t x_stride[kMaxRank] = {};
  std::int64_t src_extent[kMaxRank] = {};
  std::int64_t src_stride[kMaxRank] = {};
  std::int64_t index_extent[kMaxRank] = {};
  std::int64_t index_stride[kMaxRank] = {};
  std::int64_t fiber_stride[kMaxRank] = {};  ///< \brief an index fiber's number per axis (0 off the varying axes)
  std::int64_t sources = 0;  ///< \brief the index's extent along the axis
  std::int64_t targets = 0;  ///< \brief x's extent along the axis
  std::int64_t fibers = 1;   ///< \brief distinct index fibers

  /// \brief Entry e = fiber * sources + p (p its position along the axis) -> its fiber (no
  /// division in the common case of one fiber: an edge list).
  KOKKOS_INLINE_FUNCTION std::int64_t fiber_of(std::int64_t e) const { return fibers == 1 ? 0 : e / sources; }
  /// \brief Entry e -> its index's offset.
  KOKKOS_INLINE_FUNCTION std::int64_t index_offset(std::int64_t e) const {
    std::int64_t fiber = fiber_of(e), offset = (e - fiber * sources) * index_stride[axis];
    if (fiber == 0) return offset;
    for (int d = rank - 1; d >= 0; --d)
      if (fiber_stride[d] != 0) {
        offset += (fiber % index_extent[d]) * index_stride[d];
        fiber /= index_extent[d];
      }
    return offset;
  }
};

/// \brief Where an output element lies in the other operands: x's offset, the first source's
/// offset in src (along the axis: + p * src_stride[axis]), its segment key (fiber * targets + q) or
/// -1 when it lies outside the index's fibers (no source reaches it).
struct OutPosition {
  std::int64_t x, src, key;
};

KOKKOS_INLINE_FUNCTION OutPosition out_position(const ScatterGeometry& g, std::int64_t o) {
  OutPosition at{0, 0, 0};
  std::int64_t rest = o, fiber = 0, q = 0;
  bool inside = true;
  for (int d = g.rank - 1; d >= 0; --d) {
    const std::int64_t c = rest % g.extent[d];
    rest /= g.extent[d];
    at.x += c * g.x_stride[d];
    if (d == g.axis) {
      q = c;
      continue;
    }
    inside = inside && c < g.index_extent[d];
    at.src += c * g.src_stride[d];
    fiber += c * g.fiber_stride[d];
  }
  at.key = inside ? fiber * g.targets + q : -1;
  return at;
}

/// \brief count[key of e] += 1 for every entry e with an index in range (integer atomics: the
/// counts, not their order, matter).
struct SegmentCountKernel {
  ScatterGeometry g;
  const std::int64_t* index;
  std::int64_t* flag;
  std::int64_t* count;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const std::int64_t i = index[g.index_offset(e)];
    if (!index_in_range(flag, i, g.targets)) return;
    Kokkos::atomic_add(&count[g.fiber_of(e) * g.targets + i], std::int64_t(1));  // atomic_increment is gone in Kokkos 5
  }
};

/// \brief Exclusive scan of `count` (n keys) into `offsets` (n + 1), in blocks of `block`: pass 0
/// sums each block into sums[b]; pass 1 (one thread) scans the block sums; pass 2 scans each block.
/// Integers, so any split gives the same offsets.
struct ScanKernel {
  const std::int64_t* count;
  std::int64_t* offsets;
  std::int64_t* sums;
  std::int64_t n, block, blocks;
  int pass;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t b) const {
    const std::int64_t first = b * block, last = first + block < n ? first + block : n;
    if (pass == 0) {
      std::int64_t s = 0;
      for (std::int64_t k = first; k < last; ++k) s += count[k];
      sums[b] = s;
    } else if (pass == 1) {
      std::int64_t running = 0;
      for (std::int64_t k = 0; k < blocks; ++k) {
        const std::int64_t s = sums[k];
        sums[k] = running;
        running += s;
      }
      offsets[n] = running;
    } else {
      std::int64_t running = sums[b];
      for (std::int64_t k = first; k < last; ++k) {
        offsets[k] = running;
        running += count[k];
      }
    }
  }
};

/// \brief Places each entry in its key's segment as its position p along the axis (the segment's
/// key fixes the fiber; count counts down to 0; the order within a segment is the threads', fixed
/// by the sort after).
struct SegmentFillKernel {
  ScatterGeometry g;
  const std::int64_t* index;
  const std::int64_t* offsets;
  std::int64_t* count;
  std::int64_t* entries;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const std::int64_t i = index[g.index_offset(e)];
    if (i < 0 || i >= g.targets) return;
    const std::int64_t fiber = g.fiber_of(e), key = fiber * g.targets + i;
    entries[offsets[key] + Kokkos::atomic_fetch_add(&count[key], std::int64_t(-1)) - 1] = e - fiber * g.sources;
  }
};

/// \brief Sorts each segment ascending (insertion sort for the short segments of a mesh, heapsort
/// past 32 entries so that a hub node costs n log n), making the order independent of the fill.
struct SegmentSortKernel {
  const std::int64_t* offsets;
  std::int64_t* entries;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t key) const {
    std::int64_t* a = entries + offsets[key];
    const std::int64_t n = offsets[key + 1] - offsets[key];
    if (n <= 32) {
      for (std::int64_t i = 1; i < n; ++i) {
        const std::int64_t v = a[i];
        std::int64_t j = i;
        for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
        a[j] = v;
      }
      return;
    }
    for (std::int64_t start = n / 2; start-- > 0;) sift_down(a, start, n);
    for (std::int64_t end = n - 1; end > 0; --end) {
      const std::int64_t top = a[0];
      a[0] = a[end];
      a[end] = top;
      sift_down(a, 0, end);
    }
  }
  KOKKOS_INLINE_FUNCTION static void sift_down(std::int64_t* a, std::int64_t root, std::int64_t n) {
    for (std::int64_t child; (child = 2 * root + 1) < n; root = child) {
      if (child + 1 < n && a[child + 1] > a[child]) ++child;
      if (a[root] >= a[child]) return;
      const std::int64_t t = a[root];
      a[root] = a[child];
      a[child] = t;
    }
  }
};

/// \brief The host's segmentation, without atomics and without the sort: part `k` of `parts`
/// owns the keys [k * keys / parts, (k + 1) * keys / parts) and walks every entry in order,
/// counting (pass 0) or placing (pass 1) the entries of its own keys, so each segment is filled in
/// order of position. Each part reads the whole index once per pass; the parts are few (the host
/// threads, at most 8), and the index (8 bytes per entry) is small next to the sources it sorts.
/// Part 0 reports indices out of range.
struct SegmentPartKernel {
  ScatterGeometry g;
  const std::int64_t* index;
  std::int64_t* flag;
  const std::int64_t* offsets;
  std::int64_t* count;
  std::int64_t* entries;
  std::int64_t n, keys, parts;
  int pass;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t k) const {
    const std::int64_t lo = k * keys / parts, hi = (k + 1) * keys / parts;
    for (std::int64_t e = 0; e < n; ++e) {
      const std::int64_t i = index[g.index_offset(e)];
      if (i < 0 || i >= g.targets) {
        if (k == 0 && pass == 0) report_bad_index(flag, i);
        continue;
      }
      const std::int64_t fiber = g.fiber_of(e), key = fiber * g.targets + i;
      if (key < lo || key >= hi) continue;
      if (pass == 0) ++count[key];
      else entries[offsets[key + 1] - count[key]--] = e - fiber * g.sources;
    }
  }
};

/// \brief amax / amin's step: b replaces a when larger (smaller); a NaN, once there, stays, and a
/// NaN b replaces a (PyTorch's scatter_reduce).
template <Reduce R, class T>
KOKKOS_INLINE_FUNCTION T extremum_of(T a, T b) {
  if (b != b) return b;
  if constexpr (R == Reduce::amax) return a < b ? b : a;
  else return b < a ? b : a;
}

/// \brief One destination's reduction, in three steps shared by both walks of the kernel below:
/// start (from x's own value, or from the first source where amax/amin exclude it), add a source,
/// finish (mean's one division by the count).
template <Reduce R, class T>
struct Fold {
  static constexpr bool extremum = R == Reduce::amax || R == Reduce::amin;
  /// \brief Sources the start takes (amax/amin without x's own start from the first).
  KOKKOS_INLINE_FUNCTION static std::int64_t taken(bool include_self) { return extremum && !include_self ? 1 : 0; }
  KOKKOS_INLINE_FUNCTION static T start(T own, T first, bool include_self) {
    if (include_self) return own;
    return extremum ? first : T(0);
  }
  KOKKOS_INLINE_FUNCTION static T add(T acc, T v) {
    if constexpr (extremum) return extremum_of<R>(acc, v);
    else return acc + v;
  }
  KOKKOS_INLINE_FUNCTION static T finish(T acc, std::int64_t values) {
    if constexpr (R == Reduce::mean) return acc / T(values);
    else return acc;
  }
};

/// \brief out[o] = x[o] reduced with its sources, in the order of their position along the axis.
/// Memory-bound: a destination reads its segment's entries and one source element per entry.
/// `row` == 1 (a GPU): a thread per output element, its value in a register; adjacent threads hold
/// adjacent features of one destination, so they read one entry list and adjacent source elements
/// (coalesced) when the feature axis is the inner one. `row` > 1 (the host, where a row of the
/// last axis shares one segment): a thread decodes the row's position once, then adds each source
/// row into the output row (in L1) with a loop along the features that vectorises. Each element
/// takes the same steps in the same order either way.
template <Reduce R, class T>
struct ScatterReduceKernel {
  ScatterGeometry g;
  const T* x;
  const T* src;
  T* out;
  const std::int64_t* offsets;
  const std::int64_t* entries;  // positions along the axis
  bool include_self;
  std::int64_t row;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    using F = Fold<R, T>;
    const std::int64_t o = i * row;
    const OutPosition at = out_position(g, o);
    const std::int64_t first = at.key < 0 ? 0 : offsets[at.key], last = at.key < 0 ? 0 : offsets[at.key + 1];
    const std::int64_t step = g.src_stride[g.axis], x_inner = g.x_stride[g.rank - 1], src_inner = g.src_stride[g.rank - 1];
    const T* from = src + at.src;
    const std::int64_t values = last - first + (include_self ? 1 : 0), rest = first + F::taken(include_self);
    if (row == 1) {
      const T own = x[at.x];
      if (last == first) {
        out[o] = own;
        return;
      }
      T acc = F::start(own, from[entries[first] * step], include_self);
      for (std::int64_t s = rest; s < last; ++s) acc = F::add(acc, from[entries[s] * step]);
      out[o] = F::finish(acc, values);
      return;
    }
    T* to = out + o;
    if (last == first) {
      for (std::int64_t j = 0; j < row; ++j) to[j] = x[at.x + j * x_inner];
      return;
    }
    const T* head = from + entries[first] * step;
    for (std::int64_t j = 0; j < row; ++j) to[j] = F::start(x[at.x + j * x_inner], head[j * src_inner], include_self);
    for (std::int64_t s = rest; s < last; ++s) {
      const T* v = from + entries[s] * step;
      if (src_inner == 1) {
        for (std::int64_t j = 0; j < row; ++j) to[j] = F::add(to[j], v[j]);
      } else {
        for (std::int64_t j = 0; j < row; ++j) to[j] = F::add(to[j], v[j * src_inner]);
      }
    }
    if constexpr (R == Reduce::mean)
      for (std::int64_t j = 0; j < row; ++j) to[j] = F::finish(to[j], values);
  }
};

/// \brief cpu()'s scatter_add of rows, without segments: x (targets x row), one index per source
/// row (an edge list, or index_add's index). Part k of `parts` owns the destination rows [lo, hi)
/// and walks every source in order, adding each of its own into out: the first source to reach a
/// row writes x's row plus itself, the next ones add, and at the end the rows no source reached
/// copy x. Every row is x's then its sources in order of position, the steps of
/// ScatterReduceKernel (the same bits), with no sort. Memory-bound: each part reads the index once
/// and its own sources in order; a mesh's destinations lie near their sources, so the rows being
/// summed stay in cache, and no source row is read out of order. Part 0 reports indices out of
/// range (skipped, as everywhere).
template <class T>
struct ScatterAddRowsKernel {
  const std::int64_t* index;
  std::int64_t* flag;
  const T* x;
  const T* src;
  T* out;
  bool* reached;
  std::int64_t index_step, x_step, x_inner, src_step, src_inner, row, targets, sources, parts;
  void operator()(std::int64_t k) const {
    const std::int64_t lo = k * targets / parts, hi = (k + 1) * targets / parts;
    for (std::int64_t q = lo; q < hi; ++q) reached[q] = false;
    for (std::int64_t p = 0; p < sources; ++p) {
      const std::int64_t i = index[p * index_step];
      if (i < lo || i >= hi) {
        if (k == 0 && (i < 0 || i >= targets)) report_bad_index(flag, i);
        continue;
      }
      T* to = out + i * row;
      const T* v = src + p * src_step;
      if (!reached[i]) {
        reached[i] = true;
        const T* own = x + i * x_step;
        for (std::int64_t j = 0; j < row; ++j) to[j] = own[j * x_inner] + v[j * src_inner];
      } else if (src_inner == 1) {
        for (std::int64_t j = 0; j < row; ++j) to[j] += v[j];
      } else {
        for (std::int64_t j = 0; j < row; ++j) to[j] += v[j * src_inner];
      }
    }
    for (std::int64_t q = lo; q < hi; ++q)
      if (!reached[q])
        for (std::int64_t j = 0; j < row; ++j) out[q * row + j] = x[q * x_step + j * x_inner];
  }
};

/// \brief The gradient at each output element: to x (gx) and the part each source receives (gd),
/// as PyTorch 1.13's scatter_reduce_backward: mean divides by the count, amax/amin split the
/// gradient evenly among x and the sources equal to the result; with include_self = false x gets
/// nothing where a source arrived.
template <Reduce R, class T>
struct ScatterOutGradKernel {
  ScatterGeometry g;
  const T* grad;  // contiguous, the result's shape
  const T* x;
  const T* src;
  const T* result;
  const std::int64_t* offsets;
  const std::int64_t* entries;
  T* gx;
  T* gd;
  bool include_self;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    const OutPosition at = out_position(g, o);
    const std::int64_t first = at.key < 0 ? 0 : offsets[at.key], last = at.key < 0 ? 0 : offsets[at.key + 1];
    const T go = grad[o];
    T share = go, own = go;
    if constexpr (R == Reduce::mean) {
      const std::int64_t n = last - first + (include_self ? 1 : 0);
      share = go / T(n == 0 ? 1 : n);
      own = share;
    } else if constexpr (R == Reduce::amax || R == Reduce::amin) {
      const T r = result[o];
      const T self_is_result = x[at.x] == r ? T(1) : T(0);
      T ties = self_is_result;
      const std::int64_t step = g.src_stride[g.axis];
      for (std::int64_t s = first; s < last; ++s)
        if (src[at.src + entries[s] * step] == r) ties += T(1);
      share = go / ties;
      own = self_is_result * share;
    }
    gx[o] = !include_self && last > first ? T(0) : own;
    gd[o] = share;
  }
};

/// \brief The gradient of each source element (src's shape, contiguous): its destination's share
/// (gd), for amax/amin only where it equals the result; 0 outside the index's shape or for an
/// index out of range. A gather, for `row` consecutive elements along src's last axis (1 on a GPU).
template <Reduce R, class T>
struct ScatterSrcGradKernel {
  ScatterGeometry g;
  const std::int64_t* index;
  const T* gd;      // contiguous, the result's shape
  const T* src;
  const T* result;  // contiguous, the result's shape
  T* gsrc;
  std::int64_t row;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const int inner = g.rank - 1;
    const std::int64_t first = i * row;
    std::int64_t rest = first, at_index = 0, at_out = 0, at_src = 0;
    bool inside = true;
    for (int d = inner; d >= 0; --d) {
      const std::int64_t c = rest % g.src_extent[d];
      rest /= g.src_extent[d];
      if (d != inner) inside = inside && c < g.index_extent[d];
      at_index += c * g.index_stride[d];
      at_src += c * g.src_stride[d];
      if (d != g.axis) at_out += c * g.out_stride[d];
    }
    const std::int64_t out_inner = inner == g.axis ? 0 : g.out_stride[inner];
    for (std::int64_t j = 0; j < row; ++j) {
      const std::int64_t c = (first + j) % g.src_extent[inner];  // the last axis' coordinate
      const std::int64_t k = inside && c < g.index_extent[inner] ? index[at_index + j * g.index_stride[inner]] : -1;
      if (k < 0 || k >= g.targets) {
        gsrc[first + j] = T(0);
        continue;
      }
      const std::int64_t o = at_out + j * out_inner + k * g.out_stride[g.axis];
      if constexpr (R == Reduce::amax || R == Reduce::amin)
        gsrc[first + j] = (src[at_src + j * g.src_stride[inner]] == result[o] ? T(1) : T(0)) * gd[o];
      else
        gsrc[first + j] = gd[o];
    }
  }
};

/// \brief out[r * dim + j] = weight[indices[r] * row + j * col] (0 for an index out of range).
template <class T>
struct EmbeddingKernel {
  const T* weight;
  const std::int64_t* indices;
  std::int64_t* flag;
  T* out;
  BroadcastIndex rows;  // flat index position -> its offset in indices (stride_a)
  std::int64_t num, dim, row, col;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    std::int64_t at, unused;
    rows.offsets(o / dim, at, unused);
    const std::int64_t i = indices[at];
    out[o] = index_in_range(flag, i, num) ? weight[i * row + (o % dim) * col] : T(0);
  }
};

namespace {

/// A scatter's segments: for each key (index fiber, destination), its entries in [offsets[key],
/// offsets[key + 1]) of `entries`, ascending.
struct Segments {
  Tensor offsets, entries;
};

std::string shapes_context(const ScatterGeometry& g, const Tensor& x, const Tensor& index) {
  return index_context("for axis ", g.axis, " of extent ", g.targets, " (x ", x.shape(), ", index ", index.shape(), ")");
}

// The geometry of scatter(x, axis a, index, src); ShapeError names the op and shapes.
ScatterGeometry geometry(const char* label, const Tensor& x, int a, const Tensor& index, const Tensor& src) {
  ScatterGeometry g;
  g.rank = x.ndim();
  g.axis = a;
  if (g.rank > kMaxRank) fail<ShapeError>(label, "tensors of more than ", kMaxRank, " axes are not supported, got ", x.shape());
  bool fits = index.ndim() == g.rank && src.ndim() == g.rank;
  for (int d = 0; fits && d < g.rank; ++d)
    fits = index.shape()[d] <= src.shape()[d] && (d == a || index.shape()[d] <= x.shape()[d]);
  if (!fits)
    fail<ShapeError>(label, "index of shape ", index.shape(), " does not fit x of shape ", x.shape(), " and src of shape ",
                     src.shape(), " along axis ", a, "; the three need one rank, and index no extent larger than src's, ",
                     "nor than x's off the axis");
  std::int64_t contiguous = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    g.extent[d] = x.shape()[d];
    g.out_stride[d] = contiguous;
    contiguous *= g.extent[d];
    g.x_stride[d] = x.strides()[d];
    g.src_extent[d] = src.shape()[d];
    g.src_stride[d] = src.strides()[d];
    g.index_extent[d] = index.shape()[d];
    g.index_stride[d] = index.strides()[d];
    if (d != a && index.shape()[d] > 1 && index.strides()[d] != 0) {
      g.fiber_stride[d] = g.fibers;
      g.fibers *= index.shape()[d];  // <= index.numel(): no overflow
    }
  }
  g.sources = index.shape()[a];
  g.targets = x.shape()[a];
  return g;
}

// The index's segments (entries = fibers x sources); an index out of range is skipped and reported
// through `check`.
Segments segment(const char* label, const ScatterGeometry& g, const Tensor& index, IndexCheck& check) {
  // keys <= x.numel(); n <= index.numel() (0 when an axis of the index is empty)
  const std::int64_t keys = g.fibers * g.targets, n = index.numel() == 0 ? 0 : g.fibers * g.sources;
  auto block = static_cast<std::int64_t>(1);
  while (block * block < keys) block *= 2;
  const std::int64_t blocks = (keys + block - 1) / block;
  Segments seg{empty({keys + 1}, index.device(), DType::int64), empty({n}, index.device(), DType::int64)};
  const Tensor count = zeros({keys}, index.device(), DType::int64), sums = empty({blocks}, index.device(), DType::int64);
  launch_views(label, [&](const auto& backend, const std::int64_t* pi, std::int64_t* flag, std::int64_t* pc,
                          std::int64_t* po, std::int64_t* pe, std::int64_t* ps) {
    // A GPU counts and places with integer atomics, then sorts each segment; the host, where an
    // atomic costs tens of cycles, gives each part of its threads a range of keys instead.
    constexpr bool host = std::decay_t<decltype(backend)>::is_host;
    const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>({host_threads(), 8, keys}));
    const auto place = [&](int pass) {
      for_each_index(label, backend, parts, SegmentPartKernel{g, pi, flag, po, pc, pe, n, keys, parts, pass}, n * parts);
    };
    if constexpr (host) place(0);
    else for_each_index(label, backend, n, SegmentCountKernel{g, pi, flag, pc});
    for (int pass : {0, 1, 2})
      for_each_index(label, backend, pass == 1 ? 1 : blocks, ScanKernel{pc, po, ps, keys, block, blocks, pass},
                     pass == 1 ? blocks : keys);
    if constexpr (host) {
      place(1);
    } else {
      for_each_index(label, backend, n, SegmentFillKernel{g, pi, po, pc, pe});
      for_each_index(label, backend, keys, SegmentSortKernel{po, pe}, n);
    }
  }, Fixed<std::int64_t>{index}, Fixed<std::int64_t>{check.flag()}, Fixed<std::int64_t>{count},
     Fixed<std::int64_t>{seg.offsets}, Fixed<std::int64_t>{seg.entries}, Fixed<std::int64_t>{sums});
  return seg;
}

// How many consecutive elements along the last axis one index of a kernel covers: `row` on the
// host (one position decode per row, a plain loop along it), 1 on a GPU (a thread per element).
template <class Backend>
std::int64_t host_row(std::int64_t numel, std::int64_t row) {
  return Backend::is_host && numel > 0 && row > 0 ? row : 1;
}

template <class F>
void with_reduce(Reduce r, F&& f) {
  switch (r) {
    case Reduce::sum: return f(std::integral_constant<Reduce, Reduce::sum>{});
    case Reduce::mean: return f(std::integral_constant<Reduce, Reduce::mean>{});
    case Reduce::amax: return f(std::integral_constant<Reduce, Reduce::amax>{});
    case Reduce::amin: return f(std::integral_constant<Reduce, Reduce::amin>{});
  }
}

const char* reduce_name(Reduce r) {
  switch (r) {
    case Reduce::sum: return "sum";
    case Reduce::mean: return "mean";
    case Reduce::amax: return "amax";
    case Reduce::amin: return "amin";
  }
  return "";
}

// The gradients of x and src (needs: which) of scatter_reduce, from the result's gradient.
Grads scatter_backward(const char* label, Reduce r, bool include_self, const ScatterGeometry& g, const Segments& seg,
                       const Tensor& index, const Tensor& x, const Tensor& src, const Shape& src_shape,
                       const Tensor& result, const Tensor& grad_in, const Needs& needs) {
  const Tensor grad = grad_in.contiguous();
  Tensor gx = grad, gd = grad;
  if (!(r == Reduce::sum && include_self)) {  // else x's gradient is the result's, and so is each source's share
    gx = empty(grad.shape(), grad.device(), grad.dtype());
    gd = empty(grad.shape(), grad.device(), grad.dtype());
    launch_views(label, [&](const auto& backend, auto* pg, auto* px, auto* ps, auto* pr, auto* pgx, auto* pgd,
                            const std::int64_t* po, const std::int64_t* pe) {
      using T = std::remove_pointer_t<decltype(pg)>;
      with_reduce(r, [&](auto reduce) {
        for_each_index(label, backend, grad.numel(),
                       ScatterOutGradKernel<decltype(reduce)::value, T>{g, pg, px, ps, pr, po, pe, pgx, pgd, include_self});
      });
    }, grad, x, src, result, gx, gd, Fixed<std::int64_t>{seg.offsets}, Fixed<std::int64_t>{seg.entries});
  }
  Tensor gsrc;
  if (needs[1]) {
    gsrc = empty(src_shape, grad.device(), grad.dtype());
    launch_views(label, [&](const auto& backend, auto* pgd, auto* ps, auto* pr, auto* pgs, const std::int64_t* pi) {
      using T = std::remove_pointer_t<decltype(pgd)>;
      with_reduce(r, [&](auto reduce) {
        const std::int64_t row = host_row<std::decay_t<decltype(backend)>>(gsrc.numel(), g.src_extent[g.rank - 1]);
        for_each_index(label, backend, gsrc.numel() / row,
                       ScatterSrcGradKernel<decltype(reduce)::value, T>{g, pi, pgd, ps, pr, pgs, row}, gsrc.numel());
      });
    }, gd, src, result, gsrc, Fixed<std::int64_t>{index});
  }
  return Grads{needs[0] ? gx : Tensor(), gsrc};
}

// scatter_reduce on tensors of rank >= 1 (the public functions treat 0-d ones as extent 1).
Tensor scatter_nd(const char* label, const Tensor& x, int axis, const Tensor& index, const Tensor& src, Reduce r,
                  bool include_self) {
  const int a = normalize_axis(label, x, axis);
  const ScatterGeometry g = geometry(label, x, a, index, src);
  IndexCheck check(label, x.device(), shapes_context(g, x, index));
  // cpu()'s scatter_add of whole rows along axis 0 (a graph's edges) needs no segments.
  const bool rows_along_0 = g.rank == 2 && g.axis == 0 && g.fibers == 1 && g.index_extent[1] == g.extent[1];
  const bool by_rows = x.device().is_cpu() && r == Reduce::sum && include_self && rows_along_0;
  const Segments seg = by_rows ? Segments{} : segment(label, g, index, check);
  Tensor out = empty(x.shape(), x.device(), x.dtype());
  if (by_rows) {
    const Tensor reached = empty({g.targets}, x.device(), DType::boolean);
    launch_views(label, [&](const auto& backend, auto* px, auto* ps, auto* po, const std::int64_t* pi, std::int64_t* flag, bool* pr) {
      using T = std::remove_pointer_t<decltype(px)>;
      if constexpr (std::decay_t<decltype(backend)>::is_host) {
        const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>({host_threads(), 8, g.targets}));
        const std::int64_t sources = index.numel() == 0 ? 0 : g.sources;  // rows of no features hold no indices
        for_each_index(label, backend, parts,
                       ScatterAddRowsKernel<T>{pi, flag, px, ps, po, pr, g.index_stride[0], g.x_stride[0], g.x_stride[1],
                                               g.src_stride[0], g.src_stride[1], g.extent[1], g.targets, sources, parts},
                       out.numel() + sources * (g.extent[1] + 1));
      }
    }, x, src, out, Fixed<std::int64_t>{index}, Fixed<std::int64_t>{check.flag()}, Fixed<bool>{reached});
  } else {
    launch_views(label, [&](const auto& backend, auto* px, auto* ps, auto* po, const std::int64_t* poff, const std::int64_t* pe) {
      using T = std::remove_pointer_t<decltype(px)>;
      with_reduce(r, [&](auto reduce) {
        const int inner = g.rank - 1;
        const bool rows_share_segment = inner != g.axis && g.fiber_stride[inner] == 0 && g.index_extent[inner] == g.extent[inner];
        const std::int64_t row = host_row<std::decay_t<decltype(backend)>>(out.numel(), rows_share_segment ? g.extent[inner] : 1);
        for_each_index(label, backend, out.numel() / row,
                         ScatterReduceKernel<decltype(reduce)::value, T>{g, px, ps, po, poff, pe, include_self, row},
                         out.numel() + index.numel());
      });
    }, x, src, out, Fixed<std::int64_t>{seg.offsets}, Fixed<std::int64_t>{seg.entries});
  }
  check.launched();
  if (recording(x, src)) {
    const bool extremum = r == Reduce::amax || r == Reduce::amin;
    // Only amax and amin read x, src and the result again (which values won); the other
    // reductions keep the index and its segments alone, and pass the gradient in their place.
    // The index follows, for a trace (it needs no gradient); the attributes are the registry's.
    record(label, out, {&x, &src, &index},
           [label, r, include_self, g, seg, index = saved(index), x = extremum ? saved(x) : Tensor(), src_shape = src.shape(),
            src = extremum ? saved(src) : Tensor(), result = extremum ? saved(out) : Tensor()](const Tensor& grad, const Needs& needs) {
             const Tensor& unused = grad;
             return scatter_backward(label, r, include_self, g, seg, index, x.defined() ? x : unused,
                                     src.defined() ? src : unused, src_shape, result.defined() ? result : unused, grad, needs);
           }, [&] { return ops::OpAttrs::of_ints({a, static_cast<std::int64_t>(r), include_self ? 1 : 0}); });
  }
  return out;
}

// The public entry: checks, then 0-d tensors as 1-D of extent 1.
Tensor scatter(const char* label, const Tensor& x, int axis, const Tensor& index, const Tensor& src, Reduce r,
               bool include_self) {
  check_defined(x, label);
  check_compatible(label, x, src);
  check_dtype(label, "the index tensor", index, DType::int64, "convert it with .astype(kten::int64)");
  check_same_device(label, x.device(), index.device());
  if (!is_floating(x.dtype()))
    fail<DTypeError>(label, "x and src must be float32 or float64, got ", x.dtype());
  if (x.ndim() == 0 && index.ndim() == 0 && src.ndim() == 0) {
    normalize_axis(label, x.reshape({1}), axis);
    return scatter_nd(label, x.reshape({1}), 0, index.reshape({1}), src.reshape({1}), r, include_self).reshape({});
  }
  return scatter_nd(label, x, axis, index, src, r, include_self);
}

Reduce parse_reduce(const char* label, const std::string& reduce) {
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin})
    if (reduce == reduce_name(r)) return r;
  fail(label, "reduce must be \"sum\", \"mean\", \"amax\" or \"amin\", got \"", reduce, "\"",
       reduce == "prod" ? " (\"prod\" is not supported)" : "");
}

}  // namespace
}  // namespace detail

using namespace detail;

Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  return scatter("kten::scatter_add", x, axis, index, src, Reduce::sum, true);
}

Tensor scatter_reduce(const Tensor& x, int axis, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  constexpr const char* label = "kten::scatter_reduce";
  return scatter(label, x, axis, index, src, parse_reduce(label, reduce), include_self);
}

// index_add is scatter_add with the 1-D index broadcast over source's other axes (stride 0 there):
// one segment list for all of them.
Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source) {
  constexpr const char* label = "kten::index_add";
  check_defined(x, label);
  check_compatible(label, x, source);
  check_dtype(label, "the index tensor", index, DType::int64, "convert it with .astype(kten::int64)");
  if (x.ndim() == 0) return scatter(label, x, axis, index.reshape({}), source, Reduce::sum, true);
  const int a = normalize_axis(label, x, axis);
  bool fits = index.ndim() == 1 && source.ndim() == x.ndim();
  for (int d = 0; fits && d < x.ndim(); ++d) fits = source.shape()[d] == (d == a ? index.numel() : x.shape()[d]);
  if (!fits)
    fail<ShapeError>(label, "source of shape ", source.shape(), " does not match x of shape ", x.shape(), " and a 1-D index of shape ",
                     index.shape(), " along axis ", axis, "; source needs x's shape with index.numel() along the axis");
  Shape along(x.ndim(), 1);
  along[a] = index.numel();
  return scatter(label, x, a, index.reshape(along).expand(source.shape()), source, Reduce::sum, true);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  constexpr const char* label = "kten::embedding";
  check_defined(weight, label);
  check_dtype(label, "indices", indices, DType::int64, "convert them with .astype(kten::int64)");
  check_same_device(label, weight.device(), indices.device());
  if (weight.ndim() != 2)
    fail<ShapeError>(label, "weight must be 2-D (num, dim), got shape ", weight.shape());
  const std::int64_t num = weight.shape()[0], dim = weight.shape()[1];
  Shape shape = indices.shape();
  shape.push_back(dim);
  Tensor out = empty(shape, weight.device(), weight.dtype());
  IndexCheck check(label, weight.device(), index_context("for a weight of shape ", weight.shape(), " (indices ", indices.shape(), ")"));
  const BroadcastIndex rows = strided_index(label, indices.shape(), indices.strides(), Shape(indices.shape().size(), 0));
  launch_views(label, [&](const auto& backend, auto* pw, auto* po, const std::int64_t* pi, std::int64_t* flag) {
    using T = std::remove_pointer_t<decltype(pw)>;
    for_each_index(label, backend, out.numel(),
                   EmbeddingKernel<T>{pw, pi, flag, po, rows, num, dim, weight.strides()[0], weight.strides()[1]});
  }, weight, out, Fixed<std::int64_t>{indices}, Fixed<std::int64_t>{check.flag()});
  check.launched();
  if (recording(weight))
    record(label, out, {&weight, &indices}, [num, dim, indices = saved(indices)](const Tensor& g, const Needs&) {
      // index_add into zeros: each row's gradients in the order of the indices.
      const Tensor flat = indices.reshape({-1});
      return Grads{index_add(zeros({num, dim}, g.device(), g.dtype()), 0, flat, g.reshape({flat.numel(), dim}))};
    });  // the indices (no gradient) are listed for a trace
  return out;
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

void check_scatter_elements(const OnnxNode& n) {
  const std::string reduction = node_text(n, "reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "max" && reduction != "min")
    onnx_refuse(n, "reduction " + reduction + " (none, add, max, min)");
}

std::vector<Tensor> scatter_elements(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const Tensor& index = c.at(1);
  const Tensor& src = c.at(2);
  const int axis = onnx_axis(c, c.attr_int("axis", 0), x.ndim());
  const std::string reduction = node_text(c.node, "reduction", "none");
  if (reduction == "add") return {scatter_add(x, axis, index, src)};
  // max and min (opset 18) reduce into x's own elements: torch's amax / amin with include_self.
  if (reduction != "none") return {scatter_reduce(x, axis, index, src, reduction == "max" ? "amax" : "amin", true)};
  // Replacement (ONNX leaves repeated indices undefined): the scattered sources where any lands,
  // x elsewhere; gradients reach x's kept elements and the sources.
  const Tensor zero = zeros(x.shape(), x.device(), x.dtype());
  const Tensor landed = scatter_add(zero, axis, index, ones(src.shape(), src.device(), src.dtype()));
  return {where(gt(landed, 0.0), scatter_add(zero, axis, index, src), x)};
}

// index_add, scatter_add and scatter_reduce record alike: only the sum including x has an ONNX form.
std::string scatter_row(OnnxEmit& e) {
  if (e.i(1) != 0 || e.i(2) != 1)
    e.refuse("only the sum including x (scatter_add) has an ONNX form (ScatterElements)");
  return e.node("ScatterElements", {e.in[0], e.in.at(2), e.in[1]},
                {attr_i("axis", e.i(0)), attr_s("reduction", "add")});
}

}  // namespace

// The registry's rows of this family (registry.hpp). The index tensor is the second input;
// scatter_reduce's reduction is ints[1] (0 sum, 1 mean, 2 amax, 3 amin), include_self ints[2].
std::vector<OpDef> scatter_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"index_add", "index_add(Tensor,int,Tensor,Tensor)", 3, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return index_add(x[0], axis_of(a), x[1], x[2]); }},
      {"scatter_add", "scatter_add(Tensor,int,Tensor,Tensor)", 3, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return scatter_add(x[0], axis_of(a), x[1], x[2]); }},
      {"scatter_reduce", "scatter_reduce(Tensor,int,Tensor,Tensor,string,bool)", 3, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) {
         static const char* const names[] = {"sum", "mean", "amax", "amin"};
         return scatter_reduce(x[0], axis_of(a), x[1], x[2], names[a.ints.at(1)], a.ints.at(2) != 0);
       }},
      {"embedding", "embedding(Tensor,Tensor)", 2, {Domain::real}, DTypes::floating, true,
       [](X x, A) { return embedding(x[0], x[1]); }},
  };
  set_onnx(
      rows, "scatter_add",
      {{"ScatterElements", 13, kOnnxLastOpset, 3, 3, 1, true, scatter_elements, check_scatter_elements, 0}},
      {{"kten::scatter_add", scatter_row}});
  set_onnx(rows, "index_add", {}, {{"kten::index_add", scatter_row}});
  set_onnx(rows, "scatter_reduce", {}, {{"kten::scatter_reduce", scatter_row}});
  set_onnx(rows, "embedding", {}, {{"kten::embedding", [](OnnxEmit& e) {
                                      return e.node("Gather", {e.in[0], e.in.at(1)}, {attr_i("axis", 0)});
                                    }}});
  return rows;
}

}  // namespace kten::ops
