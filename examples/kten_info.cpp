// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
    // ONNX operators kten::onnx::load supports, with their opsets
    std::cout << "onnx ops   :";
    if (!kten::onnx::available()) std::cout << " none (built without ONNX: KTEN_ENABLE_ONNX=OFF)";
    for (const auto& op : kten::onnx::supported_ops())
      std::cout << ' ' << op.name << '(' << op.first_opset << '-' << op.last_opset << ')';
    std::cout << '\n';
  } catch (const kten::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
