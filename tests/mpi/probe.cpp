// Failures that must end an MPI job with a message instead of leaving ranks waiting for ever
// (CTest checks the message; see CMakeLists.txt):
//   uncaught  rank 1 dies of an exception while rank 0 waits in a collective
//   inside    rank 1 fails inside a collective's payload phase (white box: the guard every
//             collective runs its data movement in), while rank 0 waits in a collective
//   stall     rank 1 never arrives; rank 0 aborts after KTEN_STALL_ABORT_SECONDS
#include <chrono>
#include <string>
#include <thread>

#include <kten/dist.hpp>
#include <kten/kten.hpp>

#include "../../src/dist/state.hpp"

int main(int argc, char* argv[]) {
  kten::dist::Guard guard(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto world = kten::dist::world();
  const kten::Tensor t = kten::ones({4});
  if (world->rank() == 1) {
    if (mode == "uncaught") throw kten::Error("probe: rank 1 fails alone");
    if (mode == "inside")
      kten::dist::detail::or_abort("all_reduce", [] { throw kten::Error("probe: a copy failed on rank 1"); });
    std::this_thread::sleep_for(std::chrono::seconds(50));  // "stall": far past the abort time
  }
  world->all_reduce(t);
  return 0;
}
