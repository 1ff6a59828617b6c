// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf's compute- and latency-bound kernels: GEMM against OpenBLAS (cuBLAS, rocBLAS on a GPU)
// and Eigen, small-op latency against Kokkos' empty kernel and a plain loop, Linear against its
// GEMM, and on a GPU launch latency and transfers against a raw launch and cudaMemcpy.
#include <cblas.h>
#ifdef __linux__
#include <sched.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include <Kokkos_Core.hpp>
#include <kten/kten.hpp>

#include "baselines/host_baseline.hpp"
#include "baselines/vendor_baseline.hpp"
#include "perf_harness.hpp"

namespace kten::perf {

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

namespace {

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

}  // namespace

void register_gemm_sizes(const std::vector<std::int64_t>& sizes) {
  for (auto n : sizes) register_gemm<float>(n);
  for (auto n : sizes) register_gemm<double>(n);
}

// --- small-operation latency on the CPU --------------------------------------------------------------

namespace {

/// \brief Kokkos' floor: an empty parallel_for over the host execution space (an OpenMP fork-join).
struct EmptyKernel {
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {}
};

}  // namespace

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

namespace {

/// \brief How many small ops the burst rows enqueue before one fence.
constexpr int kBurst = 64;

}  // namespace

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

// --- the ratio rows --------------------------------------------------------------------------------

void add_gemm_rows(std::vector<Row>& rows, const std::vector<std::int64_t>& sizes) {
  const bool cpu = config.device.is_cpu();
  const std::string vendor = cpu ? "OpenBLAS" : kten::perf::gpu_blas_name();
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
}

void add_latency_rows(std::vector<Row>& rows) {
  if (config.device.is_cpu()) {
    rows.push_back({"op_latency_vs_empty_parallel_for", "a 1024-element add, time vs Kokkos' empty parallel_for",
                    "<= 2.0", ratio(seconds("latency/kten_add"), seconds("latency/empty_parallel_for"))});
    rows.push_back({"op_latency_vs_plain_loop", "a 1024-element add, time vs a plain loop (no allocation)",
                    "(informative)", ratio(seconds("latency/kten_add"), seconds("latency/plain_loop"))});
    rows.push_back({"add64_latency_us", "a 64-element add, nothing requiring grad (microseconds; 0.11 before autograd)",
                    "<= 0.121", seconds("latency/kten_add64") * 1e6});
  }
  rows.push_back({"linear_vs_gemm", "Linear forward time / GEMM time", "<= 1.05",
                  ratio(seconds("linear/forward"), seconds("linear/gemm"))});
}

void add_gpu_rows(std::vector<Row>& rows) {
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
}

}  // namespace kten::perf
