// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: row kernels, for operations that fold each row of a tensor and then write it (axis
// reductions, softmax, the normalisations and their gradients). A row body is written once against
// a `Row`, which walks the row's `len` elements: on the host one thread per row, folding into
// independent lanes so the loops vectorise (a single accumulator would be a chain of dependent
// adds); on a GPU (and an emulated one) one team per contiguous row, its threads reading
// consecutive elements (coalesced) and combining through Kokkos' team reduction, or one thread per
// strided row, so that adjacent threads read adjacent rows' elements (coalesced again). A row is
// `len` elements `inner` apart, so every axis of a contiguous tensor is a set of rows; the
// innermost (inner = 1) is the fast case. These kernels are bandwidth-bound: each pass over a row
// after the first reads it from cache.

#include <cstdint>

#include <kten/tensor.hpp>

#include "dispatch/dispatch.hpp"
#include "reductions.hpp"

namespace kten::detail {

/// \brief Where the rows of a reduction along one axis of a contiguous tensor lie: `outer * inner`
/// rows of `len` elements, `inner` apart (inner = 1 along the last axis).
struct RowLayout {
  std::int64_t outer = 1, len = 1, inner = 1;
  /// \brief How many rows.
  std::int64_t rows() const { return outer * inner; }
  /// \brief The offset of row r's first element.
  KOKKOS_INLINE_FUNCTION std::int64_t start(std::int64_t r) const { return (r / inner) * len * inner + r % inner; }
};

/// \brief The row layout of `axis` of `shape` (counted from the end when negative, already
/// checked; a 0-d shape is one row of one element). The extents multiply to at most the shape's
/// element count, which fits.
inline RowLayout row_layout(const Shape& shape, int axis) {
  const int ndim = static_cast<int>(shape.size());
  const int a = axis < 0 ? axis + ndim : axis;
  RowLayout layout;
  for (int d = 0; d < ndim; ++d) (d < a ? layout.outer : d == a ? layout.len : layout.inner) *= shape[d];
  return layout;
}

/// \brief The loops of a row walked by one thread: every element in order.
struct OneThreadLoops {
  /// \brief f(k) for k in [0, n).
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(std::int64_t n, const F& f) const {
    for (std::int64_t k = 0; k < n; ++k) f(k);
  }
  /// \brief f() once for the row (a per-row result).
  template <class F>
  KOKKOS_INLINE_FUNCTION void once(const F& f) const {
    f();
  }
};

/// \brief One host thread walking a row.
struct HostRow : OneThreadLoops {
  /// \brief The reduction of f(k) over the row's k in [0, n), in `Lanes` independent partial
  /// results (four vector registers of them), combined pairwise at the end.
  template <class Reduction, class T, class F>
  KOKKOS_INLINE_FUNCTION T fold(std::int64_t n, const F& f) const {
    constexpr int Lanes = 128 / sizeof(T);
    T lane[Lanes];
    for (int l = 0; l < Lanes; ++l) lane[l] = Reduction::template identity<T>();
    std::int64_t k = 0;
    for (; k + Lanes <= n; k += Lanes) {
      if constexpr (Reduction::selects) {
        // GCC's loop vectoriser turns the selects into vector max/min and blends; unrolled, its
        // straight-line vectoriser leaves them scalar (10x slower).
        for (int l = 0; l < Lanes; ++l) lane[l] = Reduction::combine(lane[l], f(k + l));
      } else {
        KTEN_UNROLL  // every lane in a register: without it they stay in memory (2x slower)
        for (int l = 0; l < Lanes; ++l) lane[l] = Reduction::combine(lane[l], f(k + l));
      }
    }
    for (; k < n; ++k) lane[0] = Reduction::combine(lane[0], f(k));
    // Lanes folded in halves (a tree: whole vectors combined while they last), not one after the
    // other: a chain of 31 dependent adds cost a 1024-float row's sum 7% more time.
    for (int half = Lanes / 2; half > 0; half /= 2)
      for (int l = 0; l < half; ++l) lane[l] = Reduction::combine(lane[l], lane[l + half]);
    return lane[0];
  }
};

/// \brief One GPU thread walking a strided row, element after element.
struct ThreadRow : OneThreadLoops {
  /// \brief The reduction of f(k) over k in [0, n), in order.
  template <class Reduction, class T, class F>
  KOKKOS_INLINE_FUNCTION T fold(std::int64_t n, const F& f) const {
    T acc = Reduction::template identity<T>();
    for (std::int64_t k = 0; k < n; ++k) acc = Reduction::combine(acc, f(k));
    return acc;
  }
};

/// \brief A GPU team walking a contiguous row; Space is the backend's memory space.
template <class Member, class Space>
struct TeamRow {
  const Member& team;
  /// \brief The reduction of f(k) over k in [0, n), its result in every thread of the team. The
  /// barrier after it: Kokkos 3.4 combines a team reduction in a shared-memory buffer without one,
  /// so the next fold could overwrite the buffer before every thread has read this result.
  template <class Reduction, class T, class F>
  KOKKOS_INLINE_FUNCTION T fold(std::int64_t n, const F& f) const {
    T acc = Reduction::template identity<T>();
    Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, n), [&](std::int64_t k, T& a) { a = Reduction::combine(a, f(k)); },
                            ReductionReducer<Reduction, T, Space>(acc));
    team.team_barrier();
    return acc;
  }
  /// \brief f(k) for k in [0, n), spread over the team's threads (each k on one thread, the
  /// same one in every loop over the same n: Kokkos' TeamThreadRange deals them out by thread).
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(std::int64_t n, const F& f) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
  }
  /// \brief f() on one thread of the team.
  template <class F>
  KOKKOS_INLINE_FUNCTION void once(const F& f) const {
    Kokkos::single(Kokkos::PerTeam(team), f);
  }
};

