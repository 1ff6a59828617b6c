// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// TensorDataset over the application's tensors and the ReplayBuffer: batches gathered on the
// tensors' device, nothing copied from the application's memory, no host synchronisation.
#include <algorithm>
#include <set>

#include <Kokkos_Core.hpp>

#include <kten/kokkos.hpp>

#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;

namespace {
// float64 rows numbered first, first + 1, ...: row i is {i, 10 i} in X and {i} in y, so every
// row says where it came from.
struct Rows {
  Tensor X, y;
};
Rows numbered_rows(std::int64_t n, const Device& d, double first = 0) {
  const Tensor i = arange(first, first + static_cast<double>(n), 1.0, d, DType::float64).reshape({n, 1});
  return {cat({i, i * 10.0}, 1), i};
}
}  // namespace

TEST_CASE("TensorDataset wraps the application's fields and gathers batches on their device", "[data]") {
  const Device d = test::device();
  if (!d.is_cpu() && !gpus_are_emulated()) SKIP("host-built Views fit cpu() and the emulated GPU only");
  // A simulation's field in the column-major layout of a GPU code's Views: 10 points, 2 components.
  Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace> field("field", 10, 2);
  Kokkos::View<double*, Kokkos::HostSpace> target("target", 10);
  for (int p = 0; p < 10; ++p) {
    field(p, 0) = p;
    field(p, 1) = 10 * p;
    target(p) = p;
  }
  const Tensor X = from_view(field, d), y = from_view(target, d).unsqueeze(1);
  const data::TensorDataset data(X, y, /*num_val=*/3, /*seed=*/5);
  CHECK(data.X().data() == field.data());  // the application's memory, not a copy
  CHECK(data.num_train() == 7);
  CHECK(data.num_val() == 3);

  reset_stats();
  const auto train = data.batches(true, 3, /*epoch=*/0);
  CHECK(stats().transfers() == (d.is_cpu() ? 0 : 1));  // the epoch's row order, once
  REQUIRE(train.size() == 3);
  CHECK(train[2].X.shape() == Shape{1, 2});
  std::multiset<double> seen;
  for (const auto& b : train) {
    CHECK(b.X.device() == d);
    const auto xs = b.X.to_vector<double>(), ys = b.y.to_vector<double>();
    for (std::size_t r = 0; r < ys.size(); ++r) {
      CHECK(xs[2 * r] == ys[r]);  // X and y rows stay paired
      CHECK(xs[2 * r + 1] == 10 * ys[r]);
      seen.insert(ys[r]);
    }
  }
  CHECK(seen == std::multiset<double>{0, 1, 2, 3, 4, 5, 6});  // every training row once
  CHECK(data.batches(true, 3, 0)[0].y.to_vector<double>() == train[0].y.to_vector<double>());  // seeded
  std::set<std::vector<double>> orders;  // epochs shuffle anew
  for (std::uint64_t e = 0; e < 4; ++e) orders.insert(data.batches(true, 7, e)[0].y.to_vector<double>());
  CHECK(orders.size() > 1);

  const auto val = data.batches(false, 2, 0);
  REQUIRE(val.size() == 2);
  CHECK(val[0].y.to_vector<double>() == std::vector<double>{7, 8});  // validation in order
  CHECK(val[1].X.to_vector<double>() == std::vector<double>{9, 90});

  field(8, 1) = -1;  // the application updates its field in place: the next batches see it
  CHECK(data.batches(false, 2, 0)[0].X.to_vector<double>()[3] == -1);
}

TEST_CASE("TensorDataset makes an epoch's batches without a host synchronisation", "[data][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device g = test::device().is_gpu() ? test::device() : test::other_device();
  const Rows rows = numbered_rows(50, g);
  const data::TensorDataset data(rows.X, rows.y, 10);
  const SyncDebug previous = set_sync_debug_mode(SyncDebug::Error);
  std::vector<data::Batch> train;
  CHECK_NOTHROW(train = data.batches(true, 16, 3));
  set_sync_debug_mode(previous);
  CHECK(train.size() == 3);
}

