// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// rocBLAS baseline for the perf suite, loaded with dlopen: nothing links against rocBLAS, so the
// build needs neither its headers nor its library (Debian 12 packages none; ROCm's own
// repositories and newer Debian releases do). Where librocblas.so cannot be loaded the GEMM rows
// say so, as a host-only build's do. Also a raw HIP kernel launch and hipMemcpy from pinned
// memory, the floors kten's GPU rows compare with.
#include "vendor_baseline.hpp"

#include "gpu_blas_loader.hpp"

#include <hip/hip_runtime.h>

#include <Kokkos_Core.hpp>

#include "hip/kokkos_hip.hpp"

namespace kten::perf {

namespace {
hipStream_t kokkos_stream() { return kten::detail::kokkos_hip::HIP().hip_stream(); }
}  // namespace

// rocBLAS' C API as its rocblas.h declares it (handles are pointers, enums and rocblas_int are
// 32-bit ints): rocblas_operation_none is 111.
const LoadedBlas& vendor_blas() {
  static const LoadedBlas lib =
      load_blas(BlasNames{{"librocblas.so", "librocblas.so.4", "librocblas.so.3", "librocblas.so.0"},
                          "rocblas_create_handle", "rocblas_set_stream", "rocblas_sgemm", "rocblas_dgemm",
                          /*rocblas_operation_none=*/111,
                          "librocblas.so not found (Debian 12 packages no rocBLAS; install ROCm's, or set "
                          "LD_LIBRARY_PATH to it)"},
                kokkos_stream());
  return lib;
}

const char* gpu_blas_name() { return "rocBLAS"; }

namespace {
__global__ void empty_kernel() {}
}  // namespace

double raw_launch_seconds(int repetitions) {
  hipStream_t stream = kokkos_stream();
  return seconds_per(repetitions, [&] {
    hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(1), 0, stream);
    (void)hipStreamSynchronize(stream);
  });
}

double raw_pinned_h2d_seconds(std::size_t bytes, int repetitions) {
  return pinned_h2d_seconds(
      bytes, repetitions,
      [](void** p, std::size_t n) { return hipHostMalloc(p, n, hipHostMallocDefault) == hipSuccess; },
      [](void** p, std::size_t n) { return hipMalloc(p, n) == hipSuccess; },
      [](void* device, const void* host, std::size_t n) { (void)hipMemcpy(device, host, n, hipMemcpyHostToDevice); },
      [](void* p) { (void)hipHostFree(p); }, [](void* p) { (void)hipFree(p); });
}

}  // namespace kten::perf
