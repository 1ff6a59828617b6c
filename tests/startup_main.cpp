// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Starts kten like an application with options of its own: ScopeGuard must pass Kokkos only its
// --kokkos-* flags, leave the rest to the application, and report a bad setting as a kten::Error.
#include <iostream>

#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  try {
    kten::ScopeGuard guard(argc, argv);
    std::cout << "application sees:";
    for (int i = 1; i < argc; ++i) std::cout << ' ' << argv[i];
    std::cout << '\n' << "host threads: " << kten::host_threads() << '\n';
  } catch (const kten::Error& e) {
    std::cout << "kten::Error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
