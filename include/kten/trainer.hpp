// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file trainer.hpp
/// \brief d2l's Trainer: moves the model and each batch to one device and trains there, and
/// data-parallel over several ranks when kten::dist runs.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <kten/data.hpp>
#include <kten/dist/ddp.hpp>
#include <kten/dist/process_group.hpp>
#include <kten/nn/loss.hpp>
#include <kten/nn/module.hpp>
#include <kten/optim.hpp>

namespace kten {

/// \brief What one epoch of Trainer::fit measured.
struct EpochReport {
  int epoch;               ///< \brief 1-based
  double train_loss;       ///< \brief mean training loss over the epoch (over all ranks)
  double val_loss;         ///< \brief mean validation loss after the epoch (over all ranks)
  double samples_per_sec;  ///< \brief training examples per second, wall clock (of all ranks)
};

/// \brief Trains on the first min(num_gpus, kten::num_gpus()) GPUs, or on the CPU.
///
/// kten drives one GPU per process, so with any GPU the device is gpu(0). Losses are accumulated
/// on the device and read once per epoch: a fit never synchronises the host once per batch.
///
/// Data-parallel: when kten::dist runs with more than one rank (dist::default_group()), or when
/// given a group with set_process_group(), fit() trains one model on every rank of the group, as
/// d2l's Trainer(num_gpus) does on several GPUs: each rank trains on its Shard of every batch
/// (batch_size rows per rank), gradients are averaged (dist::DistributedDataParallel), and the
/// epoch's loss sums are added over the ranks before they are read, so every rank returns the same
/// reports. Progress lines come from rank 0 only.
class Trainer {
 public:
  /// \brief `max_epochs` passes over the data, on a GPU when `num_gpus` > 0 and one exists.
  explicit Trainer(int max_epochs, int num_gpus = 0);

  /// \brief The training device.
  Device device() const { return device_; }
  /// \brief Moves the model's parameters to device().
  void prepare_model(nn::Module& model) const { model.to(device_); }
  /// \brief Moves a host batch to device() (explicit transfers, counted by kten::stats()); a batch
  /// on a GPU other than device() is a DeviceMismatch (no GPU's batch is copied implicitly).
  data::Batch prepare_batch(const data::Batch& batch) const;
  /// \brief Trains `model`; one progress line per epoch (epoch, train loss, validation loss,
  /// samples/s, device) unless quiet. Returns the per-epoch reports.
  std::vector<EpochReport> fit(nn::Module& model, const nn::Loss& loss, optim::Optimizer& optimizer,
                               const data::Dataset& data, std::int64_t batch_size);
  /// \brief Where progress lines go (nullptr: nowhere). Default: std::cout.
  void set_progress_stream(std::ostream* os) { progress_ = os; }

  /// \brief Trains data-parallel over `group` from now on (even a group of one rank); nullptr
  /// trains this process alone, also while kten::dist runs.
  void set_process_group(std::shared_ptr<const dist::ProcessGroup> group);
  /// \brief The group fit() trains over: the one set, else dist::default_group() when it has more
  /// than one rank; nullptr when this process trains alone.
  std::shared_ptr<const dist::ProcessGroup> process_group() const;
  /// \brief How data-parallel fits average gradients (buckets, overlap with backward).
  void set_ddp_options(const dist::DDPOptions& options) { ddp_options_ = options; }
  /// \brief The options data-parallel fits use; default: DDPOptions{}.
  const dist::DDPOptions& ddp_options() const { return ddp_options_; }
  /// \brief Writes `model` to `path` (Module::save) from rank 0 of process_group() only; every
  /// rank returns once the file is complete. On a cluster, `path` must be on a file system all
  /// ranks see.
  void save(nn::Module& model, const std::string& path) const;
  /// \brief Reads `path` into `model` on device(), on every rank (Module::load).
  void load(nn::Module& model, const std::string& path) const;

 private:
  int max_epochs_;
  Device device_;
  std::ostream* progress_;
  bool group_set_ = false;
  std::shared_ptr<const dist::ProcessGroup> group_;
  dist::DDPOptions ddp_options_;
};

}  // namespace kten
