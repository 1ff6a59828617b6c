// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file data.hpp
/// \brief Datasets and minibatches. SyntheticRegression makes its batches on the host (the Trainer
/// moves them); TensorDataset and ReplayBuffer make theirs on their tensors' device.

#include <cstdint>
#include <vector>

#include <kten/tensor.hpp>

namespace kten::data {

/// \brief One minibatch: inputs and targets (on the host for SyntheticRegression until the
/// Trainer's prepare_batch moves them; on their device for TensorDataset and ReplayBuffer).
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

/// \brief A dataset over tensors the application owns, on any one device, without copying them:
/// for example a simulation's fields wrapped by from_view. Rows [0, num_train) of X and y train,
/// the last num_val rows validate. Batches are gathered on that device (index_select of the rows);
/// each epoch's row order goes to the device in one counted transfer and nothing is read back, so
/// batches() never synchronises the host. Training rows are shuffled per epoch as
/// SyntheticRegression's are; validation rows come in order. The tensors are read when batches()
/// runs: values the application changed in place since are the ones used.
class TensorDataset : public Dataset {
 public:
  /// \brief X (examples, ...) and y (examples, ...) on one device, the last `num_val` rows for
  /// validation. ShapeError unless both have the same number (>= 1) of rows and 0 <= num_val <
  /// rows; DeviceMismatch unless they share a device.
  TensorDataset(Tensor X, Tensor y, std::int64_t num_val = 0, std::uint64_t seed = 0);
  std::vector<Batch> batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const override;
  std::int64_t num_train() const override { return num_train_; }
  std::int64_t num_val() const override { return num_val_; }
  /// \brief The inputs, as given (sharing the application's memory).
  const Tensor& X() const { return X_; }
  /// \brief The targets, as given.
  const Tensor& y() const { return y_; }

 private:
  Tensor X_, y_;
  std::int64_t num_train_, num_val_;
  std::uint64_t seed_;
};

/// \brief Samples pushed by a running simulation, kept on one device in a ring of `capacity` rows
/// (the oldest overwritten first), and minibatches drawn from them on that device for online
/// training. Neither push() nor sample() synchronises the host: the ring's fill level is counted
/// on the host and sample()'s row indices are drawn on the device.
class ReplayBuffer {
 public:
  /// \brief A ring of `capacity` (>= 1) samples whose input has shape `x_shape` and target
  /// `y_shape` (one sample's shapes, without the batch axis), on `device`, of `dtype`; `seed`
  /// fixes the sampled rows (the same on every device).
  ReplayBuffer(std::int64_t capacity, const Shape& x_shape, const Shape& y_shape, const Device& device = cpu(),
               DType dtype = DType::float32, std::uint64_t seed = 0);
  /// \brief Copies the rows of X (n, x_shape...) and y (n, y_shape...) into the ring, on the
  /// device (n > capacity keeps the last capacity rows). They must already be on the buffer's
  /// device (DeviceMismatch otherwise: kten never moves data implicitly) and of its dtype
  /// (DTypeError); ShapeError for other shapes.
  void push(const Tensor& X, const Tensor& y);
  /// \brief `batch_size` samples drawn uniformly, with replacement, from the rows held (each call
  /// draws anew); kten::Error while the buffer is empty.
  Batch sample(std::int64_t batch_size);
  /// \brief Rows held: min(rows pushed, capacity).
  std::int64_t size() const { return size_; }
  /// \brief The most rows held.
  std::int64_t capacity() const { return capacity_; }
  /// \brief Where the ring lives.
  Device device() const { return X_.device(); }

 private:
  Tensor X_, y_;  // (capacity, x_shape...), (capacity, y_shape...)
  std::int64_t capacity_, size_ = 0, next_ = 0;  // next_: the ring row the next push writes first
  std::uint64_t seed_, draws_ = 0;               // draws_: sample() calls so far, each a new stream
};

}  // namespace kten::data
