// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// An application that initialises Kokkos itself, keeps its own Kokkos::View, and lets kten
// compute on it in place: kten must neither re-initialise Kokkos nor copy the data.
#include <cmath>
#include <iostream>

#include <Kokkos_Core.hpp>
#include <kten/kokkos.hpp>
#include <kten/kten.hpp>

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int status = 0;
  {
    kten::ScopeGuard guard(argc, argv);  // Kokkos is already up: this guard owns nothing
    Kokkos::View<double*, Kokkos::HostSpace> field("application field", 1000);
    Kokkos::parallel_for(
        "fill", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, 1000),
        KOKKOS_LAMBDA(int i) { field(i) = 0.001 * i; });
    Kokkos::fence();

    auto t = kten::from_view(field);  // no copy: the tensor is the application's memory
    const double total = kten::sum(t * 2.0).item<double>();
    const double expected = 2 * 0.001 * 999 * 1000 / 2;
    std::cout << "kten " << kten::version() << " on Kokkos " << kten::kokkos_version() << ", device "
              << t.device() << ": 2 * sum(field) = " << total << " (expected " << expected << ")\n";
    std::cout << "guard owns Kokkos: " << std::boolalpha << guard.owns_kokkos()
              << ", tensor shares the View: " << (t.data() == field.data()) << '\n';
    if (std::fabs(total - expected) > 1e-9 || guard.owns_kokkos() || t.data() != field.data()) status = 1;
    // kten::onnx links through kten::kten alone (ktenConfig.cmake finds ONNX and protobuf): a
    // Linear written and read back computes the same.
    if (kten::onnx::available()) {
      kten::nn::Linear fc(3, 2);
      const kten::Tensor x = kten::ones({4, 3});
      kten::onnx::save("consumer-linear.onnx", fc, {x});
      auto net = kten::onnx::load("consumer-linear.onnx");
      const double diff = kten::max(kten::abs(net(x) - fc(x))).item<double>();
      std::cout << "ONNX round trip of a Linear: largest difference " << diff << '\n';
      if (diff != 0) status = 1;
    }
  }
  Kokkos::finalize();
  return status;
}
