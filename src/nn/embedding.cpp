// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Embedding: a table of rows looked up by index (kten::embedding on its weight).
#include <kten/nn/embedding.hpp>

#include <kten/ops.hpp>
#include <kten/random.hpp>

#include <kten/nn/layers.hpp>

#include "core/checks.hpp"

namespace kten::nn {

Embedding::Embedding(std::int64_t num, std::int64_t dim, DType dtype, std::optional<std::uint64_t> seed)
    : num_(num), dim_(dim) {
  if (num < 0 || dim < 0)
    detail::fail<ShapeError>("Embedding", "num and dim must be >= 0, got ", num, " and ", dim);
  if (!is_floating(dtype)) detail::fail<DTypeError>("Embedding", "the weight is float32 or float64, not ", dtype);
  weight_ = register_parameter(
      "weight", Parameter{normal({num, dim}, 0.0, 1.0, device(), seed ? *seed : next_seed(), dtype), {}, {num, dim}, dtype});
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight_->value, indices); }

}  // namespace kten::nn
