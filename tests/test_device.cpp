// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Devices: naming, comparison, discovery and availability.
#include <cstdlib>
#include <sstream>

#include <Kokkos_Core.hpp>

#include "support.hpp"

using namespace kten;

TEST_CASE("devices print like the chapter and compare by kind and index", "[device]") {
  std::ostringstream os;
  os << cpu() << ' ' << gpu() << ' ' << gpu(1) << ' ' << cpu(3);
  CHECK(os.str() == "cpu(0) gpu(0) gpu(1) cpu(0)");
  CHECK(cpu(5) == cpu());
  CHECK(gpu() == gpu(0));
  CHECK(gpu(0) != gpu(1));
  CHECK(gpu(0) != cpu(0));
  CHECK(Device() == cpu());
  CHECK(gpu(2).str() == "gpu(2)");
}

TEST_CASE("try_gpu and try_all_gpus never throw and fall back to cpu", "[device]") {
  const int n = num_gpus();
  CHECK(try_gpu(n) == cpu());
  CHECK(try_gpu(-1) == cpu());
  CHECK(try_gpu() == (n > 0 ? gpu(0) : cpu()));
  const auto all = try_all_gpus();
  if (n == 0) {
    CHECK(all == std::vector<Device>{cpu()});
  } else {
    REQUIRE(static_cast<int>(all.size()) == n);
    for (int i = 0; i < n; ++i) CHECK(all[i] == gpu(i));
  }
}

TEST_CASE("using a GPU that does not exist throws DeviceUnavailable naming it", "[device]") {
  const Device missing = gpu(num_gpus() + 6);
  try {
    ones({2}, missing);
    FAIL("expected DeviceUnavailable");
  } catch (const DeviceUnavailable& e) {
    const std::string msg = e.what();
    CHECK(msg.find(missing.str()) != std::string::npos);
    CHECK(msg.find("not available") != std::string::npos);
  }
  CHECK_THROWS_AS(tensor({1.f}).to(missing), DeviceUnavailable);
  CHECK_THROWS_AS(require_available(missing), Error);
  CHECK_NOTHROW(require_available(cpu()));
}

TEST_CASE("the device under test is usable and synchronize() fences it", "[device]") {
  const Device d = test::device();
  CHECK_NOTHROW(require_available(d));
  auto x = ones({1000}, d);
  synchronize(d);
  CHECK(x.device() == d);
}

TEST_CASE("ScopeGuard leaves an already initialised Kokkos alone", "[device]") {
  int argc = 0;
  ScopeGuard inner(argc, nullptr);  // the test main initialised Kokkos: this guard must not own it
  CHECK_FALSE(inner.owns_kokkos());
  CHECK(Kokkos::is_initialized());
}

TEST_CASE("the device report names versions, backends and threads", "[device][info]") {
  std::ostringstream os;
  print_device_report(os);
  const std::string report = os.str();
  CHECK(report.find("kten " + version()) != std::string::npos);
  CHECK(report.find("Kokkos " + kokkos_version()) != std::string::npos);
  CHECK(report.find("threads") != std::string::npos);
  CHECK_FALSE(enabled_backends().empty());
  CHECK(host_threads() >= 1);
  if (gpus_are_emulated()) CHECK(report.find("EMULATED") != std::string::npos);
}

TEST_CASE("the device report says what to set on a shared or oversubscribed node", "[device][info]") {
  std::ostringstream os;
  print_device_report(os);
  const std::string report = os.str();
  CHECK(report.find("OMP_WAIT_POLICY=") != std::string::npos);
  // Unless the run set a wait policy and the node is idle, the advice is there.
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (!policy) CHECK(report.find("set OMP_WAIT_POLICY=passive") != std::string::npos);
}

TEST_CASE("the device report names the vector ISA and the matmul micro-kernel in use", "[device][info]") {
  std::ostringstream os;
  print_device_report(os);
  const std::string report = os.str(), isa = cpu_vector_isa(), kernel = gemm_micro_kernel();
  CHECK((isa == "AVX-512" || isa == "AVX2+FMA" || isa == "generic 128-bit"));
#if defined(KTEN_EXPECTED_HOST_ISA)  // the host architecture the configure chose (tests/CMakeLists.txt)
  CHECK(isa == KTEN_EXPECTED_HOST_ISA);
#endif
  CHECK(kernel.find("float32 ") != std::string::npos);
  CHECK(kernel.find("float64 ") != std::string::npos);
  CHECK(report.find(isa) != std::string::npos);
  CHECK(report.find(kernel) != std::string::npos);
  CHECK(report.find(std::to_string(host_serial_grain())) != std::string::npos);
}
