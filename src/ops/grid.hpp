// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what pooling (pool.cpp) and resampling (resample.cpp) share. An input of shape
// (N, C, spatial...) or (C, spatial...) is a stack of planes, each a 3-D grid (D, H, W): 1-D and
// 2-D inputs are grids with unit axes in front (extent 1, stride 0), so one kernel serves every
// rank. The input is read in place through its strides; results and gradients are contiguous.

#include <cstdint>
#include <vector>

#include <kten/tensor.hpp>

#include "core/fail.hpp"
#include "core/kokkos_compat.hpp"

namespace kten::detail {

/// \brief An input's planes and grid: plane p is (n, c) = (p / channels, p % channels), its
/// element (d, h, w) at plane(p) + at(d, h, w).
struct GridPlanes {
  std::int64_t planes = 0;       ///< \brief N * C (C for an unbatched input)
  std::int64_t channels = 1;     ///< \brief C, the last axis before the grid
  std::int64_t batch_stride = 0; ///< \brief the input's stride along N (0 when unbatched)
  std::int64_t channel_stride = 0;
  std::int64_t extent[3] = {1, 1, 1};  ///< \brief D, H, W (1 for the axes in front of a 1-D or 2-D grid)
  std::int64_t stride[3] = {0, 0, 0};  ///< \brief the input's strides along them

  /// \brief The offset of plane p's first element.
  KOKKOS_INLINE_FUNCTION std::int64_t plane(std::int64_t p) const {
    return (p / channels) * batch_stride + (p % channels) * channel_stride;
  }
  /// \brief The offset of (d, h, w) within a plane.
  KOKKOS_INLINE_FUNCTION std::int64_t at(std::int64_t d, std::int64_t h, std::int64_t w) const {
    return d * stride[0] + h * stride[1] + w * stride[2];
  }
  /// \brief The elements of one plane.
  KOKKOS_INLINE_FUNCTION std::int64_t plane_size() const { return extent[0] * extent[1] * extent[2]; }
};

/// \brief Flat index i of a contiguous (planes, e[0], e[1], e[2]) array as its plane and (d, h, w).
KOKKOS_INLINE_FUNCTION void split_index(std::int64_t i, const std::int64_t (&e)[3], std::int64_t& p, std::int64_t (&c)[3]) {
  c[2] = i % e[2];
  i /= e[2];
  c[1] = i % e[1];
  i /= e[1];
  c[0] = i % e[0];
  p = i / e[0];
}

/// \brief How a grid kernel walks its index over a contiguous (planes, e[0], e[1], e[2]) array: on
/// a GPU (Rows false) one element per index, adjacent threads on adjacent elements; on the host
/// (Rows true) one row along the last axis per index, so that the index is split, and the outer
/// axes' windows or taps found, once per row rather than once per element (64-bit divisions, not
/// memory, bounded the per-element walk on the host).
template <bool Rows>
struct GridWalk {
  /// \brief The indices to run over for n elements (e[2] >= 1).
  static std::int64_t indices(std::int64_t n, const std::int64_t (&e)[3]) { return Rows ? n / e[2] : n; }
  /// \brief Index i's first element (flat), its plane p and position c, and how many elements
  /// along the last axis it covers from there.
  KOKKOS_INLINE_FUNCTION static void start(std::int64_t i, const std::int64_t (&e)[3], std::int64_t& first, std::int64_t& p,
                                           std::int64_t (&c)[3], std::int64_t& count) {
    first = Rows ? i * e[2] : i;
    split_index(first, e, p, c);
    count = Rows ? e[2] : 1;
  }
};

/// \brief A forward grid kernel's walk over its index i's outputs (GridWalk over the output grid
/// g.out): place(a, o) places output position o along axis a (axes 0 and 1 once, axis 2 for each
/// output), then write(o, plane) computes output o (flat) from the input plane at offset `plane`.
template <bool Rows, class Grid, class Place, class Write>
KOKKOS_INLINE_FUNCTION void walk_outputs(const Grid& g, std::int64_t i, const Place& place, const Write& write) {
  std::int64_t first, p, c[3], count;
  GridWalk<Rows>::start(i, g.out, first, p, c, count);
  place(0, c[0]);
  place(1, c[1]);
  const std::int64_t plane = g.x.plane(p);
  for (std::int64_t k = 0; k < count; ++k) {
    place(2, c[2] + k);
    write(first + k, plane);
  }
}

/// \brief A gradient grid kernel's gather over its index i's input elements (gx contiguous,
/// GridWalk over the input grid g.x.extent): gx[element] = gather(p, c, first, last), with p the
/// element's plane, c its position, and the outputs [first, last) along each axis those that read
/// it (g.axis[a].readers, stepped along a row by next_readers on the host).
template <bool Rows, class Grid, class T, class Gather>
KOKKOS_INLINE_FUNCTION void gather_inputs(const Grid& g, std::int64_t i, T* gx, const Gather& gather) {
  std::int64_t first_i, p, c[3], count, first[3], last[3];
  GridWalk<Rows>::start(i, g.x.extent, first_i, p, c, count);
  g.axis[0].readers(c[0], first[0], last[0]);
  g.axis[1].readers(c[1], first[1], last[1]);
  first[2] = last[2] = 0;
  const std::int64_t c2 = c[2];
  for (std::int64_t k = 0; k < count; ++k) {
    c[2] = c2 + k;
    if constexpr (Rows) g.axis[2].next_readers(c[2], first[2], last[2]);  // the row starts at c[2] = 0
    else g.axis[2].readers(c[2], first[2], last[2]);
    gx[first_i + k] = gather(p, c, first, last);
  }
}

/// \brief x's planes and grid for an op over its last `spatial` axes (1 to 3). ShapeError naming
/// `op` unless x has rank spatial + 2 (batched) or, where `unbatched` allows, spatial + 1.
GridPlanes grid_planes(const char* op, const Tensor& x, int spatial, bool unbatched);

/// \brief `values` (one per spatial axis, or one for all of them) as `spatial` values, placed
/// last of three (the axes in front get `fill`). ShapeError naming `op` and `what` otherwise.
template <class V>
void per_axis(const char* op, const char* what, const std::vector<V>& values, int spatial,
              typename std::vector<V>::value_type fill, V (&out)[3]) {
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(spatial))
    fail<ShapeError>(op, what, " has ", values.size(), " values; give one for every spatial axis or one per axis (", spatial, ")");
  for (int a = 0; a < 3; ++a) {
    const int s = a - (3 - spatial);
    out[a] = s < 0 ? fill : values[values.size() == 1 ? 0 : static_cast<std::size_t>(s)];
  }
}

/// \brief x's axes before its grid followed by the last `spatial` of `grid`.
Shape grid_result_shape(const Tensor& x, int spatial, const std::int64_t (&grid)[3]);

}  // namespace kten::detail
