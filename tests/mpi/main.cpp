// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The MPI test main: kten::dist and Kokkos once for all test cases, Catch2 on every rank. Test
// cases run in the same order on every rank; the exit code is the worst of all ranks.
#include <catch2/catch_session.hpp>

#include <kten/dist.hpp>
#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  kten::dist::Guard guard(argc, argv);
  Catch::Session session;
  if (const int bad_command_line = session.applyCommandLine(argc, argv)) return bad_command_line;
  session.configData().runOrder = Catch::TestRunOrder::Declared;  // the same collectives on every rank
  const int failed = session.run();
  const kten::Tensor worst = kten::full({1}, failed);
  kten::dist::world()->all_reduce(worst, kten::dist::ReduceOp::max);
  return static_cast<int>(worst.item<float>());
}
