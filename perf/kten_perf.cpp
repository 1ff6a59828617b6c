// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf: kten's kernels side by side with the vendor libraries, Eigen and the machine's own
// memory limits, measured in one run, and the "GPUs" chapter's exercises. Writes under --out: perf.json (Google Benchmark), summary.json (one
// ratio per target), results.csv, gemm.png and bandwidth.png (gnuplot), and prints a table.
//
//   kten-perf [--quick] [--kten-device cpu|gpu] [--out DIR] [Google Benchmark flags]
#include <benchmark/benchmark.h>
#include <cblas.h>
#ifdef __linux__
#include <sched.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>
#include <kten/kten.hpp>

#include "ops/conv.hpp"         // conv_multiply_adds: the arithmetic a convolution's paths do
#include "ops/elementwise.hpp"  // the hand-written step's kernels: fill, relu_grad
#include "ops/linalg.hpp"       // gemm
#include "optim/kernels.hpp"   // sgd_update

#include "baselines/host_baseline.hpp"
#include "baselines/libtorch.hpp"
#include "baselines/vendor_baseline.hpp"
#include "perf_config.hpp"
#include "git_hash.hpp"  // generated at build time

namespace {

using kten::Device;
using kten::Tensor;

kten::perf::Config config;

// --- what the runs measured, by benchmark name ----------------------------------------------------

struct Measured {
  double seconds = 0;  // real time per iteration
  double items = 0;    // counters reported by the benchmark (flops or bytes per iteration)
};
std::map<std::string, Measured> results;

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

// Every timed body fences the device before the clock is read.
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

// --- GEMM: kten vs OpenBLAS (cpu) or the GPU vendor's BLAS (cuBLAS, rocBLAS) ----------------------

/// OpenBLAS sizes its thread pool from the calling thread's CPU affinity, and its threads inherit
/// that affinity. Under OMP_PROC_BIND, libgomp binds the initial thread to one core before main()
/// runs, so OpenBLAS would start one thread, and put any more on that same core: half the machine
/// on two cores. Its threads are made with every online core allowed, then the binding is restored.
void give_openblas_every_core(int threads) {
#ifdef __linux__
  cpu_set_t bound, every;
  CPU_ZERO(&every);
  const bool known = sched_getaffinity(0, sizeof bound, &bound) == 0;
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(c, &every);
  if (known) sched_setaffinity(0, sizeof every, &every);
  openblas_set_num_threads(threads);
  if (known) sched_setaffinity(0, sizeof bound, &bound);
#else
  openblas_set_num_threads(threads);
#endif
}

template <class T>
void vendor_gemm(const Tensor& A, const Tensor& B, const Tensor& C, long n) {
  if (A.device().is_cpu()) {
    const T* a = static_cast<const T*>(A.data());
    const T* b = static_cast<const T*>(B.data());
    T* c = static_cast<T*>(C.data());
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a, n, b, n, 0.f, c, n);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
  } else {
    kten::perf::gpu_blas_gemm<T>(static_cast<const T*>(A.data()), static_cast<const T*>(B.data()),
                                  static_cast<T*>(C.data()), n, n, n);
  }
}

template <class T>
void register_gemm(std::int64_t n) {
  const Device d = config.device;
  const auto dtype = kten::dtype_of<T>();
  const std::string suffix = std::string(kten::dtype_name(dtype)) + "/" + std::to_string(n);
  const double flops = 2.0 * n * n * n;
  benchmark::RegisterBenchmark(("gemm/kten/" + suffix).c_str(), [=](benchmark::State& state) {
    auto A = kten::rand({n, n}, d, 1, dtype), B = kten::rand({n, n}, d, 2, dtype);
    timed(state, d, flops, [&] { kten::matmul(A, B); });
  });
  if (d.is_cpu() && std::is_same_v<T, float>) {
    benchmark::RegisterBenchmark(("gemm/eigen/" + suffix).c_str(), [=](benchmark::State& state) {
      auto A = kten::rand({n, n}, d, 1, dtype), B = kten::rand({n, n}, d, 2, dtype);
      auto C = kten::empty({n, n}, d, dtype);
      timed(state, d, flops, [&] {
        kten::perf::eigen_gemm<T>(static_cast<const T*>(A.data()), static_cast<const T*>(B.data()),
                                  static_cast<T*>(C.data()), n);
      });
    });
  }
  std::string why;
  if (d.is_gpu() && !kten::perf::gpu_blas_available(&why)) {
    std::cout << kten::perf::gpu_blas_name() << " baseline unavailable: " << why << '\n';
    return;
  }
  benchmark::RegisterBenchmark(("gemm/vendor/" + suffix).c_str(), [=](benchmark::State& state) {
    auto A = kten::rand({n, n}, d, 1, dtype), B = kten::rand({n, n}, d, 2, dtype);
    auto C = kten::empty({n, n}, d, dtype);
    timed(state, d, flops, [&] { vendor_gemm<T>(A, B, C, n); });
  });
}

// --- bandwidth: elementwise and reductions vs the machine's limits --------------------------------

// Each memory-bound operation is held to a baseline with its own access pattern: fma to a triad
// (three arrays read, one written), exp to a copy (one and one), sum and norm to a read. On the
// CPU these are plain OpenMP loops (host_baseline.hpp), the machine's physical limit with nothing
// in between; on a GPU they are Kokkos kernels on the device.
template <class Space>
struct DeviceBaselines {
  using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>;
  // Grid-stride loops over the GPU's resident threads, as a CUDA programmer writes STREAM (and as
  // kten's range kernels run): one index per thread is bound by Kokkos 3.4's block scheduling.
  static std::int64_t threads(std::int64_t n) { return std::min<std::int64_t>(n, Space().concurrency()); }
  static void triad(const float* a, const float* b, const float* c, float* d, std::int64_t n) {
    const std::int64_t t = threads(n);
    Kokkos::parallel_for("perf::triad", Policy(0, t), KOKKOS_LAMBDA(std::int64_t first) {
      for (std::int64_t i = first; i < n; i += t) d[i] = a[i] * b[i] + c[i];
    });
  }
  static void copy(const float* a, float* b, std::int64_t n) {
    const std::int64_t t = threads(n);
    Kokkos::parallel_for("perf::copy", Policy(0, t), KOKKOS_LAMBDA(std::int64_t first) {
      for (std::int64_t i = first; i < n; i += t) b[i] = a[i];
    });
  }
  static float read(const float* a, std::int64_t n) {
    float s = 0;
    Kokkos::parallel_reduce("perf::read", Policy(0, n), KOKKOS_LAMBDA(std::int64_t i, float& acc) { acc += a[i]; }, s);
    return s;
  }
};

bool host_memory(const Device& d) { return d.is_cpu() || kten::gpus_are_emulated(); }

const float* f32(const Tensor& t) { return static_cast<const float*>(t.data()); }
float* f32_out(const Tensor& t) { return static_cast<float*>(t.data()); }

