// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The trap mode (KTEN_TRAP_HOST_ACCESS=1) and an application's own Kokkos kernel, in a process of
// its own (the mode is the first argument), on an emulated GPU with its memory trapped:
//   fault   the kernel reads an emulated-GPU tensor's view() outside any scope: the process dies
//           of the fault, after a message that names it and says how to run such code
//   scope   the same kernel inside a kten::EmulatedGpuAccess: it runs, and prints the sum
//   capacity  with KTEN_EMULATED_GPU_MIB=1: a second block of 600 kB is OutOfMemory, and fits
//           once the first is freed (kten's allocator empties its cache and tries again)
#include <cstring>
#include <iostream>

#include <kten/kokkos.hpp>
#include <kten/kten.hpp>

namespace {

double own_kernel_sum(const kten::Tensor& t) {
  const auto v = t.view<float*, Kokkos::HostSpace>();
  double sum = 0;
  Kokkos::parallel_reduce(
      "app::sum", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, v.extent(0)),
      [=](int i, double& acc) { acc += v(i); }, sum);
  return sum;
}

}  // namespace

int main(int argc, char* argv[]) {
  const char* mode = argc > 1 ? argv[1] : "";
  kten::ScopeGuard guard;
  const kten::Tensor t = kten::full({1000}, 0.5, kten::gpu(0));
  if (std::strcmp(mode, "fault") == 0) {
    std::cout << "sum " << own_kernel_sum(t) << '\n';  // never printed: the read faults
    return 0;
  }
  if (std::strcmp(mode, "scope") == 0) {
    kten::EmulatedGpuAccess open;
    std::cout << "sum " << own_kernel_sum(t) << '\n';
    return 0;
  }
  if (std::strcmp(mode, "capacity") == 0) {
    kten::Tensor first = kten::empty({150000}, kten::gpu(0));  // 600 kB of float32
    try {
      kten::empty({150000}, kten::gpu(0));
      std::cout << "a second block fitted\n";
      return 1;
    } catch (const kten::OutOfMemory& e) {
      std::cout << e.what() << '\n';
    }
    first = kten::Tensor();
    const kten::Tensor second = kten::full({150000}, 2.0, kten::gpu(0));
    std::cout << "after freeing: sum " << kten::sum(second).item<double>() << '\n';
    return 0;
  }
  std::cerr << "kten-trap fault | scope | capacity\n";
  return 2;
}
