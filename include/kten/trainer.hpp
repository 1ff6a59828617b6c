#pragma once
/// \file trainer.hpp
/// \brief d2l's Trainer: moves the model and each batch to one device and trains there.

#include <cstdint>
#include <iosfwd>
#include <vector>

#include <kten/data.hpp>
#include <kten/nn/loss.hpp>
#include <kten/nn/module.hpp>
#include <kten/optim.hpp>

namespace kten {

/// \brief What one epoch of Trainer::fit measured.
struct EpochReport {
  int epoch;               ///< \brief 1-based
  double train_loss;       ///< \brief mean training loss over the epoch
  double val_loss;         ///< \brief mean validation loss after the epoch
  double samples_per_sec;  ///< \brief training examples per second, wall clock
};

/// \brief Trains on the first min(num_gpus, kten::num_gpus()) GPUs, or on the CPU.
///
/// kten drives one GPU per process, so with any GPU the device is gpu(0). Losses are accumulated
/// on the device and read once per epoch: a fit never synchronises the host once per batch.
class Trainer {
 public:
  /// \brief `max_epochs` passes over the data, on a GPU when `num_gpus` > 0 and one exists.
  explicit Trainer(int max_epochs, int num_gpus = 0);

  /// \brief The training device.
  Device device() const { return device_; }
  /// \brief Moves the model's parameters to device().
  void prepare_model(nn::Module& model) const { model.to(device_); }
  /// \brief Moves a host batch to device() (explicit transfers, counted by kten::stats()).
  data::Batch prepare_batch(const data::Batch& batch) const;
  /// \brief Trains `model`; one progress line per epoch (epoch, train loss, validation loss,
  /// samples/s, device) unless quiet. Returns the per-epoch reports.
  std::vector<EpochReport> fit(nn::Module& model, const nn::Loss& loss, optim::Optimizer& optimizer,
                               const data::Dataset& data, std::int64_t batch_size);
  /// \brief Where progress lines go (nullptr: nowhere). Default: std::cout.
  void set_progress_stream(std::ostream* os) { progress_ = os; }

 private:
  int max_epochs_;
  Device device_;
  std::ostream* progress_;
};

}  // namespace kten
