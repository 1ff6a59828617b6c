// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The command-line options both perf programs take: --quick, --kten-device cpu|gpu, --out DIR.
#include <string>

#include <kten/device.hpp>

namespace kten::perf {

/// \brief What to run, where, and where the results go.
struct Config {
  bool quick = false;
  Device device = cpu();  // the programs pick try_gpu() once Kokkos is up
  std::string out = ".";
};

/// \brief Consumes argv[i] (and its value) when it is one of the shared options; false otherwise.
inline bool parse_option(Config& config, int& i, int argc, char* argv[]) {
  const std::string a = argv[i];
  if (a == "--quick") config.quick = true;
  else if (a == "--kten-device" && i + 1 < argc) config.device = std::string(argv[++i]) == "cpu" ? cpu() : gpu();
  else if (a == "--out" && i + 1 < argc) config.out = argv[++i];
  else return false;
  return true;
}

}  // namespace kten::perf
