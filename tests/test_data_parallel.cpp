// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Data parallelism without MPI: shards of a dataset (DistributedSampler's rules), and
// DistributedDataParallel and the Trainer over a group of one rank (the MPI tests run them on
// several ranks: tests/mpi).
#include <sstream>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <kten/dist/ddp.hpp>
#include <kten/kten.hpp>

#include "support.hpp"

using namespace kten;

namespace {

std::vector<float> targets(const data::Batch& b) { return b.y.to_vector<float>(); }

// A group of one rank: every collective leaves the data as it is; it records what it was asked.
struct LoneGroup : dist::ProcessGroup {
  mutable std::vector<std::int64_t> all_reduced, broadcast_sizes;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(const Tensor& t, dist::ReduceOp) const override { all_reduced.push_back(t.numel()); }
  void broadcast(const Tensor& t, int) const override { broadcast_sizes.push_back(t.numel()); }
  Tensor all_gather(const Tensor& t) const override {
    Shape shape{1};
    shape.insert(shape.end(), t.shape().begin(), t.shape().end());
    return t.copyto(t.device()).reshape(shape);
  }
  Tensor reduce_scatter(const Tensor& t, dist::ReduceOp) const override {
    return t.copyto(t.device()).reshape(Shape(t.shape().begin() + 1, t.shape().end()));
  }
  void barrier() const override {}
};

}  // namespace

TEST_CASE("a shard takes every count-th example of each global batch, starting at its rank", "[data][shard]") {
  data::SyntheticRegression data({1.f, 2.f}, 0.5f, 0.1f, /*num_train=*/100, /*num_val=*/30, /*seed=*/4);
  for (bool train : {true, false}) {
    for (int count : {2, 3, 4}) {
      CAPTURE(train, count);
      const auto global = data.batches(train, 8 * count, 5);
      for (int r = 0; r < count; ++r) {
        const auto mine = data.shard_batches(train, 8, 5, {r, count, data::Remainder::uneven});
        REQUIRE(mine.size() == global.size());  // 100 and 30 leave every rank a row in the last batch
        for (std::size_t k = 0; k < global.size(); ++k) {
          const auto all = targets(global[k]), part = targets(mine[k]);
          std::vector<float> want;
          for (std::size_t i = static_cast<std::size_t>(r); i < all.size(); i += static_cast<std::size_t>(count))
            want.push_back(all[i]);
          CHECK(part == want);
          CHECK(mine[k].X.shape() == Shape{static_cast<std::int64_t>(want.size()), 2});
          CHECK(mine[k].X.device() == cpu());
        }
      }
    }
  }
  // One shard of one is the dataset's own batches.
  CHECK(targets(data.shard_batches(true, 8, 5, {})[0]) == targets(data.batches(true, 8, 5)[0]));
}

TEST_CASE("leftover examples are padded from the start of the epoch, dropped, or left uneven", "[data][shard]") {
  // 10 examples over 4 ranks with batch 2: global batches of 8 and 2 rows.
  data::SyntheticRegression data({1.f}, 0.f, 0.1f, /*num_train=*/10, /*num_val=*/0, /*seed=*/9);
  const auto global = data.batches(true, 8, 3);
  const auto first = targets(global[0]), last = targets(global[1]);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    const auto pad = data.shard_batches(true, 2, 3, {r, 4, data::Remainder::pad});
    REQUIRE(pad.size() == 2);  // every rank as many batches, of the same sizes
    CHECK(targets(pad[0]) == std::vector<float>{first[r], first[r + 4]});
    // ranks 0 and 1 take the two leftovers, ranks 2 and 3 repeat the epoch's first two examples
    CHECK(targets(pad[1]) == std::vector<float>{r < 2 ? last[r] : first[r - 2]});

    const auto drop = data.shard_batches(true, 2, 3, {r, 4, data::Remainder::drop});
    REQUIRE(drop.size() == 1);
    CHECK(targets(drop[0]) == targets(pad[0]));

    const auto uneven = data.shard_batches(true, 2, 3, {r, 4, data::Remainder::uneven});
    CHECK(uneven.size() == (r < 2 ? 2u : 1u));
  }
  // Fewer examples than ranks: padding goes round the epoch again.
  data::SyntheticRegression tiny({1.f}, 0.f, 0.1f, 1, 0, 2);
  const float only = targets(tiny.batches(true, 1, 0)[0])[0];
  for (int r = 0; r < 3; ++r) CHECK(targets(tiny.shard_batches(true, 1, 0, {r, 3})[0]) == std::vector<float>{only});
}