void register_bandwidth() {
  const Device d = config.device;
  const std::int64_t n = config.quick ? (1 << 20) : (1 << 26);
  const double bytes = 4.0 * n;
  benchmark::RegisterBenchmark("bandwidth/triad", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1), b = kten::rand({n}, d, 2), c = kten::rand({n}, d, 3), out = kten::empty({n}, d);
    timed(state, d, 4 * bytes, [&] {
      if (host_memory(d)) kten::perf::omp_triad(f32(a), f32(b), f32(c), f32_out(out), n);
      else DeviceBaselines<Kokkos::DefaultExecutionSpace>::triad(f32(a), f32(b), f32(c), f32_out(out), n);
    });
  });
  benchmark::RegisterBenchmark("bandwidth/copy", [=](benchmark::State& state) {
    auto src = kten::rand({n}, d, 1), dst = kten::empty({n}, d);
    timed(state, d, 2 * bytes, [&] {
      if (host_memory(d)) kten::perf::omp_copy(f32(src), f32_out(dst), n);
      else DeviceBaselines<Kokkos::DefaultExecutionSpace>::copy(f32(src), f32_out(dst), n);
    });
  });
  if (host_memory(d)) {
    // The same loops with other stores: a baseline is the best of its variants (STREAM's sense of
    // the machine's limit), whichever this CPU and compiler favour.
    benchmark::RegisterBenchmark("bandwidth/triad_streaming", [=](benchmark::State& state) {
      auto a = kten::rand({n}, d, 1), b = kten::rand({n}, d, 2), c = kten::rand({n}, d, 3), out = kten::empty({n}, d);
      timed(state, d, 4 * bytes, [&] { kten::perf::omp_triad_streaming(f32(a), f32(b), f32(c), f32_out(out), n); });
    });
    benchmark::RegisterBenchmark("bandwidth/copy_streaming", [=](benchmark::State& state) {
      auto src = kten::rand({n}, d, 1), dst = kten::empty({n}, d);
      timed(state, d, 2 * bytes, [&] { kten::perf::omp_copy_streaming(f32(src), f32_out(dst), n); });
    });
    benchmark::RegisterBenchmark("bandwidth/copy_memcpy", [=](benchmark::State& state) {
      auto src = kten::rand({n}, d, 1), dst = kten::empty({n}, d);
      timed(state, d, 2 * bytes, [&] { kten::perf::omp_copy_memcpy(f32(src), f32_out(dst), n); });
    });
  }
  benchmark::RegisterBenchmark("bandwidth/read", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1);
    timed(state, d, bytes, [&] {
      benchmark::DoNotOptimize(host_memory(d) ? kten::perf::omp_read(f32(a), n)
                                              : DeviceBaselines<Kokkos::DefaultExecutionSpace>::read(f32(a), n));
    });
  });
  benchmark::RegisterBenchmark("bandwidth/deep_copy", [=](benchmark::State& state) {
    // Kokkos::deep_copy between two Views of the device (memcpy / cudaMemcpy underneath).
    auto src = kten::rand({n}, d, 1), dst = kten::empty({n}, d);
    timed(state, d, 2 * bytes, [&] { dst.copy_from(src); });
  });
  benchmark::RegisterBenchmark("bandwidth/fma", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1), b = kten::rand({n}, d, 2), c = kten::rand({n}, d, 3);
    timed(state, d, 4 * bytes, [&] { kten::fma(a, b, c); });
  });
  benchmark::RegisterBenchmark("bandwidth/a*b+c", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1), b = kten::rand({n}, d, 2), c = kten::rand({n}, d, 3);
    timed(state, d, 4 * bytes, [&] { a * b + c; });  // useful bytes; it moves 6n floats
  });
  benchmark::RegisterBenchmark("bandwidth/exp", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1);
    timed(state, d, 2 * bytes, [&] { kten::exp(a); });
  });
  // Row operations over rows of 1024 floats, and an activation, forward and forward + backward.
  // Their work is the least traffic there is: the forward reads x and writes y (2n floats); the
  // backward reads its saved tensor and the gradient and writes dx (3n more). LayerNorm's weight
  // and bias gradients come from the same pass on the host (a GPU reads x and g once more, not
  // counted).
  // Each op is made inside its benchmark (LayerNorm's parameters must not outlive Kokkos).
  using Op = std::function<Tensor(const Tensor&)>;
  const std::int64_t cols = 1024, rows = n / cols;
  const auto forward = [=](const char* name, std::function<Op()> make) {
    benchmark::RegisterBenchmark(name, [=](benchmark::State& state) {
      const Op f = make();
      auto x = kten::rand({rows, cols}, d, 1);
      timed(state, d, 2 * bytes, [&] { f(x); });
    });
  };
  const auto forward_backward = [=](const char* name, std::function<Op()> make) {
    benchmark::RegisterBenchmark(name, [=](benchmark::State& state) {
      const Op f = make();
      auto x = kten::rand({rows, cols}, d, 1), g = kten::rand({rows, cols}, d, 2);
      x.requires_grad_();
      timed(state, d, 5 * bytes, [&] {
        x.set_grad(Tensor());
        f(x).backward(g);
      });
    });
  };
  const auto gelu = [] { return Op([](const Tensor& x) { return kten::gelu(x); }); };
  const auto softmax = [] { return Op([](const Tensor& x) { return kten::softmax(x, 1); }); };
  const auto layer_norm = [=] {
    auto norm = std::make_shared<kten::nn::LayerNorm>(cols);
    norm->to(d);
    return Op([norm](const Tensor& x) { return (*norm)(x); });
  };
  forward("bandwidth/gelu", gelu);
  forward_backward("bandwidth/gelu_fwd_bwd", gelu);
  forward("bandwidth/softmax", softmax);
  forward_backward("bandwidth/softmax_fwd_bwd", softmax);
  forward("bandwidth/layernorm", layer_norm);
  forward_backward("bandwidth/layernorm_fwd_bwd", layer_norm);
  // --- issue 31 (normalisation): BatchNorm2d in training mode, forward + backward of an
  // 8x32x64x64 batch (quick: 2x8x32x32), counted as LayerNorm's: x read and y written, then x and
  // the gradient read and dx written (the weight's and bias' gradients and the running statistics
  // come from the same passes).
  benchmark::RegisterBenchmark("bandwidth/batchnorm2d_fwd_bwd", [=](benchmark::State& state) {
    const kten::Shape shape = config.quick ? kten::Shape{2, 8, 32, 32} : kten::Shape{8, 32, 64, 64};
    kten::nn::BatchNorm2d norm(shape[1]);
    norm.to(d);
    auto x = kten::rand(shape, d, 1), g = kten::rand(shape, d, 2);
    x.requires_grad_();
    timed(state, d, 5 * 4.0 * static_cast<double>(x.numel()), [&] {
      x.set_grad(Tensor());
      norm(x).backward(g);
    });
  });
  benchmark::RegisterBenchmark("bandwidth/sum", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1);
    timed(state, d, bytes, [&] { kten::sum(a); });
  });
  benchmark::RegisterBenchmark("bandwidth/norm", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1);
    timed(state, d, bytes, [&] { kten::norm(a); });
  });
  benchmark::RegisterBenchmark("bandwidth/max", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1);
    timed(state, d, bytes, [&] { kten::max(a); });
  });
  // Along an axis: the columns (axis 0, a bias gradient's fold) and logsumexp over rows of 1024
  // (an exp per element, as softmax, but one read and a write of one number per row).
  benchmark::RegisterBenchmark("bandwidth/sum_axis0", [=](benchmark::State& state) {
    auto x = kten::rand({rows, cols}, d, 1);
    timed(state, d, bytes, [&] { kten::sum(x, 0); });
  });
  benchmark::RegisterBenchmark("bandwidth/logsumexp", [=](benchmark::State& state) {
    auto x = kten::rand({rows, cols}, d, 1);
    timed(state, d, bytes, [&] { kten::logsumexp(x, 1); });
  });
  if (!d.is_cpu()) return;
  // Eigen, the library a C++ user would otherwise write this with (coefficient-wise: one thread).
  benchmark::RegisterBenchmark("bandwidth/eigen_fma", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1), b = kten::rand({n}, d, 2), c = kten::rand({n}, d, 3), out = kten::empty({n}, d);
    timed(state, d, 4 * bytes, [&] { kten::perf::eigen_fma(f32(a), f32(b), f32(c), f32_out(out), n); });
  });
  benchmark::RegisterBenchmark("bandwidth/eigen_exp", [=](benchmark::State& state) {
    auto a = kten::rand({n}, d, 1), out = kten::empty({n}, d);
    timed(state, d, 2 * bytes, [&] { kten::perf::eigen_exp(f32(a), f32_out(out), n); });
  });
}

// --- Pooling and resampling (issue 31 item 2) ---------------------------------------------------
// A U-Net's downsampling and upsampling, forward + backward, counted as their least traffic: the
// forward reads x and writes y, the backward reads y's gradient and writes x's (max pooling's arg
// max, an int64 per output written forward and read backward, is not counted), against a copy.

void register_pool_upsample() {
  const Device d = config.device;
  const auto fwd_bwd = [=](const char* name, kten::Shape in, std::function<Tensor(const Tensor&)> f) {
    benchmark::RegisterBenchmark(name, [=](benchmark::State& state) {
      auto x = kten::rand(in, d, 1);
      const kten::Shape out = f(x).shape();
      auto g = kten::rand(out, d, 2);
      x.requires_grad_();
      timed(state, d, 2.0 * 4.0 * static_cast<double>(x.numel() + g.numel()), [&] {
        x.set_grad(Tensor());
        f(x).backward(g);
      });
    });
  };
  using kten::nn::InterpolateMode;
  fwd_bwd("pool/max2d_fwd_bwd", {8, 32, 64, 64}, [](const Tensor& x) { return kten::max_pool2d(x, {2}); });
  fwd_bwd("pool/avg2d_fwd_bwd", {8, 32, 64, 64}, [](const Tensor& x) { return kten::avg_pool2d(x, {2}); });
  fwd_bwd("upsample/bilinear2x_fwd_bwd", {8, 32, 32, 32},
          [](const Tensor& x) { return kten::interpolate(x, std::vector<double>{2.0}, InterpolateMode::bilinear); });
  fwd_bwd("upsample/nearest2x_fwd_bwd", {8, 32, 32, 32},
          [](const Tensor& x) { return kten::interpolate(x, std::vector<double>{2.0}, InterpolateMode::nearest); });
}

// --- graph ops: scatter_add and gather on a mesh ---------------------------------------------------
// A message-passing layer's two memory-bound halves on a 1M-edge mesh graph: a periodic 512 x 512
// grid (262,144 nodes, 4 edges into each, 1,048,576 edges, listed by source node as mesh codes
// list them) with 64 float32 features per node. gather(x, 0, src) reads the nodes' features into
// the edges; scatter_add(x, 0, dst, messages) adds the edges' messages into their destination
// nodes, including its segmentation of dst (a counting sort into CSR form: no cache, every call
// sorts). Work: the least bytes each must move (the edge and node features once, the index once).
void register_graph() {
  const Device d = config.device;
  const std::int64_t side = config.quick ? 128 : 512, nodes = side * side, edges = 4 * nodes, features = 64;
  std::vector<std::int64_t> src(edges), dst(edges);
  for (std::int64_t node = 0; node < nodes; ++node) {
    const std::int64_t r = node / side, c = node % side;
    const std::int64_t neighbours[4] = {((r + side - 1) % side) * side + c, ((r + 1) % side) * side + c,
                                        r * side + (c + side - 1) % side, r * side + (c + 1) % side};
    for (int k = 0; k < 4; ++k) {
      src[4 * node + k] = node;
      dst[4 * node + k] = neighbours[k];
    }
  }
  const double node_bytes = 4.0 * nodes * features, edge_bytes = 4.0 * edges * features, index_bytes = 8.0 * edges;
  benchmark::RegisterBenchmark("graph/scatter_add", [=](benchmark::State& state) {
    const Tensor x = kten::rand({nodes, features}, d, 1), messages = kten::rand({edges, features}, d, 2);
    const Tensor index = kten::tensor(dst, d).reshape({edges, 1}).expand({edges, features});
    timed(state, d, edge_bytes + 2 * node_bytes + index_bytes, [&] { kten::scatter_add(x, 0, index, messages); });
  });
  benchmark::RegisterBenchmark("graph/gather", [=](benchmark::State& state) {
    const Tensor x = kten::rand({nodes, features}, d, 1);
    const Tensor index = kten::tensor(src, d).reshape({edges, 1}).expand({edges, features});
    timed(state, d, node_bytes + edge_bytes + index_bytes, [&] { kten::gather(x, 0, index); });
  });
}

// --- small-operation latency on the CPU --------------------------------------------------------------

/// \brief Kokkos' floor: an empty parallel_for over the host execution space (an OpenMP fork-join).
struct EmptyKernel {
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {}
};

void register_latency() {
  const Device d = config.device;
  if (!d.is_cpu()) return;  // GPUs have their launch rows
  constexpr std::int64_t n = 1024;
  benchmark::RegisterBenchmark("latency/empty_parallel_for", [=](benchmark::State& state) {
    using Policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    timed(state, d, 1, [&] { Kokkos::parallel_for("perf::empty", Policy(0, n), EmptyKernel{}); });
  });
  benchmark::RegisterBenchmark("latency/plain_loop", [=](benchmark::State& state) {
    std::vector<float> x(n, 1.f), y(n, 2.f), z(n);
    timed(state, d, 1, [&] { kten::perf::plain_add(x.data(), y.data(), z.data(), n); });
  });
  benchmark::RegisterBenchmark("latency/kten_add", [=](benchmark::State& state) {
    auto x = kten::rand({n}, d, 1), y = kten::rand({n}, d, 2);
    timed(state, d, 1, [&] { x + y; });  // allocation, checks, dispatch and the kernel
  });
  // The smallest op: what autograd's "does anything require grad?" check may cost when nothing does.
  benchmark::RegisterBenchmark("latency/kten_add64", [=](benchmark::State& state) {
    auto x = kten::rand({64}, d, 1), y = kten::rand({64}, d, 2);
    timed(state, d, 1, [&] { x + y; });
  });
}

