// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What every fuzzer runs under, whoever starts it (make fuzz, a CTest, by hand; an environment
// variable given still wins). A model may ask for terabytes, which on a real machine is kten's
// OutOfMemory, not a finding: ASan returns null past 1 GiB (below libFuzzer's own 2 GiB malloc
// limit) and kten reports OutOfMemory; the emulated GPU, whose trapped arena is not ASan's memory,
// gets 1 GiB (KTEN_EMULATED_GPU_MIB) for the same reason. One thread: a fuzzer is single-threaded
// and `make fuzz` runs one per core, where OpenMP threads spinning beside each other halved the
// executions per second.
#include <cstdlib>

extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("KTEN_EMULATED_GPU_MIB", "1024", 0);
  if (!std::getenv("OMP_NUM_THREADS")) setenv("KOKKOS_NUM_THREADS", "1", 0);  // read when Kokkos starts
  return 0;
}
