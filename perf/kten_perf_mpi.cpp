// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf-mpi: kten::dist measured against raw MPI in the same run, on two (or more) ranks.
//   mpiexec -n 2 kten-perf-mpi [--quick] [--kten-device cpu|gpu] [--out DIR]
// 1. all_reduce bandwidth: kten's all_reduce(sum) of a tensor against MPI_Allreduce on the very
//    same buffer (on a cpu() tensor both see the same host memory; on a GPU kten may stage);
// 2. training throughput of one rank alone against all ranks data-parallel, same global batch, with
//    the gradient exchange after backward and overlapped with it;
// 3. the chapter's exercise "two computations on two devices at once", answered with two ranks.
// Writes summary.json under --out and prints a table.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <kten/dist_mpi.hpp>
#include <kten/kten.hpp>

#include "git_hash.hpp"  // generated at build time
#include "perf_config.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kten::Device;
using kten::Tensor;

using kten::perf::Config;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The slowest rank's time of f(), every rank starting together.
template <class F>
double timed(MPI_Comm comm, F f) {
  MPI_Barrier(comm);
  const auto start = Clock::now();
  f();
  double seconds = since(start), slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct AllreduceRow {
  std::size_t bytes;
  double kten_s, mpi_s;
};

// kten's all_reduce and MPI_Allreduce in turns on one buffer, median of the repetitions.
std::vector<AllreduceRow> allreduce_rows(const Config& c, kten::dist::Communicator& world, MPI_Comm raw) {
  std::vector<AllreduceRow> rows;
  const std::vector<std::int64_t> sizes = c.quick ? std::vector<std::int64_t>{1 << 12, 1 << 18}
                                                  : std::vector<std::int64_t>{1 << 14, 1 << 18, 1 << 22, 1 << 24};
  for (std::int64_t n : sizes) {
    const Tensor t = kten::zeros({n}, c.device);  // zeros stay zeros under repeated sums
    auto kten_once = [&] { world.all_reduce(t); };
    auto mpi_once = [&] {
      kten::synchronize(c.device);
      MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, raw);
    };
    const int reps = c.quick ? 5 : (n <= (1 << 18) ? 200 : 20);
    kten_once();  // warm-up: staging buffers, MPI's shared-memory segments
    mpi_once();
    std::vector<double> k, m;
    for (int r = 0; r < reps; ++r) {
      k.push_back(timed(raw, kten_once));
      m.push_back(timed(raw, mpi_once));
    }
    rows.push_back({static_cast<std::size_t>(n) * 4, median(k), median(m)});
  }
  return rows;
}

// Samples per second of the second epoch (the first pays for allocations).
double training_rate(const Config& c, std::shared_ptr<const kten::dist::ProcessGroup> group, std::int64_t batch,
                     kten::dist::DDPOptions options = {}) {
  const std::int64_t features = 64, examples = c.quick ? 2048 : 16384;
  kten::data::SyntheticRegression data(std::vector<float>(features, 0.5f), 1.f, 0.01f, examples, 0, 0);
  kten::nn::manual_seed(0);
  kten::nn::Sequential model;
  model.add(kten::nn::Linear(256));
  model.add(kten::nn::ReLU());
  model.add(kten::nn::Linear(256));
  model.add(kten::nn::ReLU());
  model.add(kten::nn::Linear(1));
  kten::optim::SGD sgd(0.001f);
  kten::Trainer trainer(2, c.device.is_gpu() ? 1 : 0);
  trainer.set_progress_stream(nullptr);
  trainer.set_process_group(std::move(group));
  trainer.set_ddp_options(options);
  return trainer.fit(model, kten::nn::MSELoss(), sgd, data, batch).back().samples_per_sec;
}

