// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The harness's command line, for either reference (the reference's file defines run_rows):
//
//   PROGRAM [--self-test] [--coverage] [--row SUBSTRING] [--shard I/N] [--seed N] [--cases K] [--list] [--verbose]
//
// --row runs the rows whose name contains SUBSTRING; --shard I/N (1 <= I <= N) the I-th of N
// interleaved parts of the rows (CTest runs the parts in parallel); --seed changes the base seed (every case's seed
// derives from it and the row's name, so a failure reproduces with --row and the seed it prints);
// --cases K multiplies the number of cases per pass; --coverage checks that every public op of
// <kten/ops.hpp> and <kten/tensor.hpp> is registered and every registered op has a row, and that
// the check reports a planted op without a row.
#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "../test_run.hpp"
#include "harness.hpp"

namespace kten::harness {
namespace {

constexpr std::uint64_t kDefaultSeed = 20240517;

int usage(const char* argv0) {
  std::cerr << "usage: " << argv0
            << " [--self-test] [--coverage] [--row SUBSTRING] [--shard I/N] [--seed N] [--cases K] [--list] [--verbose]\n";
  return 2;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The coverage check on the public headers, then on a planted op: a declaration nobody registered
// and a registered op without a row must both be reported.
int coverage(const std::string& program, bool verbose) {
  const std::string headers = read_file(KTEN_INCLUDE_DIR "/kten/ops.hpp") + read_file(KTEN_INCLUDE_DIR "/kten/tensor.hpp");
  const std::vector<Row> rows = [] {
    std::vector<Row> all = op_table();
    for (Row& row : layer_table()) all.push_back(std::move(row));
    return all;
  }();
  const std::vector<std::string> publics = public_ops(headers);
  const std::vector<std::string> missing = missing_rows(headers, ops::registry(), rows);
  if (verbose)
    for (const std::string& api : publics) std::cout << "public op " << api << "\n";
  for (const std::string& m : missing) std::cout << "MISSING " << m << "\n";
  std::cout << program << ": coverage: " << publics.size() << " public ops in <kten/ops.hpp> and <kten/tensor.hpp>, "
            << ops::registry().size() << " registered ops, " << rows.size() << " rows; " << missing.size() << " missing\n";

  std::vector<ops::OpDef> planted = ops::registry();
  planted.push_back({"planted", "planted(Tensor)", 1, {ops::Domain::real}, ops::DTypes::floating, true,
                     [](const std::vector<Tensor>& x, const ops::OpAttrs&) { return x[0]; }});
  const std::vector<std::string> found =
      missing_rows(headers + "\nTensor frobnicate(const Tensor& x, double amount = 1);\n", planted, rows);
  const auto reported = [&](const std::string& what) {
    for (const std::string& f : found)
      if (f.find(what) != std::string::npos) return true;
    return false;
  };
  const bool planted_reported = reported("frobnicate(Tensor,double)") && reported("registered op planted");
  std::cout << program << ": coverage: a planted public op and a planted registered op without a row are "
            << (planted_reported ? "reported" : "NOT reported") << "\n";
  return missing.empty() && planted_reported && found.size() == missing.size() + 2 ? 0 : 1;
}

}  // namespace

int run_main(int argc, char* argv[], const std::string& program, const std::string& reference) {
  // The coverage check reads headers and the registry, and needs no device: it runs before kten
  // starts, so a GPU build checks it on a machine without a GPU too.
  const auto given = [&](const char* option) { return std::find(argv + 1, argv + argc, std::string(option)) != argv + argc; };
  if (given("--coverage")) return coverage(program, given("--verbose"));
  kten::test::configure_run();
  kten::ScopeGuard guard(argc, argv);
  Config config;
  config.seed = kDefaultSeed;
  config.reference = reference;
  bool self_test = false, list = false;
  std::string only;
  int shard = 1, shards = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--self-test") self_test = true;
    else if (arg == "--list") list = true;
    else if (arg == "--verbose") config.verbose = true;
    else if (arg == "--row" && has_value) only = argv[++i];
    else if (arg == "--shard" && has_value) {
      char slash = 0;
      std::istringstream in(argv[++i]);
      if (!(in >> shard >> slash >> shards) || slash != '/' || !in.eof() || shards < 1 || shard < 1 || shard > shards)
        return usage(argv[0]);
    }
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
  std::cout << program << ": kten on " << config.device.str()
            << (kten::gpus_are_emulated() && config.device.is_gpu() ? " (emulated)" : "") << " against " << reference
            << ", base seed " << config.seed << "\n";

  if (self_test) return run_self_test(config, std::cout);

  std::vector<Row> rows;
  std::size_t index = 0;  // every row's place in the tables, whichever rows --row keeps
  for (std::vector<Row> table : {op_table(), layer_table()})
    for (Row& row : table)
      if (index++ % static_cast<std::size_t>(shards) == static_cast<std::size_t>(shard - 1) &&
          (only.empty() || row.name.find(only) != std::string::npos))
        rows.push_back(std::move(row));
  if (list) {
    for (const Row& row : rows)
      std::cout << row.name << (row.op.empty() ? "" : " [" + row.op + "]") << " (arity " << row.shapes.arity
                << (row.differentiable ? "" : ", values only") << (row.fd ? "" : ", no finite differences") << ")\n";
    return 0;
  }
  if (rows.empty()) {
    std::cerr << program << ": no row matches '" << only << "' (shard " << shard << "/" << shards << ")\n";
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  const Summary s = run_rows(rows, config, std::cout);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << program << ": " << s.rows << " rows, " << s.cases << " cases on " << config.device.str() << ": "
            << s.value_checks << " value comparisons, " << s.gradient_checks << " gradient comparisons, " << s.fd_points
            << " finite-difference points, " << s.refused << " cases refused by both; " << s.failures.size()
            << " failures, " << seconds << " s\n";
  for (const Row& row : rows) {
    if (!row.special_grad) std::cout << "  " << row.name << ": gradients at NaN/inf not compared (" << row.special_grad_note << ")\n";
    if (!row.infinities) std::cout << "  " << row.name << ": NaN planted, no infinities (" << row.infinities_note << ")\n";
  }
  return s.failures.empty() ? 0 : 1;
}

}  // namespace kten::harness