// --- a training step: autograd vs the hand-written backward kten had before it ------------------------

/// \brief A 3-layer MLP (in -> h -> ReLU -> h -> ReLU -> out) trained with MSE and SGD, stepped
/// the way kten's layers did before autograd: forward GEMMs X W^T with the (out, in) weights read
/// transposed in place and the bias in the epilogue, then a hand-written backward (dW = dY^T X
/// accumulated inside the GEMM, db by a column sum, dX = dY W, relu's gradient), nothing recorded.
/// The reference the autograd step is held to.
struct HandWrittenMlp {
  std::vector<Tensor> W, b, gW, gb;
  HandWrittenMlp(kten::nn::Sequential& model) {
    for (auto& [name, p] : model.named_parameters()) {
      const bool weight = name.find("weight") != std::string::npos;
      (weight ? W : b).push_back(p->value.detach().copyto(p->value.device()));
      (weight ? gW : gb).push_back(kten::zeros(p->value.shape(), p->value.device()));
    }
  }
  void step(const Tensor& X, const Tensor& Y, float lr) {
    kten::NoGradGuard no_grad;
    for (std::size_t l = 0; l < W.size(); ++l) {
      kten::detail::fill(gW[l], 0.0);
      kten::detail::fill(gb[l], 0.0);
    }
    std::vector<Tensor> inputs{X}, pre;
    for (std::size_t l = 0; l < W.size(); ++l) {
      Tensor z = kten::empty({X.shape()[0], W[l].shape()[0]}, X.device());
      kten::detail::gemm(inputs.back(), false, W[l], true, z, &b[l], false);
      pre.push_back(z);
      if (l + 1 < W.size()) inputs.push_back(kten::relu(z));
    }
    Tensor g = (pre.back() - Y) * (2.0 / static_cast<double>(Y.numel()));  // MSELoss' gradient
    for (std::size_t l = W.size(); l-- > 0;) {
      if (l + 1 < W.size()) g = kten::detail::relu_grad(pre[l], g);
      kten::detail::gemm(g, true, inputs[l], false, gW[l], nullptr, true);
      gb[l] = gb[l] + kten::sum(g, 0);
      Tensor gx = kten::empty(inputs[l].shape(), X.device());
      kten::detail::gemm(g, false, W[l], false, gx, nullptr, false);
      g = gx;
    }
    for (std::size_t l = 0; l < W.size(); ++l) {
      kten::detail::sgd_update(W[l], gW[l], Tensor(), {lr, 0, 0, 0, false, false});
      kten::detail::sgd_update(b[l], gb[l], Tensor(), {lr, 0, 0, 0, false, false});
    }
  }
};

void register_training_step() {
  const Device d = config.device;
  const std::int64_t batch = config.quick ? 64 : 256, in = 64, hidden = config.quick ? 64 : 256, out = 8;
  auto make_model = [=] {
    kten::nn::Sequential m;
    m.add(kten::nn::Linear(in, hidden, {true, kten::float32, 1}));
    m.add(kten::nn::ReLU());
    m.add(kten::nn::Linear(hidden, hidden, {true, kten::float32, 2}));
    m.add(kten::nn::ReLU());
    m.add(kten::nn::Linear(hidden, out, {true, kten::float32, 3}));
    m.to(d);
    return m;
  };
  const double flops = 3 * 2.0 * batch * (in * hidden + hidden * hidden + hidden * out);
  benchmark::RegisterBenchmark("train/mlp_autograd", [=](benchmark::State& state) {
    auto model = make_model();
    kten::optim::SGD sgd(0.01f);
    kten::nn::MSELoss mse;
    auto X = kten::rand({batch, in}, d, 4), Y = kten::rand({batch, out}, d, 5);
    timed(state, d, flops, [&] {
      sgd.zero_grad(model);
      mse(model(X), Y).backward();
      sgd.step(model);
    });
  });
  benchmark::RegisterBenchmark("train/mlp_handwritten", [=](benchmark::State& state) {
    auto model = make_model();
    HandWrittenMlp mlp(model);
    auto X = kten::rand({batch, in}, d, 4), Y = kten::rand({batch, out}, d, 5);
    timed(state, d, flops, [&] { mlp.step(X, Y, 0.01f); });
  });
}

/// \brief One line of the ratio table and of summary.json.
struct Row {
  std::string key, what, target;
  double value;  // 0: not measured
  bool against_limit = false;  // a ratio to the machine's memory limit: above kLimitSlack the baseline is wrong
  bool against_blas = false;   // a ratio to OpenBLAS on the host (or libtorch, whose GEMMs call it)
};

// --- kten against a framework peer: the same workloads (baselines/libtorch.hpp) -------------------
// kten's side runs on every device and its times go to workloads.json with each workload's shape,
// which perf/pytorch_peer.py reads to run the same workloads in PyTorch on the same GPU. Host-only
// builds with libtorch also run libtorch's side here, on the same threads, in the same run.

/// \brief One peer workload: its row, its shape for the Python peer, and kten's closure (made
/// inside its benchmark); libtorch's closure where libtorch is built in.
struct PeerWorkload {
  std::string name, what, target;
  std::string shape_json;  // {"kind": ..., and the sizes}: what perf/pytorch_peer.py runs
  std::function<std::function<void()>()> kten;
#ifdef KTEN_PERF_LIBTORCH
  std::function<std::function<void()>()> libtorch;
#endif
};

kten::nn::Sequential kten_mlp(const kten::perf::MlpShape& s) {
  kten::nn::Sequential m;
  m.add(kten::nn::Linear(s.in, s.hidden, {true, kten::float32, 1}));
  m.add(kten::nn::ReLU());
  m.add(kten::nn::Linear(s.hidden, s.hidden, {true, kten::float32, 2}));
  m.add(kten::nn::ReLU());
  m.add(kten::nn::Linear(s.hidden, s.out, {true, kten::float32, 3}));
  m.to(config.device);
  return m;
}

// Forward and backward of `f` to a fresh gradient of x each call, as the peers' side does.
template <class F>
std::function<void()> kten_forward_backward(std::int64_t rows, std::int64_t cols, F f) {
  const Device d = config.device;
  auto x = kten::rand({rows, cols}, d, 1), g = kten::rand({rows, cols}, d, 2);
  x.requires_grad_();
  return [=]() mutable {
    x.set_grad(Tensor());
    f(x).backward(g);
  };
}

std::string mlp_json(const char* kind, const kten::perf::MlpShape& s, std::int64_t batch, const std::string& opt) {
  std::ostringstream os;
  os << "{\"kind\":\"" << kind << "\",\"in\":" << s.in << ",\"hidden\":" << s.hidden << ",\"out\":" << s.out
     << ",\"batch\":" << batch << (opt.empty() ? "" : ",\"optimizer\":\"" + opt + "\"") << "}";
  return os.str();
}

std::string rows_json(const char* kind, std::int64_t rows, std::int64_t cols) {
  return std::string("{\"kind\":\"") + kind + "\",\"rows\":" + std::to_string(rows) + ",\"cols\":" + std::to_string(cols) + "}";
}

// --- Convolutions (issue 31) ---
std::string conv_json(const kten::perf::ConvShape& c) {
  std::string spatial;
  for (std::int64_t e : c.spatial) spatial += (spatial.empty() ? "" : ",") + std::to_string(e);
  return "{\"kind\":\"conv\",\"batch\":" + std::to_string(c.batch) + ",\"channels\":" + std::to_string(c.channels) +
         ",\"spatial\":[" + spatial + "],\"kernel\":" + std::to_string(c.kernel) + "}";
}
// conv2d / conv3d forward and backward to x, the weight and the bias, a fresh gradient each call.
std::function<void()> kten_conv_forward_backward(const kten::perf::ConvShape& c) {
  const Device d = config.device;
  kten::Shape x_shape{c.batch, c.channels}, w_shape{c.channels, c.channels};
  for (std::int64_t e : c.spatial) x_shape.push_back(e), w_shape.push_back(c.kernel);
  auto x = kten::rand(x_shape, d, 1), w = kten::rand(w_shape, d, 2), b = kten::rand({c.channels}, d, 3), g = kten::rand(x_shape, d, 4);
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  const std::int64_t pad = c.kernel / 2;
  return [=]() mutable {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    (c.spatial.size() == 2 ? kten::conv2d(x, w, b, {1}, {pad}) : kten::conv3d(x, w, b, {1}, {pad})).backward(g);
  };
}

// LIBTORCH(f) is libtorch's closure f where libtorch is built in, and nothing elsewhere.
#ifdef KTEN_PERF_LIBTORCH
#define LIBTORCH(f) , f
#else
#define LIBTORCH(f)
#endif