TEST_CASE("TensorDataset trains a model with Trainer::fit on its device", "[data][train]") {
  const Device d = test::device();
  // y = 2 x0 - x1 + 0.5, float32 as the layers' parameters.
  const Tensor X = randn({256, 2}, d, 11);
  const Tensor y = matmul(X, tensor(std::vector<float>{2.f, -1.f}, {2, 1}, d)) + 0.5;
  const data::TensorDataset data(X, y, /*num_val=*/56, /*seed=*/1);
  nn::Sequential model;
  model.add(nn::Linear(2, 1, {true, DType::float32, 3}));
  Trainer trainer(20, d.is_gpu() ? 1 : 0);
  REQUIRE(trainer.device() == d);
  trainer.set_progress_stream(nullptr);
  optim::SGD sgd(0.1f);
  const auto reports = trainer.fit(model, nn::MSELoss(), sgd, data, 32);
  CHECK(reports.back().val_loss < 1e-4);
  CHECK(reports.back().val_loss < reports.front().val_loss);
}

TEST_CASE("a Trainer on cpu() refuses a data set on a GPU instead of copying every batch to the host", "[data][train]") {
  KTEN_REQUIRE_GPUS(1);
  const Device gpu0 = gpu(0);
  const data::TensorDataset data(randn({8, 2}, gpu0, 1), randn({8, 1}, gpu0, 2));
  nn::Sequential model;
  model.add(nn::Linear(2, 1, {true, DType::float32, 3}));
  Trainer trainer(1, /*num_gpus=*/0);
  trainer.set_progress_stream(nullptr);
  optim::SGD sgd(0.1f);
  const auto before = stats().device_to_host;
  CHECK_THROWS_AS(trainer.fit(model, nn::MSELoss(), sgd, data, 4), DeviceMismatch);
  CHECK_THROWS_WITH(trainer.fit(model, nn::MSELoss(), sgd, data, 4), Catch::Matchers::ContainsSubstring("Trainer(epochs, /*num_gpus=*/1)"));
  CHECK(stats().device_to_host == before);
  // A host data set still goes to a GPU Trainer's device, as d2l's Trainer moves its batches.
  const data::TensorDataset host(randn({8, 2}, cpu(), 1), randn({8, 1}, cpu(), 2));
  Trainer on_gpu(1, /*num_gpus=*/1);
  on_gpu.set_progress_stream(nullptr);
  nn::Sequential gpu_model;
  gpu_model.add(nn::Linear(2, 1, {true, DType::float32, 3}));
  optim::SGD gpu_sgd(0.1f);
  CHECK_NOTHROW(on_gpu.fit(gpu_model, nn::MSELoss(), gpu_sgd, host, 4));
}

TEST_CASE("TensorDataset refuses tensors that do not pair up", "[data]") {
  const Device d = test::device();
  CHECK_THROWS_AS(data::TensorDataset(zeros({4, 2}, d), zeros({3, 1}, d)), ShapeError);
  CHECK_THROWS_AS(data::TensorDataset(zeros({4, 2}, d), zeros({4, 1}, d), 4), ShapeError);
  CHECK_THROWS_AS(data::TensorDataset(zeros({4, 2}, d), zeros({4, 1}, d), -1), ShapeError);
  CHECK_THROWS_AS(data::TensorDataset(zeros({0, 2}, d), zeros({0, 1}, d)), ShapeError);
  CHECK_THROWS_AS(data::TensorDataset(Tensor(), zeros({4, 1}, d)), Error);
  CHECK_THROWS_AS(data::TensorDataset(zeros({4, 2}, d), zeros({4, 1}, d)).batches(true, 0, 0), ShapeError);
  if (num_gpus() > 0)
    CHECK_THROWS_AS(data::TensorDataset(zeros({4, 2}, d), zeros({4, 1}, test::other_device())), DeviceMismatch);
}

