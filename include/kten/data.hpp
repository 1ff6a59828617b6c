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

/// \brief A dataset split into training and validation parts.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// \brief Minibatches of the training part (shuffled with a seed derived from `epoch`) or of
  /// the validation part (in order). The last batch may be smaller.
  virtual std::vector<Batch> batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const = 0;
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
