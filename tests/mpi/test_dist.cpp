// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::dist on every rank of mpiexec: collectives on the device under test (cpu, or emulated GPUs
// for the staged path), mismatches as errors on every rank, application communicators, stall
// reports, DistributedDataParallel and the data-parallel Trainer.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <kten/dist_mpi.hpp>
#include <kten/kten.hpp>

#include "../support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

std::shared_ptr<dist::Communicator> world() { return dist::world(); }

// GPU tensors go through host memory unless the MPI is CUDA-aware; emulated GPUs model an MPI
// that is not.
bool staged(const Device& d) { return d.is_gpu() && (gpus_are_emulated() || !dist::gpu_aware()); }

// Rank r's value for element i: distinct on every rank and exact in float32.
double value(int rank, std::int64_t i) { return (rank + 1) * 10.0 + static_cast<double>(i); }

template <class T>
Tensor rank_tensor(int rank, const Shape& shape, const Device& d) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(value(rank, static_cast<std::int64_t>(i)));
  return tensor(v, shape, d);
}

// The message of the CollectiveMismatch that `f` throws; fails the test when it throws nothing.
template <class F>
std::string mismatch_message(F f) {
  try {
    f();
  } catch (const dist::CollectiveMismatch& e) {
    return e.what();
  }
  FAIL("no CollectiveMismatch");
  return {};
}

// The communicator still works: every rank adds its 1.
void require_usable(const dist::ProcessGroup& group) {
  const Tensor one = ones({1}, test::device());
  group.all_reduce(one);
  REQUIRE(one.item<float>() == static_cast<float>(group.size()));
}

// Counts the collectives a DistributedDataParallel issues, passing them on to the world.
struct CountingGroup : dist::ProcessGroup {
  std::shared_ptr<const dist::ProcessGroup> inner = world();
  mutable int all_reduces = 0, broadcasts = 0;
  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  void all_reduce(const Tensor& t, dist::ReduceOp op) const override {
    ++all_reduces;
    inner->all_reduce(t, op);
  }
  void broadcast(const Tensor& t, int root) const override {
    ++broadcasts;
    inner->broadcast(t, root);
  }
  Tensor all_gather(const Tensor& t) const override { return inner->all_gather(t); }
  Tensor reduce_scatter(const Tensor& t, dist::ReduceOp op) const override { return inner->reduce_scatter(t, op); }
  void barrier() const override { inner->barrier(); }
};

}  // namespace

TEST_CASE("the world communicator knows every rank and the node", "[dist]") {
  const auto w = world();
  REQUIRE(dist::is_initialized());
  REQUIRE(w->size() >= 2);
  CHECK(dist::default_group() == w);
  CHECK(w->local_size() == w->size());  // mpiexec on one machine
  CHECK(w->local_rank() == w->rank());
  const Tensor ranks = w->all_gather(full({1}, w->rank(), test::device()));
  CHECK(ranks.shape() == Shape{w->size(), 1});
  std::vector<double> want;
  for (int r = 0; r < w->size(); ++r) want.push_back(r);
  test::require_allclose<float>(ranks, want);
}

TEST_CASE("gpu_aware() follows KTEN_MPI_GPU_AWARE, then the deprecated KTEN_MPI_CUDA_AWARE", "[dist]") {
  const bool own_answer = dist::gpu_aware();
  ::setenv("KTEN_MPI_CUDA_AWARE", "1", 1);
  CHECK(dist::gpu_aware());
  ::setenv("KTEN_MPI_GPU_AWARE", "0", 1);  // the new name wins
  CHECK_FALSE(dist::gpu_aware());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_FALSE(dist::cuda_aware());  // the old name is an alias
#pragma GCC diagnostic pop
  ::setenv("KTEN_MPI_GPU_AWARE", "yes", 1);
  CHECK_THROWS_WITH(dist::gpu_aware(), ContainsSubstring("KTEN_MPI_GPU_AWARE must be 1 or 0, got 'yes'"));
  ::unsetenv("KTEN_MPI_GPU_AWARE");
  ::unsetenv("KTEN_MPI_CUDA_AWARE");
  CHECK(dist::gpu_aware() == own_answer);
}

