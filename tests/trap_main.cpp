// The trap mode (KTEN_TRAP_HOST_ACCESS=1) and an application's own Kokkos kernel, in a process of
// its own (the mode is the first argument), on an emulated GPU with its memory trapped:
//   fault   the kernel reads an emulated-GPU tensor's view() outside any scope: the process dies
//           of the fault, after a message that names it and says how to run such code
//   scope   the same kernel inside a kten::EmulatedGpuAccess: it runs, and prints the sum
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
  std::cerr << "kten-trap fault | scope\n";
  return 2;
}
