// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf's memory-bound families: elementwise ops, row ops and reductions, pooling and resampling,
// graph ops; each against the machine's memory limit measured in the same run (a triad, a copy or
// a read: OpenMP loops on the host, Kokkos kernels on a GPU).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>
#include <kten/kten.hpp>

#include "baselines/host_baseline.hpp"
#include "perf_harness.hpp"

namespace kten::perf {

// --- bandwidth: elementwise and reductions vs the machine's limits --------------------------------

namespace {

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

}  // namespace

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

// --- the ratio rows --------------------------------------------------------------------------------

namespace {

/// \brief The machine's memory limits measured in this run: each one's best rate and its baseline.
struct Limits {
  std::pair<double, std::string> triad, copy, read;
};

// The machine's limits: the best of each baseline's loops (plain, streaming stores, memcpy).
Limits memory_limits() {
  const bool cpu = config.device.is_cpu();
  const auto triad = best_rate({"bandwidth/triad", "bandwidth/triad_streaming"});
  const auto copy = best_rate(cpu ? std::vector<std::string>{"bandwidth/copy", "bandwidth/copy_streaming", "bandwidth/copy_memcpy"}
                                  : std::vector<std::string>{"bandwidth/copy", "bandwidth/deep_copy"});
  const auto read = best_rate({"bandwidth/read"});
  return {triad, copy, read};
}

}  // namespace

void add_bandwidth_rows(std::vector<Row>& rows) {
  const bool cpu = config.device.is_cpu();
  const auto [triad, copy, read] = memory_limits();
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
  }
}

void add_graph_rows(std::vector<Row>& rows) {
  const Limits limits = memory_limits();
  // Graph ops on the 1M-edge mesh (register_graph).
  rows.push_back({"scatter_add_vs_read", "scatter_add of 1M edges x 64 features into 262k nodes, sort included, least bytes/s vs a read",
                  ">= 0.50", ratio(rate("graph/scatter_add"), limits.read.first), true});
  // gather writes 4x what it reads: the copy (one read, one write) is its limit, not a read.
  rows.push_back({"scatter_gather_vs_copy", "gather of 262k nodes x 64 features onto 1M edges, least bytes/s vs a copy",
                  ">= 0.50", ratio(rate("graph/gather"), limits.copy.first), true});
}

}  // namespace kten::perf
