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

// rocBLAS' C API as its rocblas.h declares it (handles are pointers, enums and rocblas_int are
// 32-bit ints): rocblas_operation_none is 111.
const LoadedBlas<hipStream_t>& rocblas() {
  static const LoadedBlas<hipStream_t> lib =
      load_blas(BlasNames{{"librocblas.so", "librocblas.so.4", "librocblas.so.3", "librocblas.so.0"},
                          "rocblas_create_handle", "rocblas_set_stream", "rocblas_sgemm", "rocblas_dgemm",
                          /*rocblas_operation_none=*/111,
                          "librocblas.so not found (Debian 12 packages no rocBLAS; install ROCm's, or set "
                          "LD_LIBRARY_PATH to it)"},
                kokkos_stream());
  return lib;
}
}  // namespace

const char* gpu_blas_name() { return "rocBLAS"; }

bool gpu_blas_available(std::string* why) {
  if (!rocblas().handle && why) *why = rocblas().error;
  return rocblas().handle != nullptr;
}

template <>
void gpu_blas_gemm<float>(const float* A, const float* B, float* C, long m, long n, long k) {
  rocblas().gemm(A, B, C, m, n, k);
}
template <>
void gpu_blas_gemm<double>(const double* A, const double* B, double* C, long m, long n, long k) {
  rocblas().gemm(A, B, C, m, n, k);
}

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
  void *host = nullptr, *device = nullptr;
  if (hipHostMalloc(&host, bytes, hipHostMallocDefault) != hipSuccess) return 0;
  if (hipMalloc(&device, bytes) != hipSuccess) {
    (void)hipHostFree(host);
    return 0;
  }
  const double s = seconds_per(repetitions, [&] { (void)hipMemcpy(device, host, bytes, hipMemcpyHostToDevice); });
  (void)hipFree(device);
  (void)hipHostFree(host);
  return s;
}

}  // namespace kten::perf
