// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The thread model (docs/semantics.md, "Thread model"): kten calls from worker threads, and from several
// threads at once, give the results the initialising thread gives, or a ThreadError that says
// why. Catch2's assertions are not thread-safe, so workers only compute; this thread checks.
#include <algorithm>
#include <exception>
#include <functional>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <Kokkos_Core.hpp>  // KOKKOS_VERSION

#include "support.hpp"

using namespace kten;

namespace {

// Runs f(0), ..., f(n-1) on n std::threads at once; returns what each threw (null if nothing).
std::vector<std::exception_ptr> run_on_threads(int n, const std::function<void(int)>& f) {
  std::vector<std::exception_ptr> thrown(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        f(i);
      } catch (...) {
        thrown[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return thrown;
}

// Where a worker is: a std::thread of its own, or a thread of the application's OpenMP parallel region.
enum class Worker { thread, parallel_region };

// An OpenMP build without Kokkos::Serial cannot run matrix products on the host where Kokkos'
// OpenMP pool does not serve the caller: inside a parallel region, and with Kokkos 3 on any thread
// but the one that initialised it (Kokkos 4 and 5 serve every thread outside a parallel region).
// Everywhere else they run.
bool worker_matmul_refused(const Device& d, Worker where) {
  const auto b = enabled_backends();
  auto has = [&](const char* name) { return std::find(b.begin(), b.end(), name) != b.end(); };
  const bool host = d.is_cpu() || gpus_are_emulated();
  const bool pool_serves_worker = KOKKOS_VERSION >= 40000 && where == Worker::thread;
  return host && has("OpenMP") && !has("Serial") && !pool_serves_worker;
}

// Rethrows what a worker threw, so that a failing check shows its message.
void rethrow_if(const std::exception_ptr& thrown) {
  if (thrown) std::rethrow_exception(thrown);
}

void require_thread_error(const std::exception_ptr& thrown) {
  REQUIRE(thrown);
  try {
    std::rethrow_exception(thrown);
  } catch (const ThreadError& e) {
    CHECK(std::string(e.what()).find("Kokkos_ENABLE_SERIAL") != std::string::npos);
  }
}

struct Product {
  Tensor A, B;
  std::vector<double> want;
};

// A x B for a size that spans several host and GPU tiles, and its float64 reference.
Product product(const Device& d, std::int64_t m, std::int64_t k, std::int64_t n, std::uint64_t seed) {
  Product p{uniform({m, k}, -1.0, 1.0, d, seed), uniform({k, n}, -1.0, 1.0, d, seed + 1), {}};
  const auto ha = test::host_doubles<float>(p.A), hb = test::host_doubles<float>(p.B);
  p.want.assign(m * n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t q = 0; q < k; ++q)
      for (std::int64_t j = 0; j < n; ++j) p.want[i * n + j] += ha[i * k + q] * hb[q * n + j];
  return p;
}

void require_product(const Tensor& got, const Product& p) {
  REQUIRE(got.defined());
  test::require_allclose<float>(got, p.want, 1e-4, 1e-4);
}

// A small MLP with fixed seeds: every thread builds the same model.
nn::Sequential mlp() {
  nn::Sequential net;
  net.add(nn::Linear(2, 16, {true, float32, 11}));
  net.add(nn::ReLU());
  net.add(nn::Linear(16, 1, {true, float32, 12}));
  return net;
}

// Two epochs of Trainer::fit on `device`; the trained parameters on the host.
std::vector<std::vector<float>> train(const Device& device) {
  data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 256, 64, 0);
  nn::Sequential model = mlp();
  optim::SGD sgd(0.01f);
  Trainer trainer(2, device.is_gpu() ? 1 : 0);
  trainer.set_progress_stream(nullptr);
  trainer.fit(model, nn::MSELoss(), sgd, data, 32);
  std::vector<std::vector<float>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

void require_same_parameters(const std::vector<std::vector<float>>& got,
                             const std::vector<std::vector<float>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    test::require_allclose(got[i], std::vector<double>(want[i].begin(), want[i].end()), 1e-5, 1e-6);
}

// Each worker either got ThreadError (a Kokkos without Serial to run on) or finished: then check(i).
template <class Check>
void require_each_worker(const Device& d, Worker where, const std::vector<std::exception_ptr>& thrown, Check check) {
  for (std::size_t i = 0; i < thrown.size(); ++i) {
    CAPTURE(i);
    if (worker_matmul_refused(d, where)) {
      require_thread_error(thrown[i]);
      continue;
    }
    REQUIRE_NOTHROW(rethrow_if(thrown[i]));
    check(i);
  }
}

}  // namespace

TEST_CASE("matmul on a worker thread matches the reference", "[threads]") {
  const Device d = test::device();
  const Product p = product(d, 200, 70, 600, 1);  // two host tiles in each of m and n
  Tensor C;
  const auto thrown = run_on_threads(1, [&](int) { C = matmul(p.A, p.B); });
  if (worker_matmul_refused(d, Worker::thread)) {
    require_thread_error(thrown[0]);
    return;
  }
  REQUIRE_NOTHROW(rethrow_if(thrown[0]));
  require_product(C, p);
}

TEST_CASE("matmuls on several threads at once each get their own right answer", "[threads]") {
  const Device d = test::device();
  constexpr int threads = 4, rounds = 3;
  std::vector<Product> products;
  for (int i = 0; i < threads; ++i)
    products.push_back(product(d, 50 + 40 * i, 30 + 7 * i, 300 - 50 * i, 10 * i + 1));
  std::vector<std::vector<Tensor>> results(threads);
  const auto thrown = run_on_threads(threads, [&](int i) {
    for (int r = 0; r < rounds; ++r) results[i].push_back(matmul(products[i].A, products[i].B));
  });
  require_each_worker(d, Worker::thread, thrown, [&](std::size_t i) {
    REQUIRE(results[i].size() == rounds);
    for (const Tensor& C : results[i]) require_product(C, products[i]);
  });
}

TEST_CASE("small operations from several threads at once, each on its calling thread, are each right",
          "[threads]") {
  const Device d = test::device();
  constexpr int threads = 4, rounds = 20;
  // Below the serial grain: a product for the direct kernel (60 multiply-adds) and one for the
  // tiled kernel on Kokkos::Serial (8x8x8), whole and axis reductions, the MSE loss.
  const Product direct = product(d, 3, 4, 5, 21), tiled = product(d, 8, 8, 8, 22);
  const Tensor x = uniform({20, 3}, -1.0, 1.0, d, 23), y = uniform({20, 3}, -1.0, 1.0, d, 24);
  // References from this thread; on an emulated GPU a worker reduces in another order (Serial).
  auto doubles = [](const Tensor& t) { return test::host_doubles<float>(t); };
  const auto want_sum = doubles(sum(x)), want_loss = doubles(nn::MSELoss()(x, y));
  const auto want_columns = doubles(sum(x, 0)), want_rows = doubles(max(x, 1));
  std::vector<std::vector<Tensor>> results(threads);
  const auto thrown = run_on_threads(threads, [&](int i) {
    for (int r = 0; r < rounds; ++r)
      results[i] = {matmul(direct.A, direct.B), matmul(tiled.A, tiled.B), sum(x), nn::MSELoss()(x, y),
                    sum(x, 0), max(x, 1)};
  });
  require_each_worker(d, Worker::thread, thrown, [&](std::size_t i) {
    const auto& got = results[i];
    REQUIRE(got.size() == 6);
    require_product(got[0], direct);
    require_product(got[1], tiled);
    test::require_allclose<float>(got[2], want_sum, 1e-5, 1e-6);
    test::require_allclose<float>(got[3], want_loss, 1e-5, 1e-6);
    test::require_allclose<float>(got[4], want_columns, 1e-5, 1e-6);
    test::require_allclose<float>(got[5], want_rows, 0, 0);
  });
}

TEST_CASE("Trainer::fit on worker threads, one or several at once, trains as on this thread",
          "[threads][trainer]") {
  const Device d = test::device();
  const auto want = train(d);
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    std::vector<std::vector<std::vector<float>>> got(threads);
    const auto thrown = run_on_threads(threads, [&](int i) { got[i] = train(d); });
    require_each_worker(d, Worker::thread, thrown, [&](std::size_t i) { require_same_parameters(got[i], want); });
  }
}

#ifdef _OPENMP
TEST_CASE("kten calls inside the application's own OpenMP parallel region", "[threads]") {
  const Device d = test::device();
  const Product p = product(d, 100, 40, 90, 7);
  constexpr int threads = 2;
  std::vector<Tensor> results(threads);
  std::vector<std::exception_ptr> thrown(threads);
#pragma omp parallel num_threads(threads)
  {
    const int i = omp_get_thread_num();
    try {
      results[i] = matmul(p.A, p.B);
    } catch (...) {
      thrown[i] = std::current_exception();
    }
  }
  require_each_worker(d, Worker::parallel_region, thrown, [&](std::size_t i) { require_product(results[i], p); });
}
#endif