TEST_CASE("a shard whose rank is not below its count is an error", "[data][shard]") {
  data::SyntheticRegression data({1.f}, 0.f, 0.1f, 10, 0, 0);
  CHECK_THROWS_AS(data.shard_batches(true, 2, 0, {4, 4}), Error);
  CHECK_THROWS_AS(data.shard_batches(true, 2, 0, {-1, 4}), Error);
  CHECK_THROWS_AS(data.shard_batches(true, 2, 0, {0, 0}), Error);
  CHECK_THROWS_AS(data.shard_batches(true, 0, 0, {0, 2}), ShapeError);
}

TEST_CASE("DistributedDataParallel flattens gradients into buckets on the device and back", "[dist][ddp]") {
  const Device d = test::device();
  nn::Sequential plain = test::small_mlp(d), wrapped = test::small_mlp(d);
  auto group = std::make_shared<LoneGroup>();
  // 64 bytes, the parameters in reverse: bias 1 + weight 4x1 + bias 4 (9 floats, 36 bytes), then
  // weight 3x4 (48 bytes) in a bucket of its own.
  dist::DistributedDataParallel ddp(wrapped, group, {64});
  CHECK(group->broadcast_sizes == std::vector<std::int64_t>{9, 12});  // rank 0's parameters, by bucket
  CHECK(ddp.device() == d);
  CHECK(ddp.named_parameters().size() == 4);
  CHECK(ddp.named_parameters()[0].name == "0.weight");

  const Tensor x = randn({5, 3}, d, 1);
  plain(x).backward(ones({5, 1}, d));
  ddp(x).backward(ones({5, 1}, d));
  ddp.synchronize_gradients();
  CHECK(group->all_reduced == std::vector<std::int64_t>{9, 12});  // one all_reduce per bucket
  CHECK(ddp.num_buckets() == 2);
  for (std::size_t p = 0; p < 4; ++p)
    CHECK(wrapped.named_parameters()[p].slot->grad.to_vector<float>() ==
          plain.named_parameters()[p].slot->grad.to_vector<float>());

  SECTION("lazy layers are broadcast after their first forward") {
    nn::Sequential lazy;
    lazy.add(nn::Linear(2));
    lazy.to(d);
    auto lone = std::make_shared<LoneGroup>();
    dist::DistributedDataParallel later(lazy, lone);
    CHECK(lone->broadcast_sizes.empty());
    CHECK_THROWS_AS(later.synchronize_gradients(), Error);  // nothing to average before a forward
    later(ones({1, 3}, d));
    CHECK(lone->broadcast_sizes == std::vector<std::int64_t>{3 * 2 + 2});
  }
  CHECK_THROWS_AS(dist::DistributedDataParallel(plain, nullptr), Error);
}

TEST_CASE("DistributedDataParallel wraps its module under the module's own names, buffers included", "[dist][ddp]") {
  const Device d = test::device();
  // A module with a parameter, a child and a float and an int64 buffer.
  struct WithBuffers : nn::Module {
    Tensor scale, count;
    WithBuffers() {
      register_module("fc", nn::Linear(3, 2, {true, float32, 3}));
      scale = register_buffer("scale", full({2}, 1.5));
      count = register_buffer("count", zeros({}, cpu(), int64));
    }
    Tensor forward(const Tensor& x) override { return x; }
    std::string name() const override { return "WithBuffers"; }
  };
  WithBuffers m;
  m.to(d);
  auto group = std::make_shared<LoneGroup>();
  dist::DistributedDataParallel ddp(m, group);
  // One broadcast for the parameters' bucket, one for every buffer's bytes (a float64 carrier: 2
  // float32 and an int64, 16 bytes).
  CHECK(group->broadcast_sizes == std::vector<std::int64_t>{2 * 3 + 2, 2});
  std::vector<std::string> names;
  for (const auto& [name, t] : ddp.state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"scale", "count", "fc.weight", "fc.bias"});
  CHECK(ddp.named_buffers().size() == 2);
  CHECK(ddp.named_parameters()[0].slot == m.named_parameters()[0].slot);
  // train(), to() and to(DType) reach the module; the handles it holds see them.
  ddp.eval();
  CHECK_FALSE(m.is_training());
  ddp.to(float64);
  CHECK(m.scale.dtype() == float64);
  CHECK(m.count.dtype() == int64);
  ddp.to(cpu());
  CHECK(m.scale.device() == cpu());
  CHECK(m.device() == cpu());
  CHECK(ddp.device() == cpu());
  CHECK(m.scale.to_vector<double>() == std::vector<double>{1.5, 1.5});
}

namespace {

// A LoneGroup that notes, as each all_reduce starts, whether the first layer's weight gradient (the
// last one backward finishes) was still zero.
struct StartWatchingGroup : LoneGroup {
  const Tensor* first_weight_grad = nullptr;
  mutable std::vector<bool> first_weight_grad_was_zero;
  std::unique_ptr<dist::Work> all_reduce_async(const Tensor& t, dist::ReduceOp op) const override {
    first_weight_grad_was_zero.push_back(first_weight_grad->abs().sum().item<float>() == 0.f);
    return LoneGroup::all_reduce_async(t, op);
  }
};

}  // namespace

