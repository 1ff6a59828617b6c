// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-tour: the "GPUs" chapter of Dive into Deep Learning, walked in C++ on one device.
//   kten-tour            runs on try_gpu(): gpu(0) if there is one, else cpu()
//   kten-tour cpu        runs on the host;  kten-tour gpu:1  runs on gpu(1)
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include <kten/kten.hpp>

namespace {

kten::Device parse_device(const std::string& s) {
  if (s == "cpu") return kten::cpu();
  if (s == "gpu") return kten::gpu();
  if (s.rfind("gpu:", 0) == 0) return kten::gpu(std::stoi(s.substr(4)));
  throw kten::Error("kten-tour: unknown device '" + s + "' (expected cpu, gpu or gpu:N)");
}

void section(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

// Seconds for `reps` matmuls of n x n on `d`, fenced before and after so the clock sees the work.
double time_matmul(const kten::Device& d, std::int64_t n, int reps) {
  auto A = kten::rand({n, n}, d, 1), B = kten::rand({n, n}, d, 2);
  kten::matmul(A, B);  // warm-up
  kten::synchronize(d);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) kten::matmul(A, B);
  kten::synchronize(d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

void report_matmul(const kten::Device& d, std::int64_t n, int reps) {
  const double s = time_matmul(d, n, reps);
  std::cout << "  " << d << ": matmul " << n << "x" << n << " float32 in " << s * 1e3 << " ms  ("
            << 2.0 * n * n * n / s / 1e9 << " GFLOP/s)\n";
}

}  // namespace

int main(int argc, char* argv[]) {
  try {  // the guard too: a GPU build on a node without a usable GPU throws here, and says why
    kten::ScopeGuard guard(argc, argv);
    const kten::Device d = argc > 1 ? parse_device(argv[1]) : kten::try_gpu();
    kten::require_available(d);

    section("The device report (kten's nvidia-smi)");
    kten::print_device_report(std::cout);

    section("Computing devices");
    std::cout << "cpu() = " << kten::cpu() << ", gpu() = " << kten::gpu() << ", gpu(1) = " << kten::gpu(1) << '\n';
    std::cout << "num_gpus() = " << kten::num_gpus() << '\n';
    std::cout << "try_gpu() = " << kten::try_gpu() << ", try_gpu(10) = " << kten::try_gpu(10) << ", try_all_gpus() =";
    for (const auto& g : kten::try_all_gpus()) std::cout << ' ' << g;
    std::cout << "\nThis tour runs on " << d << ".\n";

    section("Tensors and devices");
    auto x = kten::tensor({1.f, 2.f, 3.f});
    std::cout << "x = tensor({1, 2, 3}) lives on " << x.device() << " by default.\n";
    auto X = kten::ones({2, 3}, d);
    std::cout << "X = ones({2, 3}, " << d << "):\n" << X << '\n';
    auto Y = kten::rand({2, 3}, d, 42);
    std::cout << "Y = rand({2, 3}, " << d << ", seed 42) (the same numbers on every device):\n" << Y << '\n';

    section("Copying");
    auto Z = X.copyto(d);
    std::cout << "Z = X.copyto(" << d << "):\n" << Z << '\n';
    std::cout << "Y + Z computes on " << (Y + Z).device() << ":\n" << Y + Z << '\n';
    std::cout << "Z.to(" << d << ") shares storage with Z: " << std::boolalpha << Z.to(d).shares_storage_with(Z)
              << "; Z.copyto(" << d << ") does: " << Z.copyto(d).shares_storage_with(Z) << '\n';

    section("Data stays where it is: no implicit copies");
    try {
      kten::ones({2, 3}, kten::gpu(kten::num_gpus()));
    } catch (const kten::DeviceUnavailable& e) {
      std::cout << "ones({2, 3}, gpu(" << kten::num_gpus() << ")) -> kten::DeviceUnavailable:\n  " << e.what() << '\n';
    }
    const kten::Device other = d.is_cpu() ? kten::try_gpu() : kten::cpu();
    if (other != d) {
      try {
        auto bad = X + X.to(other);
        (void)bad;
      } catch (const kten::DeviceMismatch& e) {
        std::cout << "X (on " << d << ") + X.to(" << other << ") -> kten::DeviceMismatch:\n  " << e.what() << '\n';
      }
    } else {
      std::cout << "Mixing devices throws kten::DeviceMismatch; this machine has no second device to show it\n"
                   "(run with KTEN_EMULATE_GPUS=2 to see it with emulated GPUs).\n";
    }

    section("Computing on the device, reading once");
    kten::reset_stats();
    auto log = kten::zeros({}, d);
    auto W = kten::rand({64, 64}, d, 7);
    for (int step = 0; step < 100; ++step) log = log + kten::norm(kten::matmul(W, W));
    auto s = kten::stats();
    std::cout << "100 matmul + norm steps with the norm logged on " << d << ": " << s.host_syncs
              << " host syncs, " << s.transfers() << " transfers so far.\n";
    std::cout << "Summed norm read once: " << log.item<float>() << " (now " << kten::stats().host_syncs
              << " sync, " << kten::stats().bytes_transferred() << " bytes moved)\n";

    section("Neural networks and GPUs");
    kten::nn::Sequential net;
    net.add(kten::nn::Linear(1));  // in_features inferred at the first call (LazyLinear / Dense(1))
    net.to(d);
    auto out = net(X);
    std::cout << "net = Sequential(Linear(1)), net.to(" << d << "), net(X):\n" << out << '\n';
    std::cout << "The parameters live on " << net.parameters()[0].device() << ": weight "
              << kten::shape_str(net.parameters()[0].shape()) << ", bias " << kten::shape_str(net.parameters()[1].shape())
              << '\n';
    if (other != d) {
      try {
        net(X.to(other));
      } catch (const kten::DeviceMismatch& e) {
        std::cout << "net(X.to(" << other << ")) -> kten::DeviceMismatch:\n  " << e.what() << '\n';
      }
    }

    section("Timing a large matmul");
    report_matmul(kten::cpu(), 512, 3);
    if (d.is_gpu() && !kten::gpus_are_emulated()) report_matmul(d, 2048, 10);
    else std::cout << "  (no real GPU here: the GPU line appears when one is present)\n";
  } catch (const kten::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
