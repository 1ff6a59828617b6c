// kten-torch-harness: every row of ops_table.cpp and layers_table.cpp against PyTorch on the device
// under test (CTest's KTEN_TEST_RUN, as for the Catch2 suite), or the self-test of planted faults.
//
//   kten-torch-harness [--self-test] [--row SUBSTRING] [--seed N] [--cases K] [--list] [--verbose]
//
// --row runs the rows whose name contains SUBSTRING; --seed changes the base seed (every case's seed
// derives from it and the row's name, so a failure reproduces with --row and the seed it prints);
// --cases K multiplies the number of cases per pass.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <ATen/Parallel.h>
#include <torch/version.h>

#include "../test_run.hpp"
#include "harness.hpp"

namespace {

constexpr std::uint64_t kDefaultSeed = 20240517;

int usage(const char* argv0) {
  std::cerr << "usage: " << argv0 << " [--self-test] [--row SUBSTRING] [--seed N] [--cases K] [--list] [--verbose]\n";
  return 2;
}

}  // namespace

int main(int argc, char* argv[]) {
  namespace th = kten::torch_harness;
  kten::test::configure_run();
  kten::ScopeGuard guard(argc, argv);
  at::set_num_threads(1);  // kten's kernels have the cores; PyTorch is the slow, simple reference

  th::Config config;
  config.seed = kDefaultSeed;
  bool self_test = false, list = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--self-test") self_test = true;
    else if (arg == "--list") list = true;
    else if (arg == "--verbose") config.verbose = true;
    else if (arg == "--row" && has_value) only = argv[++i];
    else if (arg == "--seed" && has_value) config.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--cases" && has_value) {
      const int k = std::atoi(argv[++i]);
      if (k < 1) return usage(argv[0]);
      for (int* n : {&config.random_cases, &config.strided_cases, &config.large_cases, &config.empty_cases, &config.special_cases, &config.fd_cases}) *n *= k;
    } else return usage(argv[0]);
  }
  const char* device = std::getenv("KTEN_TEST_DEVICE");
  config.device = device && std::string(device) == "gpu" ? kten::gpu(0) : kten::cpu();
  kten::require_available(config.device);
  std::cout << "kten-torch-harness: kten against PyTorch " << TORCH_VERSION << " on " << config.device.str()
            << (kten::gpus_are_emulated() && config.device.is_gpu() ? " (emulated)" : "") << ", base seed " << config.seed
            << "\n";

  if (self_test) return th::run_self_test(config, std::cout);

  std::vector<th::Row> rows;
  for (std::vector<th::Row> table : {th::op_table(), th::layer_table()})
    for (th::Row& row : table)
      if (only.empty() || row.name.find(only) != std::string::npos) rows.push_back(std::move(row));
  if (list) {
    for (const th::Row& row : rows)
      std::cout << row.name << " (arity " << row.shapes.arity << (row.differentiable ? "" : ", values only")
                << (row.fd ? "" : ", no finite differences") << ")\n";
    return 0;
  }
  if (rows.empty()) {
    std::cerr << "kten-torch-harness: no row matches '" << only << "'\n";
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  const th::Summary s = th::run_rows(rows, config, std::cout);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "kten-torch-harness: " << s.rows << " rows, " << s.cases << " cases on " << config.device.str() << ": "
            << s.value_checks << " value comparisons, " << s.gradient_checks << " gradient comparisons, " << s.fd_points
            << " finite-difference points, " << s.refused << " cases refused by both; " << s.failures.size()
            << " failures, " << seconds << " s\n";
  for (const th::Row& row : rows) {
    if (!row.special_grad) std::cout << "  " << row.name << ": gradients at NaN/inf not compared (" << row.special_grad_note << ")\n";
    if (!row.infinities) std::cout << "  " << row.name << ": NaN planted, no infinities (" << row.infinities_note << ")\n";
  }
  return s.failures.empty() ? 0 : 1;
}
