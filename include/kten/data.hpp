#pragma once
/// \file data.hpp
/// \brief Datasets and minibatches. Batches are made on the host; the Trainer moves them.

#include <cstdint>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::data {

/// \brief One minibatch: inputs and targets, on the host until prepare_batch moves them.
struct Batch {
  Tensor X;  ///< \brief (batch, features)
  Tensor y;  ///< \brief (batch, outputs)
};

/// \brief What a shard does with the examples left over when they do not split evenly.
enum class Remainder {
  pad,    ///< \brief repeat examples from the start of the epoch's order so every rank gets as
          ///< many (PyTorch's DistributedSampler default): for training
  drop,   ///< \brief drop the last examples so every rank gets as many (drop_last=True)
  uneven  ///< \brief every example exactly once; the ranks' last batches differ in size (and may be
          ///< missing): for evaluation, where no collective runs per batch
};

/// \brief This process's share of a dataset when `count` processes train on it together.
struct Shard {
  int rank = 0;                          ///< \brief this process, 0 <= rank < count
  int count = 1;                         ///< \brief processes sharing the data
  Remainder remainder = Remainder::pad;  ///< \brief what to do with the leftover examples
};

/// \brief A dataset split into training and validation parts.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// \brief Minibatches of the training part (shuffled with a seed derived from `epoch`) or of
  /// the validation part (in order). The last batch may be smaller.
  virtual std::vector<Batch> batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const = 0;
  /// \brief This shard's minibatches of `batch_size` rows, as PyTorch's DistributedSampler: the
  /// epoch's order is the same on every rank (seeded by the dataset and `epoch`), and the rank
  /// takes every count-th example of it, starting at its own rank. So batch k of the ranks, put
  /// together, is batch k of batches() with batch_size * count rows: N ranks with batch B see
  /// exactly what one process with batch N*B sees (up to the remainder, handled as
  /// `shard.remainder` says). With pad and drop every rank gets the same number of batches of
  /// the same sizes. A shard of count 1 is batches() itself. Throws kten::Error for a shard
  /// whose rank is not in [0, count).
  virtual std::vector<Batch> shard_batches(bool train, std::int64_t batch_size, std::uint64_t epoch,
                                           const Shard& shard) const;
  /// \brief Number of training examples.
  virtual std::int64_t num_train() const = 0;
  /// \brief Number of validation examples.
  virtual std::int64_t num_val() const = 0;
};

/// \brief d2l's synthetic regression data: X ~ N(0, 1), y = X w + b + noise * N(0, 1), on the host.
class SyntheticRegression : public Dataset {
 public:
  /// \brief Draws num_train + num_val examples from `seed`.
  SyntheticRegression(std::vector<float> w, float b, float noise = 0.01f, std::int64_t num_train = 1000,
                      std::int64_t num_val = 1000, std::uint64_t seed = 0);
  std::vector<Batch> batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const override;
  std::int64_t num_train() const override { return num_train_; }
  std::int64_t num_val() const override { return num_val_; }
  /// \brief All inputs, (num_train + num_val, len(w)), on cpu().
  const Tensor& X() const { return X_; }
  /// \brief All targets, (num_train + num_val, 1), on cpu().
  const Tensor& y() const { return y_; }
  /// \brief The true weights.
  const std::vector<float>& w() const { return w_; }
  /// \brief The true bias.
  float b() const { return b_; }

 private:
  std::vector<float> w_;
  float b_;
  std::int64_t num_train_, num_val_;
  std::uint64_t seed_;
  Tensor X_, y_;
};

}  // namespace kten::data