TEMPLATE_TEST_CASE("all_reduce sums, averages and takes max and min in place, on the tensor's device", "[dist]",
                   float, double) {
  const auto w = world();
  const Device d = test::device();
  const Shape shape{2, 3};
  for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::mean, dist::ReduceOp::max, dist::ReduceOp::min}) {
    CAPTURE(dist::reduce_op_name(op));
    const Tensor t = rank_tensor<TestType>(w->rank(), shape, d);
    const Tensor alias = t.reshape({6});
    reset_stats();
    w->all_reduce(t, op);
    const Stats s = stats();
    std::vector<double> want;
    for (std::int64_t i = 0; i < 6; ++i) {
      double sum = 0;
      for (int r = 0; r < w->size(); ++r) sum += value(r, i);
      want.push_back(op == dist::ReduceOp::sum    ? sum
                     : op == dist::ReduceOp::mean ? sum / w->size()
                     : op == dist::ReduceOp::max  ? value(w->size() - 1, i)
                                                  : value(0, i));
    }
    CHECK(t.device() == d);
    test::require_allclose<TestType>(alias, want);  // in place: every view of the storage sees it
    if (staged(d)) {  // through host memory, counted
      CHECK(s.device_to_host == 1);
      CHECK(s.host_to_device == 1);
      CHECK(s.bytes_device_to_host == t.nbytes());
      CHECK(s.bytes_host_to_device == t.nbytes());
    } else {  // host memory, or GPU memory with a CUDA-aware MPI, goes to MPI as it is
      CHECK(s.transfers() == 0);
    }
    CHECK(s.host_syncs == 1);
  }
}

TEST_CASE("all_reduce_async: several in flight, each finished by test() or wait(), as all_reduce would", "[dist]") {
  const auto w = world();
  const Device d = test::device();
  std::vector<Tensor> tensors, blocking;
  std::vector<std::unique_ptr<dist::Work>> works;
  reset_stats();
  for (std::int64_t n : {1, 1000, 0, 70000}) {
    tensors.push_back(rank_tensor<float>(w->rank(), {n}, d));
    blocking.push_back(rank_tensor<float>(w->rank(), {n}, d));
    works.push_back(w->all_reduce_async(tensors.back(), dist::ReduceOp::mean));  // each with its own staging
  }
  CHECK(stats().host_syncs == 3);  // the device was fenced for each, the empty one excepted
  while (!works[0]->test()) {
  }
  CHECK(works[2]->test());  // the empty one moved nothing
  for (auto& work : works) work->wait();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    w->all_reduce(blocking[i], dist::ReduceOp::mean);
    CHECK(tensors[i].to_vector<float>() == blocking[i].to_vector<float>());
  }
  CHECK(tensors[1].to_vector<float>()[7] == static_cast<float>((10.0 * (w->size() + 1) / 2) + 7));

  SECTION("a mismatch is thrown when it starts, on every rank") {
    const Tensor t = zeros({w->rank() == 0 ? 2 : 3}, d);
    CHECK_THAT(mismatch_message([&] { w->all_reduce_async(t); }),
               ContainsSubstring("rank 0: all_reduce_async(sum) float32 2"));
    require_usable(*w);
  }
  SECTION("all_reduce on one rank and all_reduce_async on the others is a mismatch, not a hang") {
    const Tensor t = zeros({2}, d);
    const std::string m = mismatch_message([&] {
      if (w->rank() == 0) w->all_reduce(t);
      else w->all_reduce_async(t);
    });
    CHECK_THAT(m, ContainsSubstring("rank 0: all_reduce(sum) float32 2"));
    CHECK_THAT(m, ContainsSubstring(": all_reduce_async(sum) float32 2"));
    require_usable(*w);
  }
  SECTION("a Work destroyed unfinished is waited for") {
    const Tensor t = rank_tensor<float>(w->rank(), {3}, d);
    w->all_reduce_async(t);
    CHECK(t.to_vector<float>()[0] == static_cast<float>(10.0 * w->size() * (w->size() + 1) / 2));
  }
}

