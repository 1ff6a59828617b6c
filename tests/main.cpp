// The one test main: Kokkos is initialised once for all test cases, then Catch2 runs.
#include <catch2/catch_session.hpp>

#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  kten::ScopeGuard guard(argc, argv);
  return Catch::Session().run(argc, argv);
}
