// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What kten-perf's families share: the run's options and what it measured, the timed loop, the
// ratio rows, and each family's entry points (registration, rows, exercises, report).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <kten/kten.hpp>

#include "perf_config.hpp"

namespace kten::perf {

/// \brief This run's options; main() sets them before anything is registered.
inline Config config;

// --- what the runs measured, by benchmark name ----------------------------------------------------

/// \brief One benchmark's time and work per iteration.
struct Measured {
  double seconds = 0;  // real time per iteration
  double items = 0;    // counters reported by the benchmark (flops or bytes per iteration)
};
/// \brief Each benchmark's fastest run, by the name it was registered with (kten_perf.cpp's
/// Recorder fills it).
inline std::map<std::string, Measured> results;

/// \brief The named benchmark's work per second; 0 when it did not run.
inline double rate(const std::string& name) {
  auto it = results.find(name);
  return it == results.end() || it->second.seconds <= 0 ? 0 : it->second.items / it->second.seconds;
}

/// \brief The named benchmark's seconds per iteration; 0 when it did not run.
inline double seconds(const std::string& name) { return results.count(name) ? results[name].seconds : 0.0; }

/// \brief a / b, or 0 (not measured) when either side is missing.
inline double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : 0.0; }

/// \brief The best rate of the named benchmarks, and which one it was.
inline std::pair<double, std::string> best_rate(const std::vector<std::string>& names) {
  std::pair<double, std::string> best{0.0, ""};
  for (const auto& name : names)
    if (rate(name) > best.first) best = {rate(name), name.substr(name.find('/') + 1)};
  return best;
}

/// \brief Times `body` with `work` (flops or bytes) per iteration; every timed body fences the
/// device before the clock is read.
template <class F>
void timed(benchmark::State& state, const Device& d, double work, F body) {
  body();  // warm-up: allocations, first-touch, lazy init
  kten::synchronize(d);
  for (auto _ : state) {
    body();
    kten::synchronize(d);
  }
  state.counters["work"] = work;
  state.counters["rate"] = benchmark::Counter(work * state.iterations(), benchmark::Counter::kIsRate);
}

/// \brief One line of the ratio table and of summary.json.
struct Row {
  std::string key, what, target;
  double value;  // 0: not measured
  bool against_limit = false;  // a ratio to the machine's memory limit: above kLimitSlack the baseline is wrong
  bool against_blas = false;   // a ratio to OpenBLAS on the host (or libtorch, whose GEMMs call it)
};

// --- kernels.cpp: GEMM, small-op latency, Linear vs GEMM, GPU launches and transfers -------------

/// \brief Starts OpenBLAS' `threads` threads with every online core allowed (kernels.cpp says why).
void give_openblas_every_core(int threads);
/// \brief kten's, the vendor BLAS' and (on the CPU) Eigen's n x n GEMMs: float32 at each size, then float64.
void register_gemm_sizes(const std::vector<std::int64_t>& sizes);
/// \brief Small-op latency on the CPU, against Kokkos' empty parallel_for and a plain loop.
void register_latency();
/// \brief Linear's forward (GEMM + bias) against the GEMM alone.
void register_linear();
/// \brief GPU only: launch latency and host-to-device transfers, against raw CUDA.
void register_gpu_rows();
/// \brief The GEMM rows: against the vendor's BLAS at each size, the 100 x 100 product, Eigen.
void add_gemm_rows(std::vector<Row>& rows, const std::vector<std::int64_t>& sizes);
/// \brief The CPU's latency rows, and Linear against its GEMM.
void add_latency_rows(std::vector<Row>& rows);
/// \brief The GPU's launch and transfer rows.
void add_gpu_rows(std::vector<Row>& rows);

// --- bandwidth.cpp: memory-bound operations against the machine's memory limits ------------------

/// \brief Elementwise ops, row ops and reductions, and the triad, copy and read they are held to.
void register_bandwidth();
/// \brief Pooling and resampling, forward + backward.
void register_pool_upsample();
/// \brief scatter_add and gather on a 1M-edge mesh graph.
void register_graph();
/// \brief The bandwidth rows (pooling and resampling included) against the limits measured.
void add_bandwidth_rows(std::vector<Row>& rows);
/// \brief The graph rows against the limits measured.
void add_graph_rows(std::vector<Row>& rows);

// --- models.cpp: a training step, the framework-peer workloads, ONNX, libtorch -------------------

/// \brief A 3-layer MLP's training step: autograd against a hand-written backward.
void register_training_step();
/// \brief kten's side of the framework-peer workloads (MLPs, activations, convolutions).
void register_peer_workloads();
/// \brief Imported ONNX models against the same models built from kten modules.
void register_onnx();
/// \brief The training step's row, and the convolutions' rows against kten's own GEMM.
void add_model_rows(std::vector<Row>& rows, const std::vector<std::int64_t>& sizes);
/// \brief The ONNX rows: imported / built from modules.
void add_onnx_rows(std::vector<Row>& rows);
/// \brief workloads.json under --out, for perf/pytorch_peer.py.
void write_peer_workloads();
#ifdef KTEN_PERF_LIBTORCH
/// \brief libtorch's side of the peer workloads, with OpenBLAS on every thread and on one.
void register_libtorch();
/// \brief The *_vs_libtorch rows: libtorch's time in its best OpenBLAS configuration / kten's time.
void add_libtorch_rows(std::vector<Row>& rows);
#endif

// --- exercises.cpp --------------------------------------------------------------------------------

/// \brief Runs the "GPUs" chapter's three exercises, printing to `os`; returns their JSON object.
std::string run_exercises(std::ostream& os);

// --- report.cpp: summary, CSV, JSON, plots, the machine -------------------------------------------

/// \brief The machine, its libraries and this build, as a JSON object.
std::string machine_json();
/// \brief The warning printed when OpenBLAS runs a kernel it was told to or one below the machine's
/// ISA; "" when neither.
std::string openblas_warning();
/// \brief summary.json, results.csv, the plots' data and plots.gp under --out, then gnuplot.
void write_outputs(const std::vector<Row>& rows, const std::vector<std::int64_t>& sizes,
                   const std::string& exercises_json);
/// \brief Prints the host, the ratio table, the suspect baselines, the OpenBLAS warning and the machine.
void print_summary(const std::vector<Row>& rows);

}  // namespace kten::perf