TEST_CASE("all_reduce propagates NaN through sum, max and min", "[dist]") {
  const auto w = world();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::max, dist::ReduceOp::min}) {
    CAPTURE(dist::reduce_op_name(op));
    // element 0: NaN on the last rank only; element 1: NaN on rank 0 only
    const bool last = w->rank() == w->size() - 1, first = w->rank() == 0;
    const Tensor t = tensor({last ? nan : 5.f, first ? nan : -5.f, 1.f}, test::device());
    w->all_reduce(t, op);
    const auto v = t.to_vector<float>();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK_FALSE(std::isnan(v[2]));
  }
}

TEMPLATE_TEST_CASE("broadcast copies the root's tensor to every rank", "[dist]", float, double) {
  const auto w = world();
  for (int root : {0, w->size() - 1}) {
    const Tensor t = rank_tensor<TestType>(w->rank(), {4}, test::device());
    reset_stats();
    w->broadcast(t, root);
    const Stats s = stats();
    test::require_allclose<TestType>(t, {value(root, 0), value(root, 1), value(root, 2), value(root, 3)});
    if (staged(test::device())) {  // the root stages out, the others stage in
      CHECK(s.device_to_host == (w->rank() == root ? 1u : 0u));
      CHECK(s.host_to_device == (w->rank() == root ? 0u : 1u));
    }
  }
}

TEMPLATE_TEST_CASE("all_gather stacks every rank's tensor; reduce_scatter reduces row r onto rank r", "[dist]",
                   float, double) {
  const auto w = world();
  const Device d = test::device();
  const int n = w->size();
  const Tensor gathered = w->all_gather(rank_tensor<TestType>(w->rank(), {2, 2}, d));
  CHECK(gathered.shape() == Shape{n, 2, 2});
  CHECK(gathered.device() == d);
  std::vector<double> want;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 4; ++i) want.push_back(value(r, i));
  test::require_allclose<TestType>(gathered, want);

  // Rank q's input row r holds value(q, 3r + j); rank r receives the sum (or mean) over q.
  for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::mean, dist::ReduceOp::max}) {
    const Tensor scattered = w->reduce_scatter(rank_tensor<TestType>(w->rank(), {n, 3}, d), op);
    CHECK(scattered.shape() == Shape{3});
    CHECK(scattered.device() == d);
    std::vector<double> mine;
    for (int j = 0; j < 3; ++j) {
      double sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, 3 * w->rank() + j);
      mine.push_back(op == dist::ReduceOp::sum ? sum : op == dist::ReduceOp::mean ? sum / n : value(n - 1, 3 * w->rank() + j));
    }
    test::require_allclose<TestType>(scattered, mine);
  }
}

TEST_CASE("collectives on empty tensors agree and move nothing", "[dist]") {
  const auto w = world();
  const Device d = test::device();
  reset_stats();
  const Tensor none = empty({0}, d), rows = empty({3, 0}, d, float64);
  w->all_reduce(none);
  w->broadcast(rows, w->size() - 1);
  CHECK(w->all_gather(rows).shape() == Shape{w->size(), 3, 0});
  CHECK(w->reduce_scatter(empty({w->size(), 0}, d)).shape() == Shape{0});
  w->barrier();
  CHECK(stats().transfers() == 0);
  CHECK(stats().host_syncs == 0);
}