TEST_CASE("ReplayBuffer keeps the last capacity rows in a ring and samples pairs from them", "[data][replay]") {
  const Device d = test::device();
  data::ReplayBuffer buffer(/*capacity=*/8, /*x_shape=*/{2}, /*y_shape=*/{1}, d, DType::float64, /*seed=*/4);
  CHECK(buffer.size() == 0);
  CHECK(buffer.capacity() == 8);
  CHECK(buffer.device() == d);
  CHECK_THROWS_AS(buffer.sample(4), Error);  // nothing to draw from yet

  const Rows first = numbered_rows(5, d);  // rows 0..4
  buffer.push(first.X, first.y);
  CHECK(buffer.size() == 5);
  auto values_of = [](const data::Batch& b) {
    const auto xs = b.X.to_vector<double>(), ys = b.y.to_vector<double>();
    std::set<double> held;
    for (std::size_t r = 0; r < ys.size(); ++r) {
      CHECK(xs[2 * r] == ys[r]);  // X and y rows stay paired
      CHECK(xs[2 * r + 1] == 10 * ys[r]);
      held.insert(ys[r]);
    }
    return held;
  };
  const auto early = values_of(buffer.sample(200));
  CHECK(early == std::set<double>{0, 1, 2, 3, 4});  // 200 draws reach every row held, none else

  const Rows second = numbered_rows(7, d, 100);  // rows 100..106
  buffer.push(second.X, second.y);  // 3 rows to the ring's end, then 4 over the first push's rows 0..3
  CHECK(buffer.size() == 8);
  std::set<double> late;
  for (int k = 0; k < 4; ++k)
    for (double v : values_of(buffer.sample(64))) late.insert(v);
  CHECK(late == std::set<double>{4, 100, 101, 102, 103, 104, 105, 106});
}

TEST_CASE("ReplayBuffer keeps only the last capacity rows of a large push", "[data][replay]") {
  const Device d = test::device();
  data::ReplayBuffer buffer(4, {2}, {1}, d, DType::float64);
  const Rows rows = numbered_rows(10, d);
  buffer.push(rows.X.narrow(0, 0, 3), rows.y.narrow(0, 0, 3));
  buffer.push(rows.X, rows.y);  // more than capacity: rows 6..9 remain
  CHECK(buffer.size() == 4);
  std::set<double> held;
  for (double v : buffer.sample(200).y.to_vector<double>()) held.insert(v);
  CHECK(held == std::set<double>{6, 7, 8, 9});
}

TEST_CASE("ReplayBuffer draws the same rows on every device for a seed, without a host synchronisation",
          "[data][replay][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device g = test::device().is_gpu() ? test::device() : test::other_device();
  std::vector<std::vector<double>> drawn;
  for (const Device& d : {cpu(), g}) {
    data::ReplayBuffer buffer(16, {2}, {1}, d, DType::float64, /*seed=*/21);
    const Rows rows = numbered_rows(12, d);
    const SyncDebug previous = set_sync_debug_mode(SyncDebug::Error);
    data::Batch b;
    CHECK_NOTHROW(buffer.push(rows.X, rows.y));
    CHECK_NOTHROW(buffer.sample(8));
    CHECK_NOTHROW(b = buffer.sample(8));  // a second draw, from a new stream
    set_sync_debug_mode(previous);
    CHECK(b.X.device() == d);
    drawn.push_back(b.y.to_vector<double>());
  }
  CHECK(drawn[0] == drawn[1]);
}

TEST_CASE("ReplayBuffer refuses samples that do not fit it", "[data][replay]") {
  const Device d = test::device();
  CHECK_THROWS_AS(data::ReplayBuffer(0, {2}, {1}, d), ShapeError);
  data::ReplayBuffer buffer(4, {2}, {1}, d);
  CHECK_THROWS_AS(buffer.push(zeros({3, 3}, d), zeros({3, 1}, d)), ShapeError);
  CHECK_THROWS_AS(buffer.push(zeros({3, 2}, d), zeros({2, 1}, d)), ShapeError);
  CHECK_THROWS_AS(buffer.push(zeros({2}, d), zeros({2, 1}, d)), ShapeError);
  CHECK_THROWS_AS(buffer.push(zeros({3, 2}, d, DType::float64), zeros({3, 1}, d, DType::float64)), DTypeError);
  if (num_gpus() > 0)
    CHECK_THROWS_AS(buffer.push(zeros({3, 2}, test::other_device()), zeros({3, 1}, test::other_device())),
                    DeviceMismatch);
  CHECK(buffer.size() == 0);  // nothing refused was kept
  buffer.push(zeros({1, 2}, d), zeros({1, 1}, d));
  CHECK_THROWS_AS(buffer.sample(0), ShapeError);
}
