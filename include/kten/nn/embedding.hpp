// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/embedding.hpp
/// \brief Embedding: a lookup table of learnable rows (torch::nn::Embedding).

#include <cstdint>
#include <optional>
#include <string>

#include <kten/nn/module.hpp>

namespace kten::nn {

/// \brief out = weight[indices]: row i of the (num, dim) parameter "weight" for each int64 index,
/// a result of shape indices.shape() + {dim} (kten::embedding). PyTorch's initialisation: weight
/// drawn from N(0, 1) with the layer's seed. The gradient adds each row's gradients in the order
/// of the indices, the same bits on every run and device; an index outside [0, num) is an
/// IndexError (see kten::embedding for when a GPU reports it).
class Embedding : public Module {
 public:
  /// \brief `num` rows of `dim` features (both >= 0, else ShapeError) in `dtype` (float32 or float64); seed
  /// default: next_seed().
  Embedding(std::int64_t num, std::int64_t dim, DType dtype = DType::float32, std::optional<std::uint64_t> seed = {});

  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }

  /// \brief The number of rows.
  std::int64_t num_embeddings() const { return num_; }
  /// \brief The width of a row.
  std::int64_t embedding_dim() const { return dim_; }
  /// \brief The (num, dim) table (registered "weight").
  const Tensor& weight() const { return weight_->value; }

 private:
  std::int64_t num_, dim_;
  std::shared_ptr<Parameter> weight_;
};

}  // namespace kten::nn