TEST_CASE("ranks that disagree get a CollectiveMismatch naming ranks and shapes, on every rank", "[dist]") {
  const auto w = world();
  const Device d = test::device();
  const int rank = w->rank();
  const std::string others = w->size() == 2 ? "rank 1"
                             : w->size() == 3 ? "ranks 1,2"
                                              : "ranks 1-" + std::to_string(w->size() - 1);

  SECTION("shapes") {
    const Tensor t = rank == 0 ? zeros({2, 3}, d) : zeros({3, 2}, d);
    const std::string m = mismatch_message([&] { w->all_reduce(t); });
    CHECK_THAT(m, ContainsSubstring("rank 0: all_reduce(sum) float32 2x3"));
    CHECK_THAT(m, ContainsSubstring(others + ": all_reduce(sum) float32 3x2"));
  }
  SECTION("dtypes") {
    const Tensor t = zeros({4}, d, rank == 0 ? float64 : float32);
    const std::string m = mismatch_message([&] { w->broadcast(t); });
    CHECK_THAT(m, ContainsSubstring("rank 0: broadcast(root 0) float64 4"));
    CHECK_THAT(m, ContainsSubstring(others + ": broadcast(root 0) float32 4"));
  }
  SECTION("operations, reductions and roots") {
    const Tensor t = zeros({4}, d);
    std::string m = mismatch_message([&] {
      if (rank == 0) w->all_reduce(t);
      else w->all_gather(t);
    });
    CHECK_THAT(m, ContainsSubstring("rank 0: all_reduce(sum) float32 4"));
    CHECK_THAT(m, ContainsSubstring(others + ": all_gather float32 4"));
    m = mismatch_message([&] { w->all_reduce(t, rank == 0 ? dist::ReduceOp::max : dist::ReduceOp::mean); });
    CHECK_THAT(m, ContainsSubstring("rank 0: all_reduce(max)"));
    m = mismatch_message([&] { w->broadcast(t, rank == 0 ? 0 : 1); });
    CHECK_THAT(m, ContainsSubstring("rank 0: broadcast(root 0)"));
    CHECK_THAT(m, ContainsSubstring(others + ": broadcast(root 1)"));
    m = mismatch_message([&] {
      if (rank == 0) w->barrier();
      else w->all_reduce(t);
    });
    CHECK_THAT(m, ContainsSubstring("rank 0: barrier"));
  }
  SECTION("int64 and boolean tensors, refused on every rank") {
    const Tensor labels = zeros({4}, d, int64), mask = zeros({4}, d, boolean);
    CHECK_THAT(mismatch_message([&] { w->all_reduce(labels); }),
               ContainsSubstring("collectives take float32 or float64 tensors, this one is int64"));
    CHECK_THAT(mismatch_message([&] { w->broadcast(mask); }), ContainsSubstring("astype(kten::float32)"));
    CHECK_THAT(mismatch_message([&] { w->all_gather(labels); }), ContainsSubstring("this one is int64"));
    CHECK_THAT(mismatch_message([&] { w->reduce_scatter(zeros({w->size(), 2}, d, boolean)); }),
               ContainsSubstring("this one is boolean"));
  }
  SECTION("invalid arguments on one rank") {
    const Tensor t = rank == 1 ? Tensor() : zeros({4}, d);
    const std::string m = mismatch_message([&] { w->all_reduce(t); });
    CHECK_THAT(m, ContainsSubstring("rank 1: all_reduce(sum): the tensor is undefined"));
    CHECK_THAT(mismatch_message([&] { w->broadcast(zeros({1}, d), w->size()); }),
               ContainsSubstring("root " + std::to_string(w->size()) + " is not a rank"));
    CHECK_THAT(mismatch_message([&] { w->reduce_scatter(zeros({w->size() + 1, 2}, d)); }),
               ContainsSubstring("one row per rank"));
  }
  require_usable(*w);  // a mismatch leaves the communicator in step
}

TEST_CASE("an application's sub-communicator is wrapped, not assumed to be the world", "[dist]") {
  const auto w = world();
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, w->rank() % 2, w->rank(), &half);
  const auto sub = dist::wrap(half);
  const int members = (w->size() + 1 - w->rank() % 2) / 2;
  CHECK(sub->size() == members);
  CHECK(sub->rank() == w->rank() / 2);
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(dist::native_handle(*sub), half, &relation);
  CHECK(relation == MPI_CONGRUENT);  // kten's own duplicate of the same ranks
  MPI_Comm_free(&half);              // the application's communicator may go; kten's stays

  const Tensor t = full({2}, w->rank(), test::device());
  sub->all_reduce(t);
  double want = 0;
  for (int r = w->rank() % 2; r < w->size(); r += 2) want += r;
  test::require_allclose<float>(t, {want, want});
  CHECK(sub->local_size() == members);
  require_usable(*sub);
}