TEST_CASE("DistributedDataParallel starts each bucket's all_reduce during backward once its gradients are final",
          "[dist][ddp]") {
  const Device d = test::device();
  nn::Sequential m = test::small_mlp(d);
  auto group = std::make_shared<StartWatchingGroup>();
  group->first_weight_grad = &m.named_parameters()[0].slot->grad;
  dist::DistributedDataParallel ddp(m, group, {1});  // one bucket per parameter
  const Tensor x = randn({5, 3}, d, 1);
  auto forward_backward = [&] {
    optim::SGD(0.1f).zero_grad(m);
    ddp(x).sum().backward();
  };

  SECTION("overlapped: in reverse registration order, as backward finishes them") {
    forward_backward();
    CHECK(group->all_reduced == std::vector<std::int64_t>{1, 4, 4, 12});
    // The last layer's two buckets start before backward reaches the first layer, whose weight is
    // final before its bias (one node gives both), and whose bias bucket must start first.
    CHECK(group->first_weight_grad_was_zero == std::vector<bool>{true, true, false, false});
    ddp.synchronize_gradients();
    CHECK(group->all_reduced.size() == 4);  // nothing started twice

    // A second backward through the same graph changes buckets in flight: refused.
    const Tensor loss = ddp(x).sum();
    loss.backward(ones({}, d), /*retain_graph=*/true);
    CHECK_THROWS_WITH(loss.backward(), Catch::Matchers::ContainsSubstring("two backward passes after one forward"));
    ddp.synchronize_gradients();
  }
  SECTION("not overlapped: all in synchronize_gradients()") {
    dist::DistributedDataParallel later(m, group, {1, /*overlap=*/false});
    group->all_reduced.clear();
    optim::SGD(0.1f).zero_grad(m);
    later(x).sum().backward();
    CHECK(group->all_reduced.empty());
    later.synchronize_gradients();
    CHECK(group->all_reduced == std::vector<std::int64_t>{1, 4, 4, 12});
  }
  SECTION("a forward under NoGradGuard arms nothing") {
    {
      NoGradGuard no_grad;
      ddp(x);
    }
    optim::SGD(0.1f).zero_grad(m);
    m(x).sum().backward();  // the module itself: nothing starts until synchronize_gradients()
    CHECK(group->all_reduced.empty());
    ddp.synchronize_gradients();
    CHECK(group->all_reduced.size() == 4);
  }
}

TEST_CASE("the Trainer's data-parallel path over one rank trains exactly as one process", "[dist][trainer]") {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 200, 50, 0);
  auto train = [&](std::shared_ptr<const dist::ProcessGroup> group) {
    nn::Sequential model;
    model.add(nn::Linear(1, {true, float32, 3}));
    optim::SGD sgd(0.03f);
    Trainer trainer(2, 1);
    std::ostringstream progress;
    trainer.set_progress_stream(&progress);
    if (group) trainer.set_process_group(group);
    CHECK(trainer.process_group() == group);
    const auto reports = trainer.fit(model, nn::MSELoss(), sgd, data, 16);
    CHECK(progress.str().find(group ? " x 1 ranks" : "samples/s  on") != std::string::npos);
    return std::make_pair(reports, model.parameters()[0].to_vector<float>());
  };
  auto group = std::make_shared<LoneGroup>();
  const auto [parallel, w_parallel] = train(group);
  const auto [alone, w_alone] = train(nullptr);
  CHECK(group->all_reduced.size() == 2 * 13 + 2);  // a gradient bucket per batch, the loss sums per epoch
  CHECK(w_parallel == w_alone);
  CHECK(parallel[1].train_loss == alone[1].train_loss);
  CHECK(parallel[1].val_loss == alone[1].val_loss);
}

TEST_CASE("the Trainer hands its DDP options to the wrapper it makes", "[dist][trainer]") {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 32, 0, 0);
  nn::Sequential model;
  model.add(nn::Linear(1, {true, float32, 3}));
  optim::SGD sgd(0.03f);
  Trainer trainer(1, 1);
  trainer.set_progress_stream(nullptr);
  auto group = std::make_shared<LoneGroup>();
  trainer.set_process_group(group);
  CHECK(trainer.ddp_options().overlap);
  trainer.set_ddp_options({/*bucket_bytes=*/1, /*overlap=*/false});
  CHECK_FALSE(trainer.ddp_options().overlap);
  trainer.fit(model, nn::MSELoss(), sgd, data, 16);
  // 1-byte buckets: the bias and the weight apart, in each of the 2 batches, then the loss sums.
  CHECK(group->all_reduced == std::vector<std::int64_t>{1, 2, 1, 2, 2});
}
