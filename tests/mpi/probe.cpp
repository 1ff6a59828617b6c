// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::dist's lifetime and the failures that must end an MPI job with a message instead of
// leaving ranks waiting for ever (CTest checks the exit code or the message; see CMakeLists.txt):
//   application  the application runs MPI itself: kten uses it, finalises nothing, and the
//                application's MPI still works afterwards
//   uncaught     rank 1 dies of an exception while rank 0 waits in a collective
//   inside       rank 1 fails inside a collective's payload phase (white box: the guard every
//                collective runs its data movement in), while rank 0 waits in a collective
//   stall        rank 1 never arrives; rank 0 aborts after KTEN_STALL_ABORT_SECONDS
#include <mpi.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <kten/dist.hpp>
#include <kten/kten.hpp>

#include "dist/state.hpp"

namespace {

int application_owns_mpi(int argc, char* argv[]) {
  MPI_Init(&argc, &argv);
  {
    kten::dist::Guard guard(argc, argv);
    const kten::Tensor t = kten::ones({3});
    kten::dist::world()->all_reduce(t);
    if (guard.owns_mpi() || t.to_vector<float>()[0] != static_cast<float>(kten::dist::world()->size())) return 1;
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  int sum = 0, one = 1;
  if (!finalized) MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Finalize();
  if (finalized || sum != size) return 1;
  std::cout << "the application's MPI outlived kten::dist\n";
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "application") return application_owns_mpi(argc, argv);
  kten::dist::Guard guard(argc, argv);
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
