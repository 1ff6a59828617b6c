// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Graph ops (scatter_add, scatter_reduce, index_add, embedding): the same bits run to run, on the
// OpenMP pool and on one thread, equal to a sequential loop over the sources; index errors named,
// without a host synchronisation on a GPU; the Embedding layer.
#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "support.hpp"

using namespace kten;

namespace {

constexpr std::int64_t kNodes = 300, kFeatures = 8, kEdges = 5000;

// `count` (default kEdges) destinations in [0, kNodes): random, so each repeats dozens of times.
std::vector<std::int64_t> destinations(std::uint64_t seed, std::int64_t count = kEdges) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> node(0, kNodes - 1);
  std::vector<std::int64_t> v(count);
  for (auto& i : v) i = node(rng);
  return v;
}

// Every result and gradient of the graph ops on `d`, as raw bytes: a message-passing step's
// scatters (sum, mean, amax over an expanded edge list, index_add, a full per-element index) and
// embedding, forward and backward.
std::vector<std::string> graph_results(const Device& d) {
  const Tensor x = randn({kNodes, kFeatures}, d, 1).requires_grad_();
  const Tensor src = randn({kEdges, kFeatures}, d, 2).requires_grad_();
  const Tensor dst = tensor(destinations(3), d);
  const Tensor edges = dst.reshape({kEdges, 1}).expand({kEdges, kFeatures});
  const Tensor full = tensor(destinations(4, kEdges * kFeatures), {kEdges, kFeatures}, d);  // one per element
  std::vector<Tensor> outs{scatter_add(x, 0, edges, src), index_add(x, 0, dst, src),
                           scatter_reduce(x, 0, edges, src, "mean", false), scatter_reduce(x, 0, full, src, "amax"),
                           scatter_add(x.transpose().contiguous().transpose(), 0, full, src)};
  const Tensor weight = randn({kNodes, kFeatures}, d, 5).requires_grad_();
  outs.push_back(embedding(weight, dst.reshape({50, kEdges / 50})));
  Tensor loss = zeros({}, d);
  for (std::size_t i = 0; i < outs.size(); ++i) loss = loss + sum(outs[i] * outs[i]) * static_cast<double>(i + 1);
  loss.backward();
  std::vector<std::string> bytes;
  for (const Tensor& t : {outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], x.grad(), src.grad(), weight.grad()}) {
    const auto v = t.to_vector<float>();
    bytes.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  return bytes;
}

}  // namespace

TEST_CASE("graph ops give the same bits run to run and on 1 or all threads", "[graph]") {
  const Device d = test::device();
  const auto first = graph_results(d);
  CHECK(graph_results(d) == first);
  // A std::thread's kten calls run on one thread (Kokkos::Serial; docs/semantics.md, "Thread
  // model"); this thread's on the whole OpenMP pool.
  std::vector<std::string> single;
  std::exception_ptr thrown;
  std::thread worker([&] {
    try {
      single = graph_results(d);
    } catch (...) {
      thrown = std::current_exception();
    }
  });
  worker.join();
  // A Kokkos with OpenMP but no Serial backend (the clang-debug preset) runs host work on the
  // thread that initialised Kokkos only: the worker gets ThreadError, and there is no single-thread
  // run to compare.
  const std::vector<std::string> backends = enabled_backends();
  const bool serial = std::find(backends.begin(), backends.end(), "Serial") != backends.end();
  if (thrown && !serial) {
    CHECK_THROWS_AS(std::rethrow_exception(thrown), ThreadError);
    return;
  }
  if (thrown) std::rethrow_exception(thrown);
  REQUIRE(single.size() == first.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    CAPTURE(i);
    CHECK(single[i] == first[i]);
  }
}

TEST_CASE("scatter_add sums each destination's sources in their order, as a sequential loop", "[graph]") {
  const Device d = test::device();
  const Tensor x = randn({kNodes, kFeatures}, d, 11), src = randn({kEdges, kFeatures}, d, 12);
  const auto dst = destinations(13);
  const Tensor out = scatter_add(x, 0, tensor(dst, d).reshape({kEdges, 1}).expand({kEdges, kFeatures}), src);
  std::vector<float> want = x.to_vector<float>();
  const auto s = src.to_vector<float>();
  for (std::int64_t e = 0; e < kEdges; ++e)
    for (std::int64_t f = 0; f < kFeatures; ++f) want[dst[e] * kFeatures + f] += s[e * kFeatures + f];
  const auto got = out.to_vector<float>();
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
}

