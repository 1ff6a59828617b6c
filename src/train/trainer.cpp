// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The Trainer: model and batches on one device, losses summed there and read once per epoch;
// data-parallel over a process group when there is one.
#include <chrono>
#include <exception>
#include <iomanip>
#include <iostream>
#include <optional>

#include <kten/dist/ddp.hpp>
#include <kten/ops.hpp>
#include <kten/trainer.hpp>

#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"

namespace kten {

Trainer::Trainer(int max_epochs, int num_gpus)
    : max_epochs_(max_epochs), device_(num_gpus > 0 ? try_gpu() : cpu()), progress_(&std::cout) {
  if (max_epochs < 0) detail::fail("Trainer", "max_epochs must be >= 0");
}

// A host batch goes to the training device (d2l's Trainer moves batches to its GPU); a batch on
// a GPU stays where it is: copying it to another device every step would be an implicit transfer.
data::Batch Trainer::prepare_batch(const data::Batch& batch) const {
  for (const Tensor* t : {&batch.X, &batch.y})
    if (t->defined() && t->device().is_gpu() && t->device() != device_)
      detail::fail<DeviceMismatch>("Trainer", "a batch is on ", t->device(), " and the Trainer trains on ", device_,
                                   "; kten copies a GPU's batches nowhere implicitly. Train there (Trainer(epochs, "
                                   "/*num_gpus=*/1)) or keep the data set on cpu()");
  return {batch.X.to(device_), batch.y.to(device_)};
}

void Trainer::set_process_group(std::shared_ptr<const dist::ProcessGroup> group) {
  group_ = std::move(group);
  group_set_ = true;
}

std::shared_ptr<const dist::ProcessGroup> Trainer::process_group() const {
  if (group_set_) return group_;
  auto world = dist::default_group();
  return world && world->size() > 1 ? world : nullptr;
}

namespace {
// Every rank of `group` learns whether all of them succeeded at `f`; a rank that failed rethrows
// its own error, the others throw one naming the failed step, so no rank is left waiting.
template <class F>
void on_every_rank(const dist::ProcessGroup& group, bool runs_here, const std::string& what, F f) {
  std::exception_ptr failure;
  if (runs_here) {
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  const Tensor ok = full({1}, failure ? 0.0 : 1.0);
  group.all_reduce(ok, dist::ReduceOp::min);
  if (failure) std::rethrow_exception(failure);
  if (ok.item<float>() == 0.f) detail::fail("Trainer", what, " failed on another rank (see its message)");
}
}  // namespace

void Trainer::save(nn::Module& model, const std::string& path) const {
  const auto group = process_group();
  if (!group) return model.save(path);
  // The agreement comes after rank 0's write, so it is also the barrier that makes the file complete.
  on_every_rank(*group, group->rank() == 0, "save(\"" + path + "\") on rank 0", [&] { model.save(path); });
}

void Trainer::load(nn::Module& model, const std::string& path) const {
  const auto group = process_group();
  if (!group) return model.load(path, device_);
  on_every_rank(*group, true, "load(\"" + path + "\")", [&] { model.load(path, device_); });
}

std::vector<EpochReport> Trainer::fit(nn::Module& model, const nn::Loss& loss, optim::Optimizer& optimizer,
                                      const data::Dataset& data, std::int64_t batch_size) {
  prepare_model(model);
  const auto group = process_group();
  const int ranks = group ? group->size() : 1;
  std::optional<dist::DistributedDataParallel> ddp;  // broadcasts rank 0's parameters
  if (group) ddp.emplace(model, group, ddp_options_);
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : model;
  // Every rank gets as many training batches (padded like DistributedSampler), so the gradient
  // all_reduces match up; validation needs no collective per batch, so each example counts once.
  const data::Shard train_shard{group ? group->rank() : 0, ranks, data::Remainder::pad};
  const data::Shard val_shard{train_shard.rank, ranks, data::Remainder::uneven};
  // Both running sums live in one device tensor [train, validation], so an epoch ends with one read.
  const Tensor train_slot = tensor({1.f, 0.f}, device_), validation_slot = tensor({0.f, 1.f}, device_);
  std::vector<EpochReport> reports;
  for (int epoch = 0; epoch < max_epochs_; ++epoch) {
    const detail::Region region("kten::epoch");
    const auto start = std::chrono::steady_clock::now();
    // Running sums of batch loss x batch size, one 0-d tensor per kind: one fused kernel per batch.
    Tensor train_sum = zeros({}, device_), val_sum = zeros({}, device_);
    struct BatchRows {  // the batch size as a 0-d tensor; it changes only for a last, shorter batch
      std::int64_t count = -1;
      Tensor value;
    } train_rows, val_rows;
    auto add = [&](Tensor& sum, const Tensor& batch_loss, std::int64_t rows, BatchRows& weight) {
      if (batch_loss.numel() != 1)
        detail::fail<ShapeError>("Trainer", "the loss must be one number (a 0-d tensor), got shape ",
                                 batch_loss.shape());
      if (weight.count != rows) weight = {rows, full({}, static_cast<double>(rows), device_)};
      const Tensor value = batch_loss.astype(float32);
      sum = fma(value.ndim() == 0 ? value : value.reshape({}), weight.value, sum);
    };
    std::int64_t trained = 0;  // examples this rank trained on; every rank trains as many
    for (const auto& host_batch : data.shard_batches(true, batch_size, static_cast<std::uint64_t>(epoch), train_shard)) {
      const data::Batch batch = prepare_batch(host_batch);
      const Tensor batch_loss = loss(net(batch.X), batch.y);
      add(train_sum, batch_loss.detach(), batch.X.shape()[0], train_rows);
      optimizer.zero_grad(model);
      batch_loss.backward();
      if (ddp) ddp->synchronize_gradients();  // averaged over the ranks (started during backward)
      optimizer.step(model);
      trained += batch.X.shape()[0];
    }
    const NoGradGuard no_grad;  // validation: nothing recorded, no activations kept
    for (const auto& host_batch : data.shard_batches(false, batch_size, 0, val_shard)) {
      const data::Batch batch = prepare_batch(host_batch);
      add(val_sum, loss(net(batch.X), batch.y), batch.X.shape()[0], val_rows);
    }
    Tensor totals = train_sum * train_slot + val_sum * validation_slot;  // [train, validation]: one read
    if (group) group->all_reduce(totals);  // the sums of all ranks, still on the device
    const std::vector<float> sums = totals.to_vector<float>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double examples = static_cast<double>(trained) * ranks;
    EpochReport r{epoch + 1, examples > 0 ? sums[0] / examples : 0.0,
                  data.num_val() > 0 ? sums[1] / static_cast<double>(data.num_val()) : 0.0, examples / seconds};
    reports.push_back(r);
    if (progress_ && (!group || group->rank() == 0)) {
      *progress_ << "epoch " << r.epoch << '/' << max_epochs_ << "  train loss " << std::setprecision(6)
                 << r.train_loss << "  val loss " << r.val_loss << "  " << std::setprecision(4)
                 << r.samples_per_sec << " samples/s  on " << device_;
      if (group) *progress_ << " x " << ranks << " ranks";
      *progress_ << '\n';
    }
  }
  return reports;
}

}  // namespace kten
