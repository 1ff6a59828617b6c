// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf: kten's kernels side by side with the vendor libraries, Eigen and the machine's own
// memory limits, measured in one run, and the "GPUs" chapter's exercises. Writes under --out: perf.json (Google Benchmark), summary.json (one
// ratio per target), results.csv, gemm.png and bandwidth.png (gnuplot), and prints a table.
//
//   kten-perf [--quick] [--kten-device cpu|gpu] [--out DIR] [Google Benchmark flags]
//
// main() is here; the families are in kernels.cpp, bandwidth.cpp, models.cpp and exercises.cpp, the
// report in report.cpp, and what they share in perf_harness.hpp.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <kten/kten.hpp>

#include "perf_harness.hpp"

namespace kten::perf {
namespace {

/// Google Benchmark 1.8 replaced Run::error_occurred (Debian 12's 1.7) with Run::skipped.
template <class R, class = void>
struct HasSkipped : std::false_type {};
template <class R>
struct HasSkipped<R, std::void_t<decltype(std::declval<const R&>().skipped)>> : std::true_type {};
template <class R>
bool did_not_run(const R& run) {
  if constexpr (HasSkipped<R>::value) return static_cast<int>(run.skipped) != 0;
  else return run.error_occurred;
}

class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (did_not_run(run)) continue;
      // Each repetition is a run of its own; the fastest stands for the benchmark (below): on a
      // shared machine other load only ever slows a run down. The aggregates (mean, median,
      // stddev) are left to Google Benchmark's own output.
      if (run.run_type == Run::RT_Aggregate) continue;
      Measured m;
      m.seconds = run.GetAdjustedRealTime() * 1e-9;  // the time unit below is nanoseconds
      auto it = run.counters.find("work");
      if (it != run.counters.end()) m.items = it->second.value;
      // Manual-time benchmarks (the raw CUDA baselines) carry a "/manual_time" suffix: the rows
      // look them up by the name they were registered with.
      std::string name = run.benchmark_name();
      const std::string manual = "/manual_time";
      if (name.size() > manual.size() && name.compare(name.size() - manual.size(), manual.size(), manual) == 0)
        name.resize(name.size() - manual.size());
      // The fastest repetition, and of a benchmark registered more than once (the two sides of a
      // comparison taken in turns, register_onnx) the fastest of all its runs.
      const auto [kept, first] = results.try_emplace(name, m);
      if (!first && m.seconds < kept->second.seconds) kept->second = m;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace
}  // namespace kten::perf

int main(int argc, char* argv[]) try {  // a GPU build on a node without a usable GPU throws in the guard
  using namespace kten::perf;
  kten::ScopeGuard guard(argc, argv);
  std::vector<char*> args{argv[0]};
  std::vector<std::string> owned;
  config.device = kten::try_gpu();  // now that Kokkos is up
  for (int i = 1; i < argc; ++i)
    if (!kten::perf::parse_option(config, i, argc, argv)) args.push_back(argv[i]);
  kten::require_available(config.device);
  give_openblas_every_core(kten::host_threads());
  std::cout << openblas_warning();
  std::filesystem::create_directories(config.out);
  owned.push_back("--benchmark_out=" + (std::filesystem::path(config.out) / "perf.json").string());
  owned.push_back("--benchmark_out_format=json");
  // Shared machines are noisy: the full run keeps the fastest of three repetitions (Recorder).
  owned.push_back(config.quick ? "--benchmark_min_time=0.01" : "--benchmark_repetitions=3");
  // kten's defaults go first so that flags given on the command line override them.
  std::vector<char*> ordered{args[0]};
  for (auto& s : owned) ordered.push_back(s.data());
  ordered.insert(ordered.end(), args.begin() + 1, args.end());
  args = ordered;
  int bargc = static_cast<int>(args.size());
  benchmark::Initialize(&bargc, args.data());
  benchmark::AddCustomContext("kten_machine", machine_json());

  std::vector<std::int64_t> sizes =
      config.quick ? std::vector<std::int64_t>{100, 128} : std::vector<std::int64_t>{100, 128, 256, 512, 1024, 2048};
  if (!config.quick && config.device.is_gpu() && !kten::gpus_are_emulated()) sizes.push_back(4096);  // a GPU's size
  register_gemm_sizes(sizes);
  register_bandwidth();
  register_pool_upsample();  // pooling and resampling (issue 31 item 2)
  register_graph();  // graph ops
  register_linear();
  register_latency();
  register_training_step();
  register_gpu_rows();
  register_peer_workloads();
  register_onnx();  // kten::onnx (issue 32)
#ifdef KTEN_PERF_LIBTORCH
  register_libtorch();
#endif

  Recorder recorder;
  recorder.SetOutputStream(&std::cout);
  benchmark::RunSpecifiedBenchmarks(&recorder);

  const std::string exercises = run_exercises(std::cout);

  // One ratio per target row, measured in this run on this machine; the families add theirs in
  // turns, in the table's order.
  std::vector<Row> rows;
  add_gemm_rows(rows, sizes);
  add_bandwidth_rows(rows);
  add_latency_rows(rows);
  add_model_rows(rows, sizes);
  add_graph_rows(rows);
  add_onnx_rows(rows);
  add_gpu_rows(rows);
#ifdef KTEN_PERF_LIBTORCH
  add_libtorch_rows(rows);
#endif
  write_outputs(rows, sizes, exercises);
  write_peer_workloads();

  print_summary(rows);
  benchmark::Shutdown();
  return 0;
} catch (const kten::Error& e) {
  std::cerr << e.what() << '\n';
  return 1;
}