std::vector<PeerWorkload> peer_workloads() {
#ifdef KTEN_PERF_LIBTORCH
  namespace lt = kten::perf::libtorch;
#endif
  using kten::perf::MlpShape;
  using kten::perf::Optimizer;
  std::vector<PeerWorkload> w;
  const auto shapes = kten::perf::mlp_shapes(config.quick);
  for (const MlpShape& s : shapes)
    for (Optimizer o : {Optimizer::sgd, Optimizer::adam}) {
      const std::string opt = o == Optimizer::sgd ? "sgd" : "adam";
      w.push_back({"mlp_" + opt + "_step_" + s.name,
                   "MLP " + std::to_string(s.in) + "-" + std::to_string(s.hidden) + "-" + std::to_string(s.hidden) + "-" +
                       std::to_string(s.out) + ", batch " + std::to_string(s.batch) + ", " + opt + " training step",
                   s.name == "tiny" ? ">= 1.5" : ">= 1.0", mlp_json("mlp_step", s, s.batch, opt),
                   [=] {
                     auto model = std::make_shared<kten::nn::Sequential>(kten_mlp(s));
                     std::shared_ptr<kten::optim::Optimizer> optimizer;
                     if (o == Optimizer::sgd) optimizer = std::make_shared<kten::optim::SGD>(0.01);
                     else optimizer = std::make_shared<kten::optim::Adam>(1e-3);
                     auto X = kten::rand({s.batch, s.in}, config.device, 4), Y = kten::rand({s.batch, s.out}, config.device, 5);
                     return std::function<void()>([=] {
                       optimizer->zero_grad(*model);
                       kten::nn::MSELoss()((*model)(X), Y).backward();
                       optimizer->step(*model);
                     });
                   } LIBTORCH([=] { return lt::mlp_step(s, o); })});
    }
  const MlpShape& medium = shapes[1];
  for (std::int64_t batch : {std::int64_t(1), std::int64_t(4096)})
    w.push_back({"inference_batch" + std::to_string(batch),
                 "medium MLP forward, batch " + std::to_string(batch) + ", NoGradGuard / InferenceMode",
                 batch == 1 ? ">= 1.5" : ">= 1.0", mlp_json("mlp_inference", medium, batch, ""),
                 [=] {
                   auto model = std::make_shared<kten::nn::Sequential>(kten_mlp(medium));
                   auto X = kten::rand({batch, medium.in}, config.device, 4);
                   return std::function<void()>([=] {
                     kten::NoGradGuard no_grad;
                     (*model)(X);
                   });
                 } LIBTORCH([=] { return lt::mlp_inference(medium, batch); })});
  w.push_back({"op1024_latency", "a 1024-element add, nothing requiring grad", ">= 1.5", "{\"kind\":\"add\",\"n\":1024}",
               [] {
                 auto x = kten::rand({1024}, config.device, 1), y = kten::rand({1024}, config.device, 2);
                 return std::function<void()>([=] { x + y; });
               } LIBTORCH([] { return lt::add(1024); })});
  const std::int64_t rows = kten::perf::activation_rows(config.quick), cols = kten::perf::activation_cols(config.quick);
  const std::string size = std::to_string(rows) + " x " + std::to_string(cols);
  w.push_back({"softmax", "softmax over rows of " + size + ", forward + backward", ">= 1.0",
               rows_json("softmax", rows, cols),
               [=] { return kten_forward_backward(rows, cols, [](const Tensor& x) { return kten::softmax(x, 1); }); }
               LIBTORCH([=] { return lt::softmax_forward_backward(rows, cols); })});
  w.push_back({"layernorm", "LayerNorm over rows of " + size + ", forward + backward", ">= 1.0",
               rows_json("layernorm", rows, cols),
               [=] {
                 auto norm = std::make_shared<kten::nn::LayerNorm>(cols);
                 norm->to(config.device);
                 return kten_forward_backward(rows, cols, [norm](const Tensor& x) { return (*norm)(x); });
               } LIBTORCH([=] { return lt::layer_norm_forward_backward(rows, cols); })});
  w.push_back({"gelu", "exact GELU of " + size + ", forward + backward", ">= 1.0", rows_json("gelu", rows, cols),
               [=] { return kten_forward_backward(rows, cols, [](const Tensor& x) { return kten::gelu(x); }); }
               LIBTORCH([=] { return lt::gelu_forward_backward(rows, cols); })});
  // --- Convolutions (issue 31): forward and backward to x, the weight and the bias ---
  for (const kten::perf::ConvShape& c : kten::perf::conv_shapes(config.quick))
    w.push_back({c.name, c.name + ", padding " + std::to_string(c.kernel / 2) + ", forward + backward", ">= 1.5", conv_json(c),
                 [=] { return kten_conv_forward_backward(c); } LIBTORCH([=] { return lt::conv_forward_backward(c); })});
  return w;
}
#undef LIBTORCH

