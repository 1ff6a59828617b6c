// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file info.hpp
/// \brief What this build and this machine offer: the report `kten-info` prints.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace kten {

/// \brief One GPU as its vendor runtime describes it.
struct GpuProperties {
  int ordinal = 0;                 ///< \brief the vendor runtime's device number
  std::string name;                ///< \brief e.g. "NVIDIA H100 80GB HBM3", or AMD's "gfx90a:sramecc+:xnack-"
  std::size_t memory_bytes = 0;    ///< \brief global memory
  int compute_major = 0;           ///< \brief compute capability, major
  int compute_minor = 0;           ///< \brief compute capability, minor
  int multiprocessors = 0;         ///< \brief SM count (AMD: compute units)
  bool used_by_kten = false;       ///< \brief true for the device kten drives as gpu(0)
};

/// \brief kten's version, "major.minor.patch".
std::string version();
/// \brief The Kokkos release kten was built against, "major.minor.patch".
std::string kokkos_version();
/// \brief Kokkos execution spaces enabled in this build, e.g. {"OpenMP", "Serial"} or {"Cuda", "OpenMP"}.
std::vector<std::string> enabled_backends();
/// \brief Threads of the host execution space (Kokkos must be initialised).
int host_threads();
/// \brief The host CPU's model name, from /proc/cpuinfo where available.
std::string cpu_model();
/// \brief The vector instruction set kten's host kernels were compiled for: "AVX-512",
/// "AVX2+FMA" or "generic 128-bit" (set by the architecture the build targets, not the machine).
std::string cpu_vector_isa();
/// \brief The host matrix-product micro-kernel and blocking, e.g.
/// "float32 10x32, float64 6x24 register tiles; k-slices 384 / 384, column blocks 480 / 240".
std::string gemm_micro_kernel();
/// \brief Elements below which a cpu() operation runs on the calling thread, without waking the
/// other host threads.
std::int64_t host_serial_grain();
/// \brief Every GPU the vendor runtime shows, CUDA or HIP (empty in host-only builds or without GPUs).
std::vector<GpuProperties> gpu_properties();
/// \brief Writes the device report (the library's nvidia-smi) to `os`.
void print_device_report(std::ostream& os);

}  // namespace kten
