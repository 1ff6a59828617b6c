// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: which GPU vendor this build's kernels are shaped for. The vendor-shaped tuning itself
// (warp width, the GEMM's lane layout, gemv lanes, launch bounds) is GpuKernelShape<vendor> in
// ops/gemm_kernel.hpp; a Kokkos device backend without a vendor here is a compile error, never a
// silent fall back to another vendor's shapes.

#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_HIP)
#include "hip/kokkos_hip.hpp"  // backends/: Kokkos' HIP spellings, 3.x and 4.x
#endif

namespace kten::detail {

/// \brief The GPU vendors whose SIMT width kten's kernels are shaped for.
enum class GpuVendor { nvidia, amd };

// this_gpu_vendor: the vendor this build's GPU backend runs on; host-only builds (emulated GPUs,
// host tests) take NVIDIA's shapes, and the host tests check both. this_gpu_warp_size: the
// hardware warp (wavefront) width, as Kokkos knows it; the shapes must agree (ops/gemm_kernel.hpp).
#if defined(KOKKOS_ENABLE_HIP)
inline constexpr GpuVendor this_gpu_vendor = GpuVendor::amd;
inline constexpr int this_gpu_warp_size = hip_warp_size;
#elif defined(KOKKOS_ENABLE_CUDA)
inline constexpr GpuVendor this_gpu_vendor = GpuVendor::nvidia;
inline constexpr int this_gpu_warp_size = 32;
#elif defined(KOKKOS_ENABLE_SYCL) || defined(KOKKOS_ENABLE_OPENMPTARGET) || defined(KOKKOS_ENABLE_OPENACC)
#error "this Kokkos has a GPU backend that kten has no kernel shapes for: add its vendor to src/dispatch/gpu_vendor.hpp and a GpuKernelShape in src/ops/gemm_kernel.hpp (CONTRIBUTING.md, A GPU backend)"
#else
inline constexpr GpuVendor this_gpu_vendor = GpuVendor::nvidia;  // the emulated GPU runs NVIDIA's shapes
inline constexpr int this_gpu_warp_size = 32;
#endif

}  // namespace kten::detail
