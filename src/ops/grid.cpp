// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The grid view of pooling's and resampling's inputs (grid.hpp).
#include "grid.hpp"

#include "core/checks.hpp"
#include "core/fail.hpp"

namespace kten::detail {

GridPlanes grid_planes(const char* op, const Tensor& x, int spatial, bool unbatched) {
  check_defined(x, op);
  const int rank = x.ndim();
  if (rank != spatial + 2 && !(unbatched && rank == spatial + 1))
    fail<ShapeError>(op, "expects a (N, C, ...) tensor", unbatched ? " or a (C, ...) one" : "", " with ", spatial,
                     " spatial axes; got shape ", x.shape());
  GridPlanes g;
  const int lead = rank - spatial;  // 1 (C) or 2 (N, C)
  g.channels = x.shape()[lead - 1];
  g.channel_stride = x.strides()[lead - 1];
  g.planes = g.channels;
  if (lead == 2) {
    g.planes *= x.shape()[0];
    g.batch_stride = x.strides()[0];
  }
  for (int a = 0; a < spatial; ++a) {
    g.extent[3 - spatial + a] = x.shape()[lead + a];
    g.stride[3 - spatial + a] = x.strides()[lead + a];
  }
  return g;
}

Shape grid_result_shape(const Tensor& x, int spatial, const std::int64_t (&grid)[3]) {
  Shape shape(x.shape().begin(), x.shape().end() - spatial);
  for (int a = 3 - spatial; a < 3; ++a) shape.push_back(grid[a]);
  return shape;
}

}  // namespace kten::detail
