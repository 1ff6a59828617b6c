// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host glue: what the CPU is called.
#include <fstream>
#include <string>

#include "backend_glue.hpp"

namespace kten::detail {

std::string host_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

}  // namespace kten::detail