TEST_CASE("scatter_reduce's reductions and include_self on a small case", "[graph]") {
  const Device d = test::device();
  const Tensor x = tensor(std::vector<double>{1, 2, 3, 4}, d);
  const Tensor index = tensor(std::vector<std::int64_t>{0, 0, 2, 0}, d);
  const Tensor src = tensor(std::vector<double>{5, -1, 7, 2}, d);
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "sum"), {7, 2, 10, 4});
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "sum", false), {6, 2, 7, 4});
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "mean"), {7.0 / 4, 2, 5, 4});
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "mean", false), {2, 2, 7, 4});
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "amax"), {5, 2, 7, 4});
  test::require_allclose<double>(scatter_reduce(x, 0, index, src, "amin", false), {-1, 2, 7, 4});
  CHECK_THROWS_AS(scatter_reduce(x, 0, index, src, "prod"), Error);
  CHECK_THROWS_AS(scatter_add(x, 0, index.reshape({2, 2}), src), ShapeError);
  // amax's gradient is split evenly among the values equal to the maximum (x's own included).
  const Tensor a = tensor(std::vector<double>{3, 0}, d).requires_grad_();
  const Tensor b = tensor(std::vector<double>{3, 1, 3}, d).requires_grad_();
  scatter_reduce(a, 0, tensor(std::vector<std::int64_t>{0, 0, 0}, d), b, "amax").sum().backward();
  test::require_allclose<double>(a.grad(), {1.0 / 3, 1});
  test::require_allclose<double>(b.grad(), {1.0 / 3, 0, 1.0 / 3});
}

TEST_CASE("graph ops' gradients against finite differences", "[graph]") {
  const auto idx = [](std::vector<std::int64_t> v, const Shape& s) { return tensor(v, s, test::device()); };
  test::check_gradients("scatter_reduce(mean, include_self=false)", [&](const std::vector<Tensor>& in) {
    return scatter_reduce(in[0], 1, idx({1, 0, 1, 1, 2, 1}, {2, 3}).to(in[0].device()), in[1], "mean", false);
  }, {randn({2, 3}, cpu(), 21, float64), randn({2, 3}, cpu(), 22, float64)});
  test::check_gradients("index_add(1)", [&](const std::vector<Tensor>& in) {
    return index_add(in[0], 1, idx({2, 0, 2, 2}, {4}).to(in[0].device()), in[1]);
  }, {randn({2, 3}, cpu(), 23, float64), randn({2, 4}, cpu(), 24, float64)});
}

TEST_CASE("an index out of range is an IndexError naming the op, without a host synchronisation", "[graph]") {
  const Device d = test::device();
  const Tensor x = zeros({4, 2}, d), src = ones({3, 2}, d);
  const Tensor bad = tensor(std::vector<std::int64_t>{0, 4, 1}, d);
  // The message of the IndexError f() throws ("" when it throws none), checked for the op and shapes.
  const auto names = [](const char* op, const std::function<void()>& f) {
    try {
      f();
    } catch (const IndexError& e) {
      const std::string m = e.what();
      return m.find(op) != std::string::npos && m.find("index 4 is out of range") != std::string::npos &&
             m.find("4x2") != std::string::npos;
    }
    return false;
  };
  if (d.is_cpu()) {  // host memory: the call reads its own flag and throws
    CHECK(names("index_add", [&] { index_add(x, 0, bad, src); }));
    CHECK(names("embedding", [&] { embedding(x, bad); }));
    return;
  }
  // A GPU: the kernel skips the index and raises a flag; the next synchronisation reports it.
  reset_stats();
  const Tensor out = index_add(x, 0, bad, src);
  CHECK(stats().host_syncs == 0);
  CHECK(names("index_add", [&] { out.to_vector<float>(); }));
  // Reported once; index 4 skipped: rows 0 and 1 get a source each. (Built in a loop: g++ 12.2's
  // AVX-512 vectoriser stores a constant {1, 1, 1, 1, 0, ...} as all ones, docs/building.md.)
  std::vector<float> want(8, 0.0f);
  for (int i = 0; i < 4; ++i) want[i] = 1.0f;
  CHECK(out.to_vector<float>() == want);
  const Tensor rows = embedding(x, bad);
  CHECK(stats().host_syncs == 2);  // the two reads above
  CHECK(names("embedding", [&] { synchronize(d); }));
  CHECK_NOTHROW(synchronize(d));
}

TEST_CASE("nn::Embedding: PyTorch's parameter and initialisation, trains on its device", "[graph]") {
  const Device d = test::device();
  nn::Embedding emb(10, 4, float32, 3);
  emb.to(d);
  const auto params = emb.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].name == "weight");
  CHECK(emb.weight().shape() == Shape{10, 4});
  const auto w = emb.weight().to_vector<float>();
  double mean = 0;
  for (float v : w) mean += v / 40.0;
  CHECK(std::abs(mean) < 0.6);  // N(0, 1)
  const Tensor out = emb(tensor(std::vector<std::int64_t>{1, 1, 7}, d));
  CHECK(out.shape() == Shape{3, 4});
  sum(out).backward();
  const auto g = emb.weight().grad().to_vector<float>();
  CHECK(g[1 * 4] == 2.0f);
  CHECK(g[7 * 4] == 1.0f);
  CHECK(g[0] == 0.0f);
}