TEST_CASE("a late rank is reported by the lowest waiting rank after the stall warning time", "[dist][stall]") {
  const auto w = world();
  const dist::StallOptions before = w->stall_options();
  std::ostringstream log;
  w->set_stall_options({/*warning_seconds=*/1.0, /*abort_seconds=*/0, &log});
  if (w->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
  w->barrier();
  w->set_stall_options(before);
  const std::string text = log.str();
  if (w->rank() == 0) {
    CHECK_THAT(text, ContainsSubstring("kten: warning: stall: collective #"));
    CHECK_THAT(text, ContainsSubstring("(barrier)"));
    // "...; rank 1 has not arrived" (a busy machine may also list a waiting rank that answered late)
    const auto end = text.find(" not arrived");
    REQUIRE(end != std::string::npos);
    const std::string missing = text.substr(text.rfind("; ", end) + 2, end - text.rfind("; ", end) - 2);
    CAPTURE(missing);
    CHECK((missing == "rank 1 has" || missing.rfind("ranks 1,", 0) == 0 || missing.rfind("ranks 1-", 0) == 0));
  } else {
    CHECK(text.empty());  // rank 1 never waited; the others leave the report to rank 0
  }
}

TEST_CASE("DistributedDataParallel starts every rank from rank 0's parameters", "[dist][ddp]") {
  const auto w = world();
  const Device d = test::device();
  nn::Linear layer(3, 2, {true, float32, /*seed=*/static_cast<std::uint64_t>(w->rank())});
  layer.to(d);
  dist::DistributedDataParallel ddp(layer, w);
  nn::Linear rank0(3, 2, {true, float32, /*seed=*/0});
  CHECK(layer.weight().to_vector<float>() == rank0.weight().to_vector<float>());
  CHECK(layer.bias().to_vector<float>() == rank0.bias().to_vector<float>());
  CHECK(ddp.device() == d);

  SECTION("buffers too, as PyTorch's broadcast_buffers: float and int64 ones") {
    struct WithBuffers : nn::Module {
      Tensor scale, count;
      explicit WithBuffers(int rank) {
        register_module("fc", nn::Linear(3, 2, {true, float32, static_cast<std::uint64_t>(rank)}));
        scale = register_buffer("scale", full({2}, 1.0 + rank));
        count = register_buffer("count", full({}, 7.0 * rank, cpu(), int64));
      }
      Tensor forward(const Tensor& x) override { return x; }
      std::string name() const override { return "WithBuffers"; }
    };
    WithBuffers m(w->rank());
    m.to(d);
    dist::DistributedDataParallel wrapped(m, w);
    CHECK(m.scale.to_vector<float>() == std::vector<float>{1, 1});
    CHECK(m.count.to_vector<std::int64_t>() == std::vector<std::int64_t>{0});
    CHECK(m.count.device() == d);
  }

  SECTION("lazy layers take rank 0's parameters at the first forward, which then uses them") {
    nn::Sequential lazy;
    lazy.add(nn::Linear(2, {true, float32, static_cast<std::uint64_t>(10 + w->rank())}));
    lazy.to(d);
    dist::DistributedDataParallel wrapped(lazy, w);
    CHECK(wrapped.num_buckets() == 0);
    const Tensor x = rand({4, 3}, d, 5);
    const Tensor y = wrapped(x);
    nn::Linear reference(2, {true, float32, 10});
    reference.to(d);
    const Tensor want = reference(x);
    CHECK(wrapped.parameters()[0].to_vector<float>() == reference.weight().to_vector<float>());
    test::require_allclose<float>(y, test::host_doubles<float>(want));
  }
}

TEST_CASE("DistributedDataParallel averages gradients with one all_reduce per bucket", "[dist][ddp]") {
  const auto w = world();
  const Device d = test::device();
  auto input = [&](int rank) { return randn({5, 3}, d, 100 + static_cast<std::uint64_t>(rank)); };
  // The reference: every rank's gradient computed here, then averaged.
  std::vector<std::vector<double>> want;
  for (int r = 0; r < w->size(); ++r) {
    nn::Sequential m = test::small_mlp(d);
    m(input(r)).backward(ones({5, 1}, d));
    const auto named = m.named_parameters();
    want.resize(named.size());
    for (std::size_t p = 0; p < named.size(); ++p) {
      const auto g = test::host_doubles<float>(named[p].slot->grad);
      want[p].resize(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) want[p][i] += g[i] / w->size();
    }
  }
  for (std::size_t bucket_bytes : {std::size_t(25) << 20, std::size_t(1), std::size_t(64)}) {
    CAPTURE(bucket_bytes);
    // 25 MiB: one bucket; 1 byte: one per parameter; 64 bytes, the parameters in reverse: bias 1 +
    // weight 4x1 + bias 4 (36 B), then weight 3x4 (48 B).
    const int buckets = bucket_bytes == 1 ? 4 : bucket_bytes == 64 ? 2 : 1;
    nn::Sequential m = test::small_mlp(d);
    auto counting = std::make_shared<CountingGroup>();
    dist::DistributedDataParallel ddp(m, counting, {bucket_bytes});
    CHECK(counting->broadcasts == buckets);  // the parameters, bucket by bucket
    ddp(input(w->rank())).backward(ones({5, 1}, d));
    ddp.synchronize_gradients();
    CHECK(ddp.num_buckets() == static_cast<std::size_t>(buckets));
    CHECK(counting->all_reduces == buckets);
    const auto named = m.named_parameters();
    for (std::size_t p = 0; p < named.size(); ++p) {
      CAPTURE(named[p].name);
      test::require_allclose<float>(named[p].slot->grad, want[p], 1e-5, 1e-6);
    }
  }
}

TEST_CASE("overlapped DistributedDataParallel trains to the same bits as the exchange after backward", "[dist][ddp]") {
  const auto w = world();
  const Device d = test::device();
  // Three steps with momentum, every rank with batches of its own; the parameters' bits after.
  // `tied` runs one 3-3 layer twice in each forward, so each of its parameters gets two gradients
  // in one backward pass: a bucket started after the first would average half a gradient.
  auto train = [&](dist::DDPOptions options, bool tied) {
    nn::Sequential m;
    if (tied) {
      m.add(nn::Linear(3, 3, {true, float32, 7}));
      m.add(nn::Tanh());
    } else {
      m.add(nn::Linear(3, 16, {true, float32, 7}));
      m.add(nn::Tanh());
      m.add(nn::Linear(16, 16, {true, float32, 8}));
      m.add(nn::ReLU());
      m.add(nn::Linear(16, 3, {true, float32, 9}));
    }
    m.to(d);
    dist::DistributedDataParallel ddp(m, w, options);
    optim::SGD sgd(0.05, optim::SGDOptions{0.9});
    for (std::uint64_t step = 0; step < 3; ++step) {
      const std::uint64_t seed = 100 + 10 * static_cast<std::uint64_t>(w->rank()) + step;
      const Tensor x = randn({8, 3}, d, seed);
      const Tensor loss = nn::MSELoss()(tied ? ddp(ddp(x)) : ddp(x), randn({8, 3}, d, seed + 1000));
      sgd.zero_grad(m);
      loss.backward();
      ddp.synchronize_gradients();
      sgd.step(m);
    }
    std::vector<std::vector<float>> values;
    for (const Tensor& p : m.parameters()) values.push_back(p.to_vector<float>());
    return values;
  };
  for (bool tied : {false, true})
    for (std::size_t bucket_bytes : {std::size_t(1), std::size_t(1100), std::size_t(25) << 20}) {
      CAPTURE(tied, bucket_bytes);
      const auto after = train({bucket_bytes, /*overlap=*/false}, tied);
      CHECK(train({bucket_bytes, /*overlap=*/true}, tied) == after);
      // The ranks hold one model: rank 0's bits everywhere.
      const Tensor first = tensor(after.front(), {static_cast<std::int64_t>(after.front().size())}, d);
      const Tensor lowest = first.copyto(d);
      w->all_reduce(first, dist::ReduceOp::max);
      w->all_reduce(lowest, dist::ReduceOp::min);
      CHECK(first.to_vector<float>() == lowest.to_vector<float>());
    }
}

TEST_CASE("gradients accumulated over two forward/backward pairs average as without overlap", "[dist][ddp]") {
  const auto w = world();
  const Device d = test::device();
  auto accumulate = [&](bool overlap) {
    nn::Sequential m = test::small_mlp(d);
    dist::DistributedDataParallel ddp(m, w, {1, overlap});
    optim::SGD(0.1).zero_grad(m);
    for (std::uint64_t micro = 0; micro < 2; ++micro)
      ddp(randn({4, 3}, d, 7 + 2 * micro + 10 * static_cast<std::uint64_t>(w->rank()))).sum().backward();
    ddp.synchronize_gradients();
    std::vector<Tensor> grads;
    for (const auto& [name, p] : m.named_parameters()) grads.push_back(p->grad.copyto(d));
    return grads;
  };
  const auto after = accumulate(false), overlapped = accumulate(true);
  for (std::size_t p = 0; p < after.size(); ++p)
    test::require_allclose<float>(overlapped[p], test::host_doubles<float>(after[p]), 1e-6, 1e-7);
}

TEST_CASE("the Trainer on N ranks with batch B matches one process with batch N*B", "[dist][trainer]") {
  const auto w = world();
  const int n = w->size();
  // 520 = 16 x 32 + 8 examples: with B = 32 / n every global batch splits evenly over the ranks.
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 520, 130, 0);
  const std::int64_t per_rank = 32 / n;
  auto run = [&](std::shared_ptr<const dist::ProcessGroup> group, std::int64_t batch, nn::Sequential& model,
                 std::ostringstream& progress) {
    model.add(nn::Linear(1, {true, float32, /*seed=*/3}));
    optim::SGD sgd(0.03f);
    Trainer trainer(2, 1);
    if (group != w) trainer.set_process_group(group);  // w: the default, nothing to set
    CHECK(trainer.process_group() == group);
    trainer.set_progress_stream(&progress);
    return trainer.fit(model, nn::MSELoss(), sgd, data, batch);
  };
  nn::Sequential parallel, alone;
  std::ostringstream parallel_progress, alone_progress;
  const auto reports = run(w, per_rank, parallel, parallel_progress);
  const auto reference = run(nullptr, 32, alone, alone_progress);
  REQUIRE(reports.size() == 2);
  for (std::size_t e = 0; e < 2; ++e) {
    CAPTURE(e, reports[e].train_loss, reference[e].train_loss);
    CHECK(std::fabs(reports[e].train_loss - reference[e].train_loss) <= 1e-4 * reference[e].train_loss + 1e-7);
    CHECK(std::fabs(reports[e].val_loss - reference[e].val_loss) <= 1e-4 * reference[e].val_loss + 1e-7);
  }
  for (std::size_t p = 0; p < 2; ++p)
    test::require_allclose<float>(parallel.parameters()[p], test::host_doubles<float>(alone.parameters()[p]), 1e-5,
                                  1e-6);
  // Every rank reports the same losses (the sums were added over the ranks before the read).
  const Tensor loss = full({1}, reports.back().train_loss, cpu(), float64), lowest = loss.copyto(cpu());
  w->all_reduce(loss, dist::ReduceOp::max);
  w->all_reduce(lowest, dist::ReduceOp::min);
  CHECK(loss.item<double>() == lowest.item<double>());
  // Progress lines come from rank 0 only.
  if (w->rank() == 0) CHECK_THAT(parallel_progress.str(), ContainsSubstring(" x " + std::to_string(n) + " ranks"));
  else CHECK(parallel_progress.str().empty());
  CHECK_FALSE(alone_progress.str().empty());  // alone, every process is its own rank 0
}