// Two n x n matmuls: both on rank 0, one after the other, against one on each of two ranks at once.
std::string two_devices(const Config& c, int rank, MPI_Comm raw, std::ostream& os) {
  const std::int64_t n = c.quick ? 256 : 1024;
  const Tensor A = kten::rand({n, n}, c.device, 1 + static_cast<std::uint64_t>(rank));
  auto one = [&] {
    kten::matmul(A, A);
    kten::synchronize(c.device);
  };
  one();
  const double sequential = timed(raw, [&] {
    if (rank == 0) {
      one();
      one();
    }
  });
  const double together = timed(raw, [&] {
    if (rank < 2) one();
  });
  os << "\nExercise 3 with ranks: two " << n << "x" << n << " matmuls on " << c.device
     << " of rank 0, one after the other: " << sequential * 1e3 << " ms; one on each of ranks 0 and 1 at once: "
     << together * 1e3 << " ms; speed-up " << sequential / together << "x\n";
  std::ostringstream json;
  json << "{\"n\":" << n << ",\"sequential_s\":" << sequential << ",\"two_ranks_s\":" << together
       << ",\"speedup\":" << sequential / together << "}";
  return json.str();
}

}  // namespace

int main(int argc, char* argv[]) {
  kten::dist::Guard guard(argc, argv);
  Config c;
  c.device = kten::try_gpu();
  for (int i = 1; i < argc; ++i) kten::perf::parse_option(c, i, argc, argv);
  const auto world = kten::dist::world();
  const int rank = world->rank(), ranks = world->size();
  if (ranks < 2) kten::dist::abort("kten-perf-mpi needs at least 2 ranks: mpiexec -n 2 kten-perf-mpi");
  kten::require_available(c.device);
  MPI_Comm raw = MPI_COMM_NULL;  // raw MPI's own communicator over the same ranks
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  std::ostringstream quiet;
  std::ostream& os = rank == 0 ? std::cout : quiet;  // one rank prints

  const auto rows = allreduce_rows(c, *world, raw);
  os << "all_reduce(sum) of float32 on " << c.device << ", " << ranks << " ranks (bus bandwidth 2(p-1)/p x bytes / time)\n"
     << std::setw(12) << "bytes" << std::setw(14) << "kten us" << std::setw(14) << "MPI us" << std::setw(14)
     << "kten GB/s" << std::setw(14) << "MPI GB/s" << std::setw(10) << "ratio\n";
  const double bus = 2.0 * (ranks - 1) / ranks;
  for (const auto& r : rows)
    os << std::setw(12) << r.bytes << std::setw(14) << r.kten_s * 1e6 << std::setw(14) << r.mpi_s * 1e6 << std::setw(14)
       << bus * r.bytes / r.kten_s / 1e9 << std::setw(14) << bus * r.bytes / r.mpi_s / 1e9 << std::setw(9)
       << r.mpi_s / r.kten_s << '\n';

  // The same global batch: one rank alone (the others wait), then every rank with its share. One
  // rank alone with the per-rank batch separates the cost of the gradient all_reduce and of the
  // ranks waiting for each other (efficiency) from that of smaller GEMMs.
  const std::int64_t global_batch = 256, per_rank = global_batch / ranks;
  const int tries = c.quick ? 1 : 3;  // best of: a shared machine's noise only ever slows a fit
  auto best = [&](auto rate) {
    double b = 0;
    for (int t = 0; t < tries; ++t) b = std::max(b, rate());
    return b;
  };
  double alone = 0, alone_small = 0;
  if (rank == 0) {
    alone = best([&] { return training_rate(c, nullptr, global_batch); });
    alone_small = best([&] { return training_rate(c, nullptr, per_rank); });
  }
  world->barrier();
  // The gradient exchange after backward, then overlapped with it (DDPOptions::overlap), in turns.
  // The model has 330 KB of parameters: 128 KiB buckets give it three, one per layer (PyTorch's
  // 25 MiB would be one bucket, which has nothing to overlap with).
  const std::size_t bucket_bytes = std::size_t(128) << 10;
  double after = 0, overlapped = 0;
  for (int t = 0; t < tries; ++t) {
    after = std::max(after, training_rate(c, world, per_rank, {bucket_bytes, /*overlap=*/false}));
    overlapped = std::max(overlapped, training_rate(c, world, per_rank, {bucket_bytes, /*overlap=*/true}));
  }
  const double parallel = overlapped;
  const double efficiency = overlapped / (ranks * alone_small), efficiency_after = after / (ranks * alone_small);
  os << "\ntraining (MLP 64-256-256-1, " << kten::host_threads() << " host threads per rank, best of " << tries
     << ", DDP buckets of " << (bucket_bytes >> 10) << " KiB):\n"
     << "  1 rank, batch " << global_batch << ": " << alone << " samples/s\n"
     << "  1 rank, batch " << per_rank << ": " << alone_small << " samples/s\n"
     << "  " << ranks << " ranks, batch " << per_rank << " each, gradients exchanged after backward: " << after
     << " samples/s, data-parallel efficiency " << efficiency_after << "\n"
     << "  " << ranks << " ranks, batch " << per_rank << " each, exchange overlapped with backward: " << overlapped
     << " samples/s, data-parallel efficiency " << efficiency << "\n"
     << "  (efficiency: " << ranks << " ranks against " << ranks << " x one rank with the same per-rank batch); "
     << "speed-up over one rank with the same global batch " << parallel / alone << "x\n";
  const std::string exercise = two_devices(c, rank, raw, os);

  if (rank == 0) {
    const double ratio = rows.back().mpi_s / rows.back().kten_s;
    std::filesystem::create_directories(c.out);
    std::ofstream js(std::filesystem::path(c.out) / "summary.json");
    js << "{\n  \"machine\": {\"cpu\":\"" << kten::cpu_model() << "\",\"ranks\":" << ranks
       << ",\"host_threads_per_rank\":" << kten::host_threads() << ",\"device\":\"" << c.device << "\",\"mpi\":\""
       << kten::dist::library_version().substr(0, kten::dist::library_version().find(',')) << "\",\"gpu_aware\":"
       << (kten::dist::gpu_aware() ? "true" : "false") << ",\"kokkos\":\"" << kten::kokkos_version() << "\",\"kten\":\""
       << kten::version() << "\",\"git\":\"" << KTEN_GIT_HASH << "\",\"quick\":" << (c.quick ? "true" : "false")
       << "},\n  \"ratios\": {\n    \"allreduce_vs_mpi\": " << ratio << ",\n    \"training_speedup_" << ranks
       << "_ranks\": " << parallel / alone << ",\n    \"data_parallel_efficiency\": " << efficiency
       << ",\n    \"data_parallel_efficiency_not_overlapped\": " << efficiency_after << "\n  },\n  \"targets\": {\n    \"allreduce_vs_mpi\": \">= 0.90\",\n"
       << "    \"training_speedup_" << ranks << "_ranks\": \"(informative; ideal " << ranks << ")\",\n"
       << "    \"data_parallel_efficiency\": \">= 0.95 on a quiet machine (ideal 1)\",\n"
       << "    \"data_parallel_efficiency_not_overlapped\": \"(informative; ideal 1)\"\n  },\n"
       << "  \"allreduce\": [";
    for (std::size_t i = 0; i < rows.size(); ++i)
      js << (i ? "," : "") << "\n    {\"bytes\":" << rows[i].bytes << ",\"kten_s\":" << rows[i].kten_s
         << ",\"mpi_s\":" << rows[i].mpi_s << "}";
    js << "\n  ],\n  \"training\": {\"global_batch\":" << global_batch << ",\"samples_per_sec_1_rank\":" << alone
       << ",\"samples_per_sec_1_rank_batch_" << per_rank << "\":" << alone_small << ",\"samples_per_sec_" << ranks
       << "_ranks\":" << parallel << ",\"samples_per_sec_" << ranks << "_ranks_not_overlapped\":" << after << "},\n  \"exercises\": {\"two_devices_with_ranks\":"
       << exercise << "}\n}\n";
    os << "\nallreduce_vs_mpi (largest size) " << std::fixed << std::setprecision(2) << ratio
       << "  (target >= 0.90)\nwritten to " << c.out << "/summary.json\n";
  }
  MPI_Comm_free(&raw);
  return 0;
}