// --- ONNX (kten::onnx, issue 32): an imported model against the same model built from modules ----
// A small U-Net of the in-situ kind (circular 3x3 convolutions, BatchNorm, max pooling, bilinear
// upsampling, a skip through cat), for the imported grid model's rows.
class PerfUNet : public kten::nn::Module {
 public:
  explicit PerfUNet(std::int64_t ch) {
    kten::nn::ConvOptions same;
    same.padding = {1};
    same.padding_mode = kten::nn::PaddingMode::circular;
    kten::nn::UpsampleOptions twice;
    twice.scale_factor = {2.0, 2.0};
    twice.mode = kten::nn::InterpolateMode::bilinear;
    enc1_ = register_module("enc1", kten::nn::Conv2d(4, ch, {3, 3}, same));
    norm1_ = register_module("norm1", kten::nn::BatchNorm2d(ch));
    pool_ = register_module("pool", kten::nn::MaxPool2d({2}));
    enc2_ = register_module("enc2", kten::nn::Conv2d(ch, 2 * ch, {3, 3}, same));
    norm2_ = register_module("norm2", kten::nn::BatchNorm2d(2 * ch));
    up_ = register_module("up", kten::nn::Upsample(twice));
    dec_ = register_module("dec", kten::nn::Conv2d(3 * ch, ch, {3, 3}, same));
    head_ = register_module("head", kten::nn::Conv2d(ch, 4, {1, 1}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor e1 = kten::relu((*norm1_)((*enc1_)(x)));
    const Tensor e2 = kten::relu((*norm2_)((*enc2_)((*pool_)(e1))));
    return (*head_)(kten::relu((*dec_)(kten::cat({(*up_)(e2), e1}, 1))));
  }
  std::string name() const override { return "PerfUNet"; }

 private:
  std::shared_ptr<kten::nn::Conv2d> enc1_, enc2_, dec_, head_;
  std::shared_ptr<kten::nn::BatchNorm2d> norm1_, norm2_;
  std::shared_ptr<kten::nn::MaxPool2d> pool_;
  std::shared_ptr<kten::nn::Upsample> up_;
};

// Each model written by kten::onnx::save (traced) and read back by load(), beside the model itself:
// the medium MLP (an Adam step, forward passes of batch 1 and 4096) and the U-Net (an Adam step in
// training mode, a forward pass in evaluation mode) on 8 x 4 x 64 x 64 fields (2 x 4 x 32 x 32 quick).
void register_onnx() {
  if (!kten::onnx::available()) return;
  const kten::perf::MlpShape s = kten::perf::mlp_shapes(config.quick)[1];
  const std::int64_t grid = config.quick ? 32 : 64, fields = config.quick ? 2 : 8;
  // `module` itself, or its traced export read back (on config.device, in the module's mode).
  const auto model_of = [](std::shared_ptr<kten::nn::Module> module, const Tensor& example,
                           bool imported) -> std::shared_ptr<kten::nn::Module> {
    module->to(config.device);
    if (!imported) return module;
    const auto path = std::filesystem::temp_directory_path() / ("kten-perf-" + std::to_string(getpid()) + ".onnx");
    kten::onnx::save(path.string(), *module, {example});
    auto net = std::make_shared<kten::onnx::Model>(kten::onnx::load(path.string(), config.device));
    std::filesystem::remove(path);
    net->train(module->is_training());
    return net;
  };
  const auto mlp = [=](bool imported) {
    return model_of(std::make_shared<kten::nn::Sequential>(kten_mlp(s)), kten::zeros({1, s.in}, config.device), imported);
  };
  const auto unet = [=](bool imported, bool training) {
    auto module = std::make_shared<PerfUNet>(16);
    module->train(training);
    return model_of(module, kten::rand({2, 4, grid, grid}, config.device, 3), imported);
  };
  // An Adam step of `model` on (X, Y).
  const auto train_step = [](const std::shared_ptr<kten::nn::Module>& model, const Tensor& X, const Tensor& Y,
                             benchmark::State& state) {
    kten::optim::Adam adam(1e-3);
    timed(state, config.device, 1, [&] {
      adam.zero_grad(*model);
      kten::nn::MSELoss()((*model)(X), Y).backward();
      adam.step(*model);
    });
  };
  const auto inference = [](const std::shared_ptr<kten::nn::Module>& model, const Tensor& X, benchmark::State& state) {
    timed(state, config.device, 1, [&] {
      kten::NoGradGuard no_grad;
      (*model)(X);
    });
  };
  // The two sides of each row in turns, three rounds (one quick), each side's fastest round kept:
  // run one after the other, the imported MLP's step was 1.54 of the module's in one process and
  // 0.96-1.10 in alternate processes, where the module's own step varied 1.8x from one process to
  // the next (docs/performance.md).
  for (int round = 0; round < (config.quick ? 1 : 3); ++round) {
    for (bool imported : {false, true}) {
      const std::string kind = imported ? "onnx" : "modules";
      benchmark::RegisterBenchmark(("onnx/mlp_step_" + kind).c_str(), [=](benchmark::State& state) {
        train_step(mlp(imported), kten::rand({s.batch, s.in}, config.device, 4), kten::rand({s.batch, s.out}, config.device, 5), state);
      });
      for (std::int64_t batch : {std::int64_t(1), std::int64_t(4096)})
        benchmark::RegisterBenchmark(("onnx/mlp_inference" + std::to_string(batch) + "_" + kind).c_str(),
                                     [=](benchmark::State& state) {
                                       inference(mlp(imported), kten::rand({batch, s.in}, config.device, 4), state);
                                     });
      benchmark::RegisterBenchmark(("onnx/unet_step_" + kind).c_str(), [=](benchmark::State& state) {
        train_step(unet(imported, true), kten::rand({fields, 4, grid, grid}, config.device, 4),
                   kten::rand({fields, 4, grid, grid}, config.device, 5), state);
      });
      benchmark::RegisterBenchmark(("onnx/unet_inference_" + kind).c_str(), [=](benchmark::State& state) {
        inference(unet(imported, false), kten::rand({fields, 4, grid, grid}, config.device, 4), state);
      });
    }
  }
}

void register_peer_workloads() {
  for (const auto& w : peer_workloads())
    benchmark::RegisterBenchmark(("peer/" + w.name + "/kten").c_str(), [w](benchmark::State& state) {
      timed(state, config.device, 1, w.kten());
    });
}

/// \brief workloads.json: each peer workload's shape, row, target and kten's seconds, for
/// perf/pytorch_peer.py.
void write_peer_workloads() {
  std::ofstream js(std::filesystem::path(config.out) / "workloads.json");
  js << "{\"device\":\"" << config.device << "\",\"quick\":" << (config.quick ? "true" : "false") << ",\"workloads\":[";
  bool first = true;
  for (const auto& w : peer_workloads()) {
    const std::string name = "peer/" + w.name + "/kten";
    js << (first ? "" : ",") << "\n  {\"name\":\"" << w.name << "\",\"what\":\"" << w.what << "\",\"target\":\""
       << w.target << "\",\"shape\":" << w.shape_json << ",\"kten_seconds\":"
       << (results.count(name) ? results[name].seconds : 0.0) << "}";
    first = false;
  }
  js << "\n]}\n";
}

#ifdef KTEN_PERF_LIBTORCH
/// \brief libtorch's GEMMs run in OpenBLAS, whose thread pool and libtorch's OpenMP pool compete
/// for the cores: libtorch runs with OpenBLAS on every thread and on one, and keeps its best.
std::vector<int> libtorch_openblas_threads() {
  const int all = kten::host_threads();
  return all > 1 ? std::vector<int>{all, 1} : std::vector<int>{1};
}

void register_libtorch() {
  if (!config.device.is_cpu()) return;  // Debian's libtorch is a CPU build
  kten::perf::libtorch::set_threads(kten::host_threads());
  for (const auto& w : peer_workloads())
    for (int blas_threads : libtorch_openblas_threads())
      benchmark::RegisterBenchmark(("peer/" + w.name + "/libtorch_openblas_threads_" + std::to_string(blas_threads)).c_str(),
                                   [w, blas_threads](benchmark::State& state) {
                                     give_openblas_every_core(blas_threads);
                                     timed(state, kten::cpu(), 1, w.libtorch());
                                     give_openblas_every_core(kten::host_threads());
                                   });
}

/// \brief The *_vs_libtorch rows: libtorch's time in its best OpenBLAS configuration / kten's time.
void add_libtorch_rows(std::vector<Row>& rows) {
  if (!config.device.is_cpu()) return;
  for (const auto& w : peer_workloads()) {
    const std::string name = "peer/" + w.name + "/";
    double best = 0;
    int best_threads = 0;
    for (int blas_threads : libtorch_openblas_threads()) {
      const std::string config_name = name + "libtorch_openblas_threads_" + std::to_string(blas_threads);
      if (results.count(config_name) && (best == 0 || results[config_name].seconds < best))
        std::tie(best, best_threads) = std::make_pair(results[config_name].seconds, blas_threads);
    }
    const double kten_s = results.count(name + "kten") ? results[name + "kten"].seconds : 0;
    const std::string blas = best > 0 ? " (OpenBLAS threads " + std::to_string(best_threads) + ")" : "";
    rows.push_back({w.name + "_vs_libtorch", w.what + ": libtorch time" + blas + " / kten time", w.target,
                    best > 0 && kten_s > 0 ? best / kten_s : 0, false, true});
  }
}
#endif

// --- Linear forward (GEMM + bias) vs the GEMM alone -------------------------------------------------

void register_linear() {
  const Device d = config.device;
  const std::int64_t batch = config.quick ? 128 : 1024, in = config.quick ? 128 : 1024, out = in;
  const double flops = 2.0 * batch * in * out;
  benchmark::RegisterBenchmark("linear/forward", [=](benchmark::State& state) {
    kten::nn::Linear layer(in, out, {true, kten::float32, 1});
    layer.to(d);
    auto X = kten::rand({batch, in}, d, 2);
    timed(state, d, flops, [&] { layer(X); });
  });
  benchmark::RegisterBenchmark("linear/gemm", [=](benchmark::State& state) {
    auto X = kten::rand({batch, in}, d, 2), W = kten::rand({in, out}, d, 3);
    timed(state, d, flops, [&] { kten::matmul(X, W); });
  });
}

// --- GPU only: launch latency and host-to-device transfers -----------------------------------------

/// \brief How many small ops the burst rows enqueue before one fence.
constexpr int kBurst = 64;

void register_gpu_rows() {
  const Device d = config.device;
  if (!d.is_gpu() || kten::gpus_are_emulated()) return;
  benchmark::RegisterBenchmark("launch/kten", [=](benchmark::State& state) {
    auto x = kten::ones({1}, d);
    timed(state, d, 1, [&] { x + 1.0; });  // one small op, launch to completion
  });
  benchmark::RegisterBenchmark("launch/raw", [=](benchmark::State& state) {
    for (auto _ : state) state.SetIterationTime(kten::perf::raw_launch_seconds(1));
    state.counters["work"] = 1;
  })->UseManualTime();
  // Kokkos' own floor on the GPU: an empty one-element parallel_for, fenced.
  using GpuPolicy = Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  benchmark::RegisterBenchmark("launch/empty_kokkos", [=](benchmark::State& state) {
    timed(state, d, 1, [&] {
      Kokkos::parallel_for("perf::empty", GpuPolicy(0, 1), EmptyKernel{});
      Kokkos::DefaultExecutionSpace().fence();
    });
  });
  // The same, enqueued back to back and fenced once: what an op costs the host when nothing waits.
  benchmark::RegisterBenchmark("launch/kten_burst", [=](benchmark::State& state) {
    auto x = kten::ones({1}, d);
    timed(state, d, kBurst, [&] {
      for (int i = 0; i < kBurst; ++i) x + 1.0;
    });
  });
  benchmark::RegisterBenchmark("launch/empty_kokkos_burst", [=](benchmark::State& state) {
    timed(state, d, kBurst, [&] {
      for (int i = 0; i < kBurst; ++i) Kokkos::parallel_for("perf::empty", GpuPolicy(0, 1), EmptyKernel{});
      Kokkos::DefaultExecutionSpace().fence();
    });
  });
  const std::int64_t n = config.quick ? (1 << 20) : (64 << 20);  // floats: 256 MiB in full mode
  const double bytes = 4.0 * n;
  benchmark::RegisterBenchmark("h2d/kten_pageable", [=](benchmark::State& state) {
    auto h = kten::rand({n}, kten::cpu(), 1);
    timed(state, d, bytes, [&] { h.to(d); });
  });
  benchmark::RegisterBenchmark("h2d/kten_pinned", [=](benchmark::State& state) {
    auto h = kten::rand({n}, kten::cpu(), 1).pin_memory();
    timed(state, d, bytes, [&] { h.to(d); });
  });
  benchmark::RegisterBenchmark("h2d/cudaMemcpy_pinned", [=](benchmark::State& state) {
    for (auto _ : state) state.SetIterationTime(kten::perf::raw_pinned_h2d_seconds(static_cast<std::size_t>(bytes), 1));
    state.counters["work"] = bytes;
  })->UseManualTime();
}

// --- the chapter's exercises ----------------------------------------------------------------------

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string exercise_matmul_sizes(std::ostream& os) {
  std::ostringstream json;
  os << "\nExercise 1: a large and a small matmul on each device\n";
  json << "[";
  bool first = true;
  for (const Device& d : {kten::cpu(), kten::try_gpu()}) {
    if (!first && d == kten::cpu()) break;  // no GPU: the CPU line is all there is
    for (std::int64_t n : {std::int64_t(16), std::int64_t(config.quick ? 256 : 1024)}) {
      auto A = kten::rand({n, n}, d, 1), B = kten::rand({n, n}, d, 2);
      kten::matmul(A, B);
      kten::synchronize(d);
      const int reps = n <= 16 ? 1000 : 3;
      const double s = seconds_of([&] {
        for (int r = 0; r < reps; ++r) kten::matmul(A, B);
        kten::synchronize(d);
      }) / reps;
      os << "  " << d << "  n = " << std::setw(4) << n << ": " << std::setw(10) << s * 1e6 << " us  ("
         << 2.0 * n * n * n / s / 1e9 << " GFLOP/s)\n";
      json << (first ? "" : ",") << "{\"device\":\"" << d << "\",\"n\":" << n << ",\"seconds\":" << s << "}";
      first = false;
    }
  }
  if (kten::num_gpus() == 0)
    os << "  no GPU here: on a GPU machine the large product runs far faster there, while the 16x16 one\n"
          "  is faster on the CPU, where there is no kernel launch or PCIe latency to pay.\n";
  json << "]";
  return json.str();
}

std::string exercise_norm_logging(std::ostream& os) {
  const Device d = config.device;
  const int steps = config.quick ? 100 : 1000;
  const std::int64_t n = 100;
  auto A = kten::rand({n, n}, d, 1), B = kten::rand({n, n}, d, 2);
  kten::synchronize(d);
  float sink = 0;
  const double per_step = seconds_of([&] {  // read each norm to the host: one sync per step
    for (int s = 0; s < steps; ++s) sink += kten::norm(kten::matmul(A, B)).item<float>();
  });
  const double device_log = seconds_of([&] {  // log on the device, read once
    auto log = kten::zeros({steps}, d);
    std::vector<Tensor> norms;
    for (int s = 0; s < steps; ++s) norms.push_back(kten::norm(kten::matmul(A, B)));
    Tensor total = kten::zeros({}, d);
    for (const auto& v : norms) total = total + v;
    sink += total.item<float>();
  });
  auto stacked = kten::rand({steps * n, n}, d, 3);  // 1000 left operands, one after the other
  kten::synchronize(d);
  const double batched = seconds_of([&] {  // all products in one kernel, all norms in one reduction
    auto norms = kten::norm(kten::matmul(stacked, B).reshape({steps, n * n}), 1);
    sink += norms.to_vector<float>()[0];
  });
  os << "\nExercise 2: " << steps << " matmuls of 100x100 on " << d << ", logging the Frobenius norm\n"
     << "  read to the host every step : " << per_step * 1e3 << " ms\n"
     << "  kept on the device, read once: " << device_log * 1e3 << " ms\n"
     << "  one batched kernel            : " << batched * 1e3 << " ms\n";
  if (sink == 12345.f) os << ' ';  // keep the work observable
  std::ostringstream json;
  json << "{\"device\":\"" << d << "\",\"steps\":" << steps << ",\"read_every_step_s\":" << per_step
       << ",\"device_log_s\":" << device_log << ",\"batched_s\":" << batched << "}";
  return json.str();
}

std::string exercise_two_devices(std::ostream& os) {
  os << "\nExercise 3: two matmuls on two devices at once versus one after the other\n";
  if (kten::num_gpus() == 0 || kten::gpus_are_emulated()) {
    os << "  not applicable: this machine has one device (the CPU), so there is nothing to overlap.\n";
    return "{\"applicable\":false,\"reason\":\"one device (no GPU)\"}";
  }
  const std::int64_t n = config.quick ? 256 : 1024;
  const Device c = kten::cpu(), g = kten::gpu(0);
  auto Ac = kten::rand({n, n}, c, 1), Ag = kten::rand({n, 4 * n}, g, 1), Bg = kten::rand({4 * n, n}, g, 2);
  auto sequential = [&] {
    kten::matmul(Ag, Bg);
    kten::synchronize(g);
    kten::matmul(Ac, Ac);
    kten::synchronize(c);
  };
  auto overlapped = [&] {  // operations do not fence: the GPU works while the CPU computes
    kten::matmul(Ag, Bg);
    kten::matmul(Ac, Ac);
    kten::synchronize(c);
    kten::synchronize(g);
  };
  sequential();
  const double s = seconds_of(sequential), o = seconds_of(overlapped);
  os << "  cpu(0) and gpu(0), one after the other: " << s * 1e3 << " ms; at once: " << o * 1e3
     << " ms; speed-up " << s / o << "x\n";
  std::ostringstream json;
  json << "{\"applicable\":true,\"sequential_s\":" << s << ",\"overlapped_s\":" << o << ",\"speedup\":" << s / o << "}";
  return json.str();
}

// --- summary, CSV, plots ----------------------------------------------------------------------------

double rate(const std::string& name) {
  auto it = results.find(name);
  return it == results.end() || it->second.seconds <= 0 ? 0 : it->second.items / it->second.seconds;
}

/// \brief An environment variable's value, or "unset".
std::string env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "unset";
}

/// \brief The 1-minute load average when the run started (other work on the machine skews it).
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  in >> first;
  return first.empty() ? "unknown" : first;
}
const std::string load_at_start = load_average();