/// \brief The sum of f(k) over a row.
template <class T, class Row, class F>
KOKKOS_INLINE_FUNCTION T row_sum(const Row& row, std::int64_t n, const F& f) {
  return row.template fold<SumReduction, T>(n, f);
}

/// \brief The moments of a row (or of any set of elements a fold walks) by the corrected two-pass
/// algorithm: the mean, c (the mean of the deviations x - mean: 0 but for the first mean's
/// rounding, taken off again when centring) and m2, the sum of the squared deviations from mean + c.
template <class T>
struct Moments {
  T mean, c, m2;
};

/// \brief The corrected two-pass moments of the `count` elements x[e] that `sum` walks: sum(f) is
/// the sum of f(e) over their indices e. Three folds; after the first, each reads from cache.
template <class T, class Sum>
KOKKOS_INLINE_FUNCTION Moments<T> corrected_moments(const T* x, T count, const Sum& sum) {
  const T mean = sum([&](std::int64_t e) { return x[e]; }) / count;
  const T c = sum([&](std::int64_t e) { return x[e] - mean; }) / count;
  const T m2 = sum([&](std::int64_t e) {
    const T centred = (x[e] - mean) - c;
    return centred * centred;
  });
  return {mean, c, m2};
}

/// \brief One row's (or set's) centring as the forward normalised it: xhat = ((x - mean) - c) *
/// rstd, rstd = 1 / sqrt(var + eps).
template <class T>
struct Centring {
  T mean, c, rstd;
  KOKKOS_INLINE_FUNCTION T centred(T x) const { return (x - mean) - c; }
  KOKKOS_INLINE_FUNCTION T xhat(T x) const { return centred(x) * rstd; }
  /// \brief The gradient at x: rstd (gw - mean(gw) - xhat mean(gw xhat)), gw = g w its output's
  /// gradient times its weight, the means over the row.
  KOKKOS_INLINE_FUNCTION T grad(T x, T gw, T mean_gw, T mean_gw_xhat) const {
    return rstd * (gw - mean_gw - xhat(x) * mean_gw_xhat);
  }
};

/// \brief A forward's per-row (or per-set) statistics. A kernel copies a row's into registers
/// (of()) before its loops: read through the pointers, every store to the output might have
/// changed them.
template <class T>
struct RowStatistics {
  const T* mean;
  const T* c;
  const T* rstd;
  KOKKOS_INLINE_FUNCTION Centring<T> of(std::int64_t r) const { return {mean[r], c[r], rstd[r]}; }
};

/// \brief A row body as a kernel over row indices, each row walked by one thread (Row: HostRow
/// or ThreadRow).
template <class Body, class Row>
struct ThreadRows {
  Body body;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const { body(r, Row{}); }
};

/// \brief A row body as a team kernel: team i walks row first + i.
template <class Body, class Space>
struct TeamRows {
  Body body;
  std::int64_t first;
  template <class Member>
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    body(first + team.league_rank(), TeamRow<Member, Space>{team});
  }
};

/// \brief Teams per launch of a row kernel: with up to 1024 threads a team, 2^21 teams keep a
/// launch under 2^31 threads (HIP refuses a grid of 2^32 threads or more, CUDA a grid wider than
/// 2^31 - 1 blocks).
inline constexpr std::int64_t max_row_teams = std::int64_t(1) << 21;

/// \brief Runs body(r, row) for every row r of `layout` on the backend, asynchronously: body is a
/// functor with a `template <class Row> void operator()(std::int64_t r, const Row& row) const`.
template <class Backend, class Body>
void for_each_row(const char* label, const Backend& backend, const RowLayout& layout, const Body& body) {
  const std::int64_t rows = layout.rows();
  if (rows == 0) return;
  if constexpr (Backend::is_host) {
    for_each_index(label, backend, rows, ThreadRows<Body, HostRow>{body}, rows * layout.len);
  } else if (layout.inner > 1) {
    for_each_index(label, backend, rows, ThreadRows<Body, ThreadRow>{body}, rows * layout.len);
  } else {
    for (std::int64_t first = 0; first < rows; first += max_row_teams) {
      const std::int64_t teams = rows - first < max_row_teams ? rows - first : max_row_teams;
      run(label, backend, team_policy(backend, static_cast<int>(teams)),
          TeamRows<Body, typename Backend::memory_space>{body, first});
    }
  }
}

}  // namespace kten::detail
