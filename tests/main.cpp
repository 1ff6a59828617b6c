// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The one test main: Kokkos is initialised once for all test cases, then Catch2 runs. Listing the
// tests (what CTest does to discover them) needs no Kokkos, so it works where the build's GPU
// backend cannot start (a CUDA build on a machine without a GPU).
#include <cstring>
#include <iostream>
#include <memory>

#include <catch2/catch_session.hpp>

#include <kten/kten.hpp>

#include "test_run.hpp"

int main(int argc, char* argv[]) {
  kten::test::configure_run();
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  std::unique_ptr<kten::ScopeGuard> guard;
  try {  // a GPU build on a node without a usable GPU throws here: say why, no abort
    if (!listing) guard = std::make_unique<kten::ScopeGuard>(argc, argv);
  } catch (const kten::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return Catch::Session().run(argc, argv);
}
