// kten-info: the library's nvidia-smi. kten and Kokkos versions, backends, host threads, GPUs.
#include <iostream>

#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  try {
    kten::ScopeGuard guard(argc, argv);
    kten::print_device_report(std::cout);
    std::cout << "devices    :";
    for (const auto& d : kten::try_all_gpus()) std::cout << ' ' << d;
    std::cout << "  (try_gpu() = " << kten::try_gpu() << ")\n";
  } catch (const kten::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