/// \brief How wide a vector ISA an OpenBLAS x86-64 kernel (openblas_get_corename()) or kten's
/// HostIsa name stands for: 3 AVX-512, 2 AVX2, 1 AVX, 0 older or unknown.
int isa_rank(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto has = [&](std::initializer_list<const char*> parts) {
    for (const char* part : parts)
      if (name.find(part) != std::string::npos) return true;
    return false;
  };
  if (has({"skylakex", "cooperlake", "sapphirerapids", "zen4", "avx-512", "avx512"})) return 3;
  if (has({"haswell", "zen", "skylake", "avx2"})) return 2;
  if (has({"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"})) return 1;
  return 0;
}

/// \brief The warning `make perf` prints when OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE are set ("" when
/// neither is): they pick OpenBLAS' kernel and blocking instead of its own detection, which on some
/// machines of this project choose a kernel below the CPU's ISA, and the GEMM ratios then measure
/// kten against that kernel.
bool openblas_below_isa() { return isa_rank(openblas_get_corename()) < isa_rank(kten::cpu_vector_isa()); }

std::string openblas_warning() {
  const std::string coretype = env_or_unset("OPENBLAS_CORETYPE"), l2 = env_or_unset("OPENBLAS_L2_SIZE");
  const std::string core = openblas_get_corename();
  const bool below = openblas_below_isa();
  if (coretype == "unset" && l2 == "unset") {
    if (!below) return "";
    // OpenBLAS' own detection chose it (Prescott, SSE3, on this project's AVX-512 Xeon).
    return "warning: OpenBLAS picked its '" + core + "' kernel by itself, below this machine's " +
           kten::cpu_vector_isa() + ": the ratios against OpenBLAS, and against libtorch, whose GEMMs call it, "
           "are withheld (null in summary.json, under baseline_below_isa). To measure them, name this machine's "
           "kernel: OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) make perf\n";
  }
  std::ostringstream os;
  os << "warning: OPENBLAS_CORETYPE=" << coretype << " OPENBLAS_L2_SIZE=" << l2 << " are set: OpenBLAS runs its '"
     << core << "' kernel" << (below ? ", below this machine's " + kten::cpu_vector_isa() : "")
     << ", so the matmul rows compare kten with that kernel"
     << (below ? " and are withheld with the libtorch rows (null in summary.json, under baseline_below_isa)" : "")
     << ". For a perf run, unset both: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE make perf\n";
  return os.str();
}

std::string machine_json() {
  std::ostringstream os;
  os << "{\"cpu\":\"" << kten::cpu_model() << "\",\"host_threads\":" << kten::host_threads()
     << ",\"vector_isa\":\"" << kten::cpu_vector_isa() << "\",\"gemm_micro_kernel\":\"" << kten::gemm_micro_kernel()
     << "\",\"host_serial_grain\":" << kten::host_serial_grain() << ",\"omp_proc_bind\":\""
     << env_or_unset("OMP_PROC_BIND") << "\",\"omp_places\":\"" << env_or_unset("OMP_PLACES")
     << "\",\"load_average_at_start\":\"" << load_at_start << "\",\"openblas_core\":\"" << openblas_get_corename()
     << "\",\"openblas_below_isa\":" << (openblas_below_isa() ? "true" : "false")
     << ",\"openblas_config\":\"" << openblas_get_config() << "\",\"openblas_coretype\":\""
     << env_or_unset("OPENBLAS_CORETYPE") << "\",\"openblas_l2_size\":\"" << env_or_unset("OPENBLAS_L2_SIZE")
     << "\",\"eigen\":\"" << kten::perf::eigen_version()
#ifdef KTEN_PERF_LIBTORCH
     << "\",\"libtorch\":\"" << kten::perf::libtorch::version() << "\",\"libtorch_blas\":\""
     << kten::perf::libtorch::blas()
#endif
     << "\",\"gpus\":[";
  bool first = true;
  for (const auto& g : kten::gpu_properties()) {
    os << (first ? "" : ",") << "\"" << g.name << "\"";
    first = false;
  }
  os << "],\"device\":\"" << config.device << "\",\"kokkos\":\"" << kten::kokkos_version() << "\",\"backends\":[";
  first = true;
  for (const auto& b : kten::enabled_backends()) {
    os << (first ? "" : ",") << "\"" << b << "\"";
    first = false;
  }
  os << "],\"kten\":\"" << kten::version() << "\",\"git\":\"" << KTEN_GIT_HASH << "\",\"quick\":"
     << (config.quick ? "true" : "false") << "}";
  return os.str();
}

/// \brief How far above 1 a ratio to a memory limit may lie by noise; beyond it the baseline did not
/// reach the machine's limit, and the ratio is reported as that, not as a result.
constexpr double kLimitSlack = 1.05;

bool suspect(const Row& r) { return r.against_limit && r.value > kLimitSlack; }

/// \brief A ratio against OpenBLAS while it runs a kernel below the ISA kten was built for: against
/// that kernel, not the machine, so no result (reported apart).
bool weak_baseline(const Row& r) { return r.against_blas && openblas_below_isa(); }

/// \brief A ratio not reported as a result: its baseline is wrong (suspect) or weak.
bool withheld(const Row& r) { return suspect(r) || weak_baseline(r); }

/// \brief The best rate of the named benchmarks, and which one it was.
std::pair<double, std::string> best_rate(const std::vector<std::string>& names) {
  std::pair<double, std::string> best{0.0, ""};
  for (const auto& name : names)
    if (rate(name) > best.first) best = {rate(name), name.substr(name.find('/') + 1)};
  return best;
}

/// \brief What the device under test is, for the plots' titles: the GPU's name, or the CPU and its ISA.
std::string device_name() {
  if (config.device.is_gpu() && !kten::gpus_are_emulated())
    for (const auto& g : kten::gpu_properties())
      if (g.used_by_kten) return g.name;
  return kten::cpu_model() + ", " + kten::cpu_vector_isa();
}