TEST_CASE("Trainer::save writes from rank 0 only and load reads on every rank", "[dist][trainer][io]") {
  const auto w = world();
  const Device d = test::device();
  Trainer trainer(1, 1);
  // One file name for all ranks: rank 0's process id.
  const Tensor pid = full({1}, static_cast<double>(getpid()), cpu(), float64);
  w->broadcast(pid);
  const std::string path = "kten-dist-test-" + std::to_string(static_cast<long>(pid.item<double>())) + ".kten";

  nn::Sequential model;
  model.add(nn::Linear(2, 3, {true, float32, 1}));
  model.to(d);
  if (w->rank() != 0) model.parameters()[0].copy_from(full({3, 2}, -1.0, d));  // only rank 0's may be written
  trainer.save(model, path);
  nn::Sequential loaded;
  loaded.add(nn::Linear(3));
  trainer.load(loaded, path);
  CHECK(loaded.parameters()[0].device() == trainer.device());
  nn::Linear rank0(2, 3, {true, float32, 1});
  CHECK(loaded.parameters()[0].to_vector<float>() == rank0.weight().to_vector<float>());
  w->barrier();
  if (w->rank() == 0) std::remove(path.c_str());

  // A write that fails on rank 0 fails on every rank, and nobody waits.
  CHECK_THROWS_AS(trainer.save(model, "/nonexistent-directory/model.kten"), Error);
  require_usable(*w);
}
