// The Trainer: model and batches on one device, losses summed there and read once per epoch.
#include <chrono>
#include <iomanip>
#include <iostream>

#include <kten/ops.hpp>
#include <kten/trainer.hpp>

#include "dispatch.hpp"

namespace kten {

Trainer::Trainer(int max_epochs, int num_gpus)
    : max_epochs_(max_epochs), device_(num_gpus > 0 ? try_gpu() : cpu()), progress_(&std::cout) {
  if (max_epochs < 0) throw Error("kten: Trainer: max_epochs must be >= 0");
}

data::Batch Trainer::prepare_batch(const data::Batch& batch) const {
  return {batch.X.to(device_), batch.y.to(device_)};
}

std::vector<EpochReport> Trainer::fit(nn::Module& model, const nn::Loss& loss, optim::Optimizer& optimizer,
                                      const data::Dataset& data, std::int64_t batch_size) {
  prepare_model(model);
  // Both running sums live in one device tensor [train, validation], so an epoch ends with one read.
  const Tensor to_train = tensor({1.f, 0.f}, device_), to_val = tensor({0.f, 1.f}, device_);
  std::vector<EpochReport> reports;
  for (int epoch = 0; epoch < max_epochs_; ++epoch) {
    const detail::Region region("kten::epoch");
    const auto start = std::chrono::steady_clock::now();
    Tensor totals = zeros({2}, device_);  // sums of batch loss x batch size
    auto add = [&](const Tensor& batch_loss, std::int64_t rows, const Tensor& slot) {
      totals = totals + batch_loss.astype(float32) * slot * static_cast<double>(rows);
    };
    for (const auto& host_batch : data.batches(true, batch_size, static_cast<std::uint64_t>(epoch))) {
      const data::Batch batch = prepare_batch(host_batch);
      const Tensor prediction = model(batch.X);
      add(loss(prediction, batch.y), batch.X.shape()[0], to_train);
      optimizer.zero_grad(model);
      model.backward(loss.backward(prediction, batch.y));
      optimizer.step(model);
    }
    for (const auto& host_batch : data.batches(false, batch_size, 0)) {
      const data::Batch batch = prepare_batch(host_batch);
      add(loss(model(batch.X), batch.y), batch.X.shape()[0], to_val);
    }
    const std::vector<float> sums = totals.to_vector<float>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EpochReport r{epoch + 1, sums[0] / static_cast<double>(data.num_train()),
                  data.num_val() > 0 ? sums[1] / static_cast<double>(data.num_val()) : 0.0,
                  static_cast<double>(data.num_train()) / seconds};
    reports.push_back(r);
    if (progress_)
      *progress_ << "epoch " << r.epoch << '/' << max_epochs_ << "  train loss " << std::setprecision(6)
                 << r.train_loss << "  val loss " << r.val_loss << "  " << std::setprecision(4)
                 << r.samples_per_sec << " samples/s  on " << device_ << '\n';
  }
  return reports;
}

}  // namespace kten