void write_outputs(const std::vector<Row>& rows, const std::vector<std::int64_t>& sizes,
                   const std::string& exercises_json) {
  namespace fs = std::filesystem;
  const fs::path out(config.out);
  {
    std::ofstream js(out / "summary.json");
    js << "{\n  \"machine\": " << machine_json() << ",\n  \"load_average_at_end\": \"" << load_average()
       << "\",\n  \"ratios\": {";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      js << (i ? "," : "") << "\n    \"" << rows[i].key << "\": ";
      if (rows[i].value > 0 && !withheld(rows[i])) js << rows[i].value;
      else js << "null";
    }
    js << "\n  },\n  \"baseline_below_limit\": {";  // ratios not reported: the baseline missed the machine's limit
    bool first = true;
    for (const auto& r : rows)
      if (suspect(r)) {
        js << (first ? "" : ",") << "\n    \"" << r.key << "\": " << r.value;
        first = false;
      }
    js << "\n  },\n  \"baseline_below_isa\": {";  // ratios against an OpenBLAS kernel below the machine's ISA
    first = true;
    for (const auto& r : rows)
      if (weak_baseline(r) && r.value > 0) {
        js << (first ? "" : ",") << "\n    \"" << r.key << "\": " << r.value;
        first = false;
      }
    js << "\n  },\n  \"targets\": {";
    for (std::size_t i = 0; i < rows.size(); ++i)
      js << (i ? "," : "") << "\n    \"" << rows[i].key << "\": \"" << rows[i].target << "\"";
    js << "\n  },\n  \"exercises\": " << exercises_json << "\n}\n";
  }
  {
    std::ofstream csv(out / "results.csv");
    csv << "benchmark,seconds_per_iteration,work_per_iteration,rate_per_second\n";
    for (const auto& [name, m] : results)
      csv << name << ',' << m.seconds << ',' << m.items << ',' << (m.seconds > 0 ? m.items / m.seconds : 0) << '\n';
  }
  {
    std::ofstream dat(out / "gemm.dat");
    dat << "# n kten_f32 vendor_f32 kten_f64 vendor_f64 eigen_f32 (GFLOP/s)\n";
    for (auto n : sizes) {
      const std::string s = "/" + std::to_string(n);
      dat << n << ' ' << rate("gemm/kten/float32" + s) / 1e9 << ' ' << rate("gemm/vendor/float32" + s) / 1e9 << ' '
          << rate("gemm/kten/float64" + s) / 1e9 << ' ' << rate("gemm/vendor/float64" + s) / 1e9 << ' '
          << rate("gemm/eigen/float32" + s) / 1e9 << '\n';
    }
    std::ofstream bw(out / "bandwidth.dat");
    int i = 0;
    for (const char* k : {"triad", "copy", "read", "deep_copy", "fma", "a*b+c", "exp", "sum", "norm", "max", "eigen_fma", "eigen_exp"})
      bw << i++ << " \"" << k << "\" " << rate(std::string("bandwidth/") + k) / 1e9 << '\n';
    const std::string vendor = config.device.is_cpu() ? "OpenBLAS" : kten::perf::gpu_blas_name();
    std::ofstream gp(out / "plots.gp");
    gp << "set terminal pngcairo size 900,560 noenhanced\nset grid\nset key outside right\n"
       << "set output 'gemm.png'\n"
       << "set title 'matmul on " << config.device << " (" << device_name() << ")'\n"
       << "set xlabel 'n (n x n times n x n)'\nset ylabel 'GFLOP/s'\nset logscale x 2\n"
       << "plot 'gemm.dat' using 1:2 with linespoints title 'kten float32', "
       << "'' using 1:3 with linespoints title '" << vendor << " sgemm', "
       << "'' using 1:4 with linespoints title 'kten float64', '' using 1:5 with linespoints title '" << vendor
       << " dgemm'" << (config.device.is_cpu() ? ", '' using 1:6 with linespoints title 'Eigen float32'" : "") << "\n"
       << "unset logscale x\nset output 'bandwidth.png'\n"
       << "set title 'memory-bound operations on " << config.device << ", " << (config.quick ? "2^20" : "2^26")
       << " float32'\nset ylabel 'GB/s (useful bytes)'\nset xlabel ''\nset style fill solid 0.6\nset boxwidth 0.6\n"
       << "set yrange [0:*]\nplot 'bandwidth.dat' using 1:3:xtic(2) with boxes notitle\n";
  }
  const auto vs_libtorch = [](const Row& r) {
    return r.key.find("_vs_libtorch") != std::string::npos && r.value > 0 && !withheld(r);
  };
  if (std::any_of(rows.begin(), rows.end(), vs_libtorch)) {  // beside the GEMM plot: kten against libtorch
    std::ofstream dat(out / "libtorch.dat");
    int i = 0;
    for (const auto& r : rows)
      if (vs_libtorch(r)) dat << i++ << " \"" << r.key.substr(0, r.key.find("_vs_libtorch")) << "\" " << r.value << '\n';
    std::ofstream gp(out / "plots.gp", std::ios::app);
    gp << "set output 'libtorch.png'\nset title 'libtorch time / kten time on "
       << config.device << " (" << kten::cpu_model() << ", " << kten::host_threads()
       << " threads; above 1: kten is faster)'\nset ylabel 'ratio'\nset xtics rotate by -40\n"
       << "set logscale y 2\nset yrange [*:*]\nplot 'libtorch.dat' using 1:3:xtic(2) with boxes notitle, "
       << "1 with lines lw 2 notitle\n";
  }
  // plots.gp names its files relative to the output folder, so that it draws them again wherever
  // the folder is copied (a GPU node's results are plotted afterwards, where gnuplot is).
  const std::string cmd = "cd '" + out.string() + "' && " + std::string(KTEN_GNUPLOT) + " plots.gp";
  if (std::system(cmd.c_str()) != 0) std::cout << "gnuplot failed: " << cmd << '\n';
}

}  // namespace

