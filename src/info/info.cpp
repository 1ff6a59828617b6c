// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The device report: kten's nvidia-smi.
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include <kten/device.hpp>
#include <kten/info.hpp>
#include "core/kokkos_compat.hpp"

#include "backend_glue.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/host_isa.hpp"
#include "dist/hooks.hpp"
#include "core/kokkos_lifetime.hpp"

namespace kten {

std::string version() { return KTEN_VERSION; }

std::string kokkos_version() {
  const int v = detail::compat::kokkos_version;
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::vector<std::string> enabled_backends() {
  std::vector<std::string> names;
#define KTEN_NOTE_SPACE(space) names.push_back(space::name())
  if (const char* gpu = detail::gpu_backend_name()) names.push_back(gpu);
#ifdef KOKKOS_ENABLE_OPENMP
  KTEN_NOTE_SPACE(Kokkos::OpenMP);
#endif
#ifdef KOKKOS_ENABLE_THREADS
  KTEN_NOTE_SPACE(Kokkos::Threads);
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  KTEN_NOTE_SPACE(Kokkos::Serial);
#endif
#undef KTEN_NOTE_SPACE
  return names;
}

int host_threads() {
  detail::ensure_kokkos();  // the host pool's size is Kokkos'
  return detail::compat::host_concurrency();
}
std::string cpu_model() { return detail::host_cpu_model(); }
std::vector<GpuProperties> gpu_properties() { return detail::gpu_device_properties(); }
std::string cpu_vector_isa() { return detail::HostIsa::name; }
std::int64_t host_serial_grain() { return detail::host_serial_grain; }

std::string gemm_micro_kernel() {
  using F = detail::HostGemmBlocking<float>;
  using D = detail::HostGemmBlocking<double>;
  return "float32 " + std::to_string(F::rows) + "x" + std::to_string(F::cols) + ", float64 " + std::to_string(D::rows) +
         "x" + std::to_string(D::cols) + " register tiles; k-slices " + std::to_string(F::kc) + " / " +
         std::to_string(D::kc) + ", column blocks " + std::to_string(F::nc) + " / " + std::to_string(D::nc);
}

namespace {
// What an oversubscribed or shared node does to the OpenMP pool, and what to set: idle pool
// threads spin (libgomp's default) for cores that other processes need, which made a 200-step Adam
// phase take 1.7-20 s instead of 62-84 ms on a shared node.
std::string thread_advice() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::ostringstream s;
  s << "OMP_WAIT_POLICY=" << (policy ? policy : "unset (idle pool threads spin a while)");
  double load = 0;
  const unsigned cores = std::thread::hardware_concurrency();
  const bool busy = ::getloadavg(&load, 1) == 1 && cores > 0 && load + host_threads() > cores + 0.5;
  if (busy)
    s << "; *** load " << std::fixed << std::setprecision(1) << load << " on " << cores
      << " cores: this node is shared or oversubscribed ***";
  const bool passive = policy && std::string(policy) == "passive";
  if (!passive)
    s << "\n             on a shared or oversubscribed node set OMP_WAIT_POLICY=passive: spinning threads"
         "\n             take the cores other processes need";
  if (busy) s << "\n             and set OMP_NUM_THREADS to at most the free cores";
  return s.str();
}
}  // namespace

void print_device_report(std::ostream& os) {
  os << "kten " << version() << "  (Kokkos " << kokkos_version() << ")\n";
  os << "backends   :";
  for (const auto& b : enabled_backends()) os << ' ' << b;
  os << "\nhost       : cpu(0) = " << cpu_model() << ", " << host_threads() << " threads ("
     << Kokkos::DefaultHostExecutionSpace::name() << ")\n";
  os << "threads    : " << thread_advice() << '\n';
  os << "host ISA   : " << cpu_vector_isa() << " (as compiled); matmul " << gemm_micro_kernel()
     << "\n             operations under " << host_serial_grain() << " elements run on the calling thread\n";
  os << "MPI        : " << detail::mpi_report() << '\n';
  if (gpus_are_emulated()) {
    os << "GPUs       : *** EMULATED *** KTEN_EMULATE_GPUS=" << num_gpus() << ": gpu(0) to gpu("
       << num_gpus() - 1 << ") are host-memory stand-ins for testing device rules, not GPUs.\n"
       << "             Unset KTEN_EMULATE_GPUS for real devices.\n";
    return;
  }
  const auto gpus = gpu_properties();
  if (detail::gpu_backend_name() == nullptr) {
    os << "GPUs       : none (host-only build: its Kokkos has no GPU backend)\n";
    return;
  }
  if (gpus.empty()) {
    os << "GPUs       : none found (this " << detail::gpu_backend_name() << " build runs no kernels without one)\n";
    return;
  }
  os << "GPUs       : " << gpus.size() << " visible; kten drives one per process (one MPI rank per GPU)\n";
  const bool amd = std::string(detail::gpu_backend_name()) == "HIP";  // compute units, not SMs
  for (const auto& g : gpus) {
    os << "  " << (g.used_by_kten ? "gpu(0) = " : "         ") << detail::gpu_backend_name() << ' ' << g.ordinal << ": " << g.name
       << ", " << std::fixed << std::setprecision(1) << static_cast<double>(g.memory_bytes) / (1 << 30)
       << " GiB, compute capability " << g.compute_major << '.' << g.compute_minor << ", " << g.multiprocessors
       << (amd ? " CUs" : " SMs") << (g.used_by_kten ? "" : "  (not used by this process)") << '\n';
  }
}

}  // namespace kten
