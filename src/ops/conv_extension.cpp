// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// E, the convolutions' zero-extended operand (conv_paths.hpp): X with its padding, or dY spread out by
// the stride, as a contiguous copy that the GPU tiles, cpu()'s direct convolution, its weight gradient
// and its Winograd path read at fixed displacements per tap instead of checking bounds.
// Bandwidth-bound: one pass over the source, against the kvol times each element of E is then read.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_paths.hpp"
#include "core/checked.hpp"
#include "dispatch/dispatch.hpp"
#include "fast_div.hpp"

namespace kten::detail {
namespace {

/// \brief The source index along one axis of E's index e, or -1 for a zero.
KOKKOS_INLINE_FUNCTION std::int64_t extension_source(const ConvExtension& x, int axis, std::int64_t e) {
  const std::int64_t q = e - x.front[axis], step = x.step[axis];
  if (q < 0) return -1;
  if (step == 1) return q < x.src[axis] ? q : -1;  // no 64-bit division
  return q % step == 0 && q / step < x.src[axis] ? q / step : -1;
}

/// \brief One row of E split into N phases (ConvExtension::phases), host only: d[p len + j] = row[(N j
/// + p - front) rs] where that column lies inside the row's n, else 0. The columns whose N
/// sources all lie inside, from a contiguous row, in one pass that reads N adjacent elements and
/// writes one to each phase (a de-interleave GCC vectorises; N strided passes over the row took
/// twice E's time for N = 4), the rest one by one.
template <int N, class T>
void split_row(T* d, std::int64_t len, const T* row, std::int64_t rs, std::int64_t front, std::int64_t n) {
  const std::int64_t lo = std::clamp<std::int64_t>(front <= 0 ? 0 : (front + N - 1) / N, 0, len);
  const std::int64_t hi = rs == 1 ? std::clamp<std::int64_t>(n + front < 0 ? 0 : (n + front) / N, lo, len) : lo;
  const auto one_by_one = [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j)
      for (int p = 0; p < N; ++p) {
        const std::int64_t c = N * j + p - front;
        d[p * len + j] = c >= 0 && c < n ? row[c * rs] : T(0);
      }
  };
  one_by_one(0, lo);
  if (hi > lo) {  // (the row's element N lo - front exists only then)
    const T* r = row + N * lo - front;
    for (std::int64_t j = 0; j < hi - lo; ++j)
      for (int p = 0; p < N; ++p) d[p * len + lo + j] = r[N * j + p];
  }
  one_by_one(hi, len);
}

/// \brief Fills E, `span` elements of one row along w per index: a whole row on the host (one
/// pass over the source, rows mapped once each), one element on a GPU (adjacent threads, adjacent
/// elements). Bandwidth-bound, against the kvol times each element is then read.
template <class T>
struct ExtendKernel {
  const T* src;
  std::int64_t ss[5];
  T* e;
  ConvExtension x;
  std::int64_t channels, span, count;  // count: the indices
  FastDiv by_w, by_h, by_d, by_c;      // E's index into (n, c, d, h, w)
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t first = index * span, row = by_w.div(first), ew = first - row * x.ext[2];
    const std::int64_t dh = by_h.div(row), nc = by_d.div(dh), n = by_c.div(nc);
    const std::int64_t sh = extension_source(x, 1, row - dh * x.ext[1]), sd = extension_source(x, 0, dh - nc * x.ext[0]);
    T* d = e + first;
    if (index == count - 1)
      for (std::int64_t j = 0; j < x.tail; ++j) d[span + j] = T(0);
    if (sd < 0 || sh < 0) {
      for (std::int64_t j = 0; j < span; ++j) d[j] = T(0);
      return;
    }
    const T* r = src + n * ss[0] + (nc - n * channels) * ss[1] + sd * ss[2] + sh * ss[3];
    if constexpr (!KTEN_DEVICE_PASS) {
      if (x.phases == 2) return split_row<2>(d, span / 2, r, ss[4], x.front[2], x.src[2]);
      if (x.phases == 4) return split_row<4>(d, span / 4, r, ss[4], x.front[2], x.src[2]);
    }
    if (x.step[2] == 1) return copy_run(d, 1, r, ss[4], ew - x.front[2], x.src[2], span);
    for (std::int64_t j = 0; j < span; ++j) {
      const std::int64_t sw = extension_source(x, 2, ew + j);
      d[j] = sw < 0 ? T(0) : r[sw * ss[4]];
    }
  }
};

}  // namespace

void strides_3d(const Tensor& t, int dims, std::int64_t* out) {
  out[0] = t.strides()[0];
  out[1] = t.strides()[1];
  for (int a = 0; a < 3; ++a) out[2 + a] = a < 3 - dims ? 0 : t.strides()[2 + a - (3 - dims)];
}

Tensor conv_extension(const char* op, const Tensor& src, int dims, std::int64_t batch, std::int64_t channels,
                      const ConvExtension& x) {
  const std::int64_t rows = checked_numel(Shape{batch, channels, x.ext[0], x.ext[1]}, op);
  const auto size = checked_add(checked_numel(Shape{rows, x.ext[2]}, op), x.tail);
  if (!size) fail<ShapeError>(op, "the convolution's padded operand has more elements than a tensor can hold");
  const Tensor e = empty({*size}, src.device(), src.dtype());
  if (rows * x.ext[2] == 0) return e;
  launch_views(op, [&](const auto& backend, auto* psrc, auto* pe) {
    using T = std::remove_pointer_t<decltype(pe)>;
    const std::int64_t span = std::decay_t<decltype(backend)>::is_host ? x.ext[2] : 1, count = rows * x.ext[2] / span;
    ExtendKernel<T> kernel{psrc, {}, pe, x, channels, span, count, FastDiv(x.ext[2], rows * x.ext[2]),
                           FastDiv(x.ext[1], rows), FastDiv(x.ext[0], rows / x.ext[1]), FastDiv(channels, batch * channels)};
    strides_3d(src, dims, kernel.ss);
    for_each_index(op, backend, count, kernel, e.numel());
  }, src, e);
  return e;
}

ConvExtension extension_of(ConvProduct product, const ConvGeometry& g, std::int64_t tail) {
  const bool input = product == ConvProduct::grad_input;
  ConvExtension x{};
  for (int t = 0; t < 3; ++t) {
    const std::int64_t span = (g.k[t] - 1) * g.dil[t];
    x.front[t] = input ? span - g.pad[t] : g.pad[t];
    x.step[t] = input ? g.stride[t] : 1;
    x.src[t] = input ? g.out[t] : g.in[t];
    x.ext[t] = (input ? g.in[t] - 1 : (g.out[t] - 1) * g.stride[t]) + span + 1;  // the last pixel's last tap
  }
  x.tail = tail;
  return x;
}

}  // namespace kten::detail