int main(int argc, char* argv[]) try {  // a GPU build on a node without a usable GPU throws in the guard
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
  for (auto n : sizes) register_gemm<float>(n);
  for (auto n : sizes) register_gemm<double>(n);
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

  std::ostringstream exercises;
  exercises << "{\"matmul_sizes\":" << exercise_matmul_sizes(std::cout)
            << ",\"norm_logging\":" << exercise_norm_logging(std::cout)
            << ",\"two_devices\":" << exercise_two_devices(std::cout) << "}";

  // One ratio per target row, measured in this run on this machine.
  auto ratio = [](double a, double b) { return a > 0 && b > 0 ? a / b : 0.0; };
  auto seconds = [](const std::string& name) { return results.count(name) ? results[name].seconds : 0.0; };
  const bool cpu = config.device.is_cpu();
  const std::string vendor = cpu ? "OpenBLAS" : kten::perf::gpu_blas_name();
  std::vector<Row> rows;
  for (const char* type : {"float32", "float64"})
    for (auto n : sizes) {
      if (n < 128) continue;  // 100 x 100 has its own row
      const std::string key = std::string("gemm_f") + (type[5] == '3' ? "32" : "64") + "_vs_blas_n" + std::to_string(n);
      const std::string target = !cpu ? (n >= 2048 ? ">= 0.80" : ">= 0.70") : n >= 512 ? ">= 0.75 (stretch 0.9)" : ">= 0.50";
      const std::string suffix = std::string(type) + "/" + std::to_string(n);
      rows.push_back({key, std::string("matmul ") + type + ", n=" + std::to_string(n) + ", GFLOP/s vs " + vendor, target,
                      ratio(rate("gemm/kten/" + suffix), rate("gemm/vendor/" + suffix)), false, cpu});
    }
  rows.push_back({"matmul100_blas_over_kten", "100 x 100 float32 matmul: " + vendor + " time / kten time",
                  cpu ? ">= 0.50" : "(informative)", ratio(seconds("gemm/vendor/float32/100"), seconds("gemm/kten/float32/100")),
                  false, cpu});
  if (cpu)
    rows.push_back({"gemm_vs_eigen", "matmul float32, n=1024, GFLOP/s vs Eigen " + std::string(kten::perf::eigen_version()),
                    ">= 1.2", ratio(rate("gemm/kten/float32/1024"), rate("gemm/eigen/float32/1024"))});
  // The machine's limits: the best of each baseline's loops (plain, streaming stores, memcpy).
  const auto triad = best_rate({"bandwidth/triad", "bandwidth/triad_streaming"});
  const auto copy = best_rate(cpu ? std::vector<std::string>{"bandwidth/copy", "bandwidth/copy_streaming", "bandwidth/copy_memcpy"}
                                  : std::vector<std::string>{"bandwidth/copy", "bandwidth/deep_copy"});
  const auto read = best_rate({"bandwidth/read"});
  const std::string limit = cpu ? " (best OpenMP loop: " : " (best of a Kokkos kernel and deep_copy: ";
  rows.push_back({"fma_vs_triad", "fma(a, b, c) bytes/s vs a triad d = a*b + c" + limit + triad.second + ")", ">= 0.85",
                  ratio(rate("bandwidth/fma"), triad.first), true});
  rows.push_back({"unfused_fma_vs_triad", "a * b + c (two kernels, a temporary) vs the triad", "(informative)",
                  ratio(rate("bandwidth/a*b+c"), triad.first), true});
  rows.push_back({"exp_vs_copy", "exp bytes/s vs a copy" + limit + copy.second + ")", ">= 0.85",
                  ratio(rate("bandwidth/exp"), copy.first), true});
  rows.push_back({"gelu_vs_copy", "exact GELU bytes/s vs a copy", ">= 0.85", ratio(rate("bandwidth/gelu"), copy.first), true});
  rows.push_back({"gelu_fwd_bwd_vs_copy", "GELU forward + backward, least bytes/s vs a copy", ">= 0.85",
                  ratio(rate("bandwidth/gelu_fwd_bwd"), copy.first), true});
  rows.push_back({"softmax_vs_copy", "softmax over rows of 1024, bytes/s vs a copy", ">= 0.80",
                  ratio(rate("bandwidth/softmax"), copy.first), true});
  rows.push_back({"softmax_fwd_bwd_vs_copy", "softmax forward + backward, least bytes/s vs a copy", ">= 0.80",
                  ratio(rate("bandwidth/softmax_fwd_bwd"), copy.first), true});
  rows.push_back({"layernorm_vs_copy", "LayerNorm over rows of 1024, bytes/s vs a copy", ">= 0.80",
                  ratio(rate("bandwidth/layernorm"), copy.first), true});
  rows.push_back({"layernorm_fwd_bwd_vs_copy", "LayerNorm forward + backward, least bytes/s vs a copy", ">= 0.80",
                  ratio(rate("bandwidth/layernorm_fwd_bwd"), copy.first), true});
  // --- issue 31 (normalisation): 4 MiB of activations, which a CPU's caches partly hold, against
  // the copy of 2^26 floats from memory: informative, not a limit.
  rows.push_back({"norm_batchnorm2d_fwd_bwd_vs_copy", "BatchNorm2d 8x32x64x64 forward + backward, least bytes/s vs a copy",
                  ">= 0.50", ratio(rate("bandwidth/batchnorm2d_fwd_bwd"), copy.first)});
  rows.push_back({"sum_vs_read", "sum bytes/s vs a read" + limit + read.second + ")", ">= 0.85",
                  ratio(rate("bandwidth/sum"), read.first), true});
  rows.push_back({"norm_vs_read", "norm bytes/s vs a read" + limit + read.second + ")", ">= 0.85",
                  ratio(rate("bandwidth/norm"), read.first), true});
  rows.push_back({"max_vs_read", "max (NaN-propagating) bytes/s vs a read", ">= 0.85",
                  ratio(rate("bandwidth/max"), read.first), true});
  rows.push_back({"sum_axis0_vs_read", "sum over the columns of rows of 1024, bytes/s vs a read", ">= 0.85",
                  ratio(rate("bandwidth/sum_axis0"), read.first), true});
  rows.push_back({"logsumexp_vs_read", "logsumexp over rows of 1024, bytes/s vs a read", ">= 0.80",
                  ratio(rate("bandwidth/logsumexp"), read.first), true});
  // Pooling and resampling (issue 31 item 2): forward + backward, least bytes/s vs a copy.
  rows.push_back({"pool_max2d_fwd_bwd_vs_copy", "max_pool2d 2x2 of 8x32x64x64, forward + backward, least bytes/s vs a copy",
                  "(informative)", ratio(rate("pool/max2d_fwd_bwd"), copy.first), true});
  rows.push_back({"pool_avg2d_fwd_bwd_vs_copy", "avg_pool2d 2x2 of 8x32x64x64, forward + backward, least bytes/s vs a copy",
                  "(informative)", ratio(rate("pool/avg2d_fwd_bwd"), copy.first), true});
  rows.push_back({"upsample_bilinear2x_fwd_bwd_vs_copy", "bilinear x2 of 8x32x32x32, forward + backward, least bytes/s vs a copy",
                  "(informative)", ratio(rate("upsample/bilinear2x_fwd_bwd"), copy.first), true});
  rows.push_back({"upsample_nearest2x_fwd_bwd_vs_copy", "nearest x2 of 8x32x32x32, forward + backward, least bytes/s vs a copy",
                  "(informative)", ratio(rate("upsample/nearest2x_fwd_bwd"), copy.first), true});
  rows.push_back({"copy_vs_deep_copy", "the copy baseline (" + copy.second + ") vs Kokkos::deep_copy (memcpy)",
                  "(informative)", ratio(copy.first, rate("bandwidth/deep_copy"))});
  if (cpu) {
    rows.push_back({"fma_vs_eigen", "fma bytes/s vs Eigen's a * b + c (one thread)", "(informative)",
                    ratio(rate("bandwidth/fma"), rate("bandwidth/eigen_fma"))});
    rows.push_back({"exp_vs_eigen", "exp bytes/s vs Eigen's exp (one thread)", "(informative)",
                    ratio(rate("bandwidth/exp"), rate("bandwidth/eigen_exp"))});
    rows.push_back({"op_latency_vs_empty_parallel_for", "a 1024-element add, time vs Kokkos' empty parallel_for",
                    "<= 2.0", ratio(seconds("latency/kten_add"), seconds("latency/empty_parallel_for"))});
    rows.push_back({"op_latency_vs_plain_loop", "a 1024-element add, time vs a plain loop (no allocation)",
                    "(informative)", ratio(seconds("latency/kten_add"), seconds("latency/plain_loop"))});
    rows.push_back({"add64_latency_us", "a 64-element add, nothing requiring grad (microseconds; 0.11 before autograd)",
                    "<= 0.121", seconds("latency/kten_add64") * 1e6});
  }
  rows.push_back({"linear_vs_gemm", "Linear forward time / GEMM time", "<= 1.05",
                  ratio(seconds("linear/forward"), seconds("linear/gemm"))});
  rows.push_back({"mlp_step_autograd_vs_handwritten", "3-layer MLP training step: loss.backward() time / hand-written backward time",
                  "<= 1.10", ratio(seconds("train/mlp_autograd"), seconds("train/mlp_handwritten"))});
  // --- Convolutions (issue 31): forward + backward (3 products of the forward's multiply-adds each)
  // in GFLOP/s against kten's own float32 GEMM at its best measured size.
  const auto gemm = best_rate([&] {
    std::vector<std::string> names;
    for (auto n : sizes) names.push_back("gemm/kten/float32/" + std::to_string(n));
    return names;
  }());
  for (const kten::perf::ConvShape& c : kten::perf::conv_shapes(config.quick)) {
    const double s = seconds("peer/" + c.name + "/kten");
    // Effective: the direct convolution's multiply-adds (what libtorch's rows and a FLOP count of
    // the layer assume), so a Winograd path scores above 1. Done: the multiply-adds the paths kten
    // took perform (conv_multiply_adds), an efficiency against the GEMM that stays below 1.
    rows.push_back({c.name + "_vs_gemm", c.name + " forward + backward, effective GFLOP/s (the direct convolution's "
                    "multiply-adds) vs kten's float32 GEMM (" + gemm.second + ")",
                    ">= 0.60", ratio(s > 0 ? 3 * 2 * c.macs() / s : 0, gemm.first)});
    kten::Shape x_shape{c.batch, c.channels}, w_shape{c.channels, c.channels};
    for (std::int64_t e : c.spatial) x_shape.push_back(e), w_shape.push_back(c.kernel);
    const double done = kten::detail::conv_multiply_adds(static_cast<int>(c.spatial.size()), kten::empty(x_shape, config.device),
                                                         kten::empty(w_shape, config.device), {1}, {c.kernel / 2}, {1}, 1);
    rows.push_back({c.name + "_done_vs_gemm", c.name + " forward + backward, GFLOP/s of the multiply-adds done (Winograd's "
                    "counted as its GEMMs perform them) vs kten's float32 GEMM", "(informative)",
                    ratio(s > 0 ? 2 * done / s : 0, gemm.first)});
  }
  // Graph ops on the 1M-edge mesh (register_graph).
  rows.push_back({"scatter_add_vs_read", "scatter_add of 1M edges x 64 features into 262k nodes, sort included, least bytes/s vs a read",
                  ">= 0.50", ratio(rate("graph/scatter_add"), read.first), true});
  // gather writes 4x what it reads: the copy (one read, one write) is its limit, not a read.
  rows.push_back({"scatter_gather_vs_copy", "gather of 262k nodes x 64 features onto 1M edges, least bytes/s vs a copy",
                  ">= 0.50", ratio(rate("graph/gather"), copy.first), true});
  // kten::onnx (issue 32): the imported medium MLP against the same Sequential
  rows.push_back({"onnx_mlp_step_vs_modules", "medium MLP Adam step, imported from ONNX / built from kten modules",
                  "<= 1.10", ratio(seconds("onnx/mlp_step_onnx"), seconds("onnx/mlp_step_modules"))});
  for (const char* batch : {"1", "4096"})
    rows.push_back({std::string("onnx_mlp_inference") + batch + "_vs_modules",
                    std::string("medium MLP forward, batch ") + batch + ", imported from ONNX / built from kten modules", "<= 1.10",
                    ratio(seconds(std::string("onnx/mlp_inference") + batch + "_onnx"),
                          seconds(std::string("onnx/mlp_inference") + batch + "_modules"))});
  rows.push_back({"onnx_unet_step_vs_modules", "U-Net (circular convs, BatchNorm, pooling, bilinear upsampling, skip) Adam step, "
                  "imported from ONNX / built from kten modules", "<= 1.10",
                  ratio(seconds("onnx/unet_step_onnx"), seconds("onnx/unet_step_modules"))});
  rows.push_back({"onnx_unet_inference_vs_modules", "U-Net forward in evaluation mode, imported from ONNX / built from kten modules",
                  "<= 1.10", ratio(seconds("onnx/unet_inference_onnx"), seconds("onnx/unet_inference_modules"))});
  if (config.device.is_gpu() && !kten::gpus_are_emulated()) {
    rows.push_back({"launch_overhead_us", "one small op, launch to completion, minus a raw CUDA launch (microseconds)",
                     "<= 2", (seconds("launch/kten") - seconds("launch/raw")) * 1e6});
    rows.push_back({"launch_vs_empty_kokkos", "one small op, launch to completion, vs an empty Kokkos kernel",
                     "<= 1.5", ratio(seconds("launch/kten"), seconds("launch/empty_kokkos"))});
    rows.push_back({"op_enqueue_us", "one small op of 64 enqueued back to back, fenced once (microseconds per op)",
                     "(informative)", seconds("launch/kten_burst") / kBurst * 1e6});
    rows.push_back({"op_enqueue_vs_empty_kokkos", "64 small ops enqueued then fenced vs 64 empty Kokkos kernels",
                     "<= 2.0", ratio(seconds("launch/kten_burst"), seconds("launch/empty_kokkos_burst"))});
    rows.push_back({"h2d_pinned_vs_cudamemcpy", "to(gpu) of a pinned host tensor vs cudaMemcpy from pinned memory",
                     ">= 0.80", ratio(rate("h2d/kten_pinned"), rate("h2d/cudaMemcpy_pinned"))});
    rows.push_back({"h2d_pageable_vs_cudamemcpy", "to(gpu) of an ordinary host tensor vs cudaMemcpy pinned",
                     "(informative)", ratio(rate("h2d/kten_pageable"), rate("h2d/cudaMemcpy_pinned"))});
  }
#ifdef KTEN_PERF_LIBTORCH
  add_libtorch_rows(rows);
#endif
  write_outputs(rows, sizes, exercises.str());
  write_peer_workloads();

  std::cout << "\nhost: " << kten::cpu_model() << ", " << kten::host_threads() << " threads, " << kten::cpu_vector_isa()
            << "; matmul " << kten::gemm_micro_kernel() << "; OMP_PROC_BIND=" << env_or_unset("OMP_PROC_BIND")
            << " OMP_PLACES=" << env_or_unset("OMP_PLACES") << "; load average " << load_at_start << " at start, "
            << load_average() << " at end\n";
  std::size_t key_width = 34;  // the longest row name and two spaces
  for (const auto& r : rows) key_width = std::max(key_width, r.key.size() + 2);
  const int key_column = static_cast<int>(key_width);
  std::cout << "\n" << std::left << std::setw(key_column) << "ratio" << std::setw(10) << "measured" << std::setw(24)
            << "target" << "what\n";
  for (const auto& r : rows) {
    std::ostringstream v;
    if (suspect(r)) v << "baseline?";
    else if (weak_baseline(r) && r.value > 0) v << "weak BLAS";
    else if (r.value > 0) v << std::fixed << std::setprecision(2) << r.value;
    else v << "n/a";
    std::cout << std::setw(key_column) << r.key << std::setw(10) << v.str() << std::setw(24) << r.target << r.what << '\n';
  }
  for (const auto& r : rows)
    if (suspect(r))
      std::cout << "baseline? " << r.key << ": " << std::fixed << std::setprecision(2) << r.value << " > " << kLimitSlack
                << " of the memory limit measured in this run, so that baseline did not reach the machine's limit"
                << " (noise, another load, a cold run): not a result. Run again on a quiet machine.\n";
  if (!openblas_warning().empty()) std::cout << '\n' << openblas_warning();
  std::cout << "\nmachine: " << machine_json() << "\nwritten to " << config.out
            << ": perf.json summary.json results.csv workloads.json gemm.png bandwidth.png"
#ifdef KTEN_PERF_LIBTORCH
            << " libtorch.png"
#endif
            << "\n";
  benchmark::Shutdown();
  return 0;
} catch (const kten::Error& e) {
  std::cerr << e.what() << '\n';
  return 1;
}
