// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The "GPUs" chapter's exercises: a large and a small matmul on each device, a norm logged every
// step read to the host or kept on the device, and two devices working at once.
#include <chrono>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <kten/kten.hpp>

#include "perf_harness.hpp"

namespace kten::perf {

// --- the chapter's exercises ----------------------------------------------------------------------

namespace {

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

}  // namespace

std::string run_exercises(std::ostream& os) {
  std::ostringstream exercises;
  exercises << "{\"matmul_sizes\":" << exercise_matmul_sizes(os)
            << ",\"norm_logging\":" << exercise_norm_logging(os)
            << ",\"two_devices\":" << exercise_two_devices(os) << "}";
  return exercises.str();
}

}  // namespace kten::perf
