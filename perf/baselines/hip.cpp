// rocBLAS baseline for the perf suite, loaded with dlopen: nothing links against rocBLAS, so the
// build needs neither its headers nor its library (Debian 12 packages none; ROCm's own
// repositories and newer Debian releases do). Where librocblas.so cannot be loaded the GEMM rows
// say so, as a host-only build's do. Also a raw HIP kernel launch and hipMemcpy from pinned
// memory, the floors kten's GPU rows compare with.
#include "vendor_baseline.hpp"

#include <dlfcn.h>

#include <chrono>

#include <hip/hip_runtime.h>

#include <Kokkos_Core.hpp>

namespace kten::perf {

namespace {
// Kokkos 3.x: Kokkos::Experimental::HIP; Kokkos 4: Kokkos::HIP.
#if KOKKOS_VERSION >= 40000
hipStream_t kokkos_stream() { return Kokkos::HIP().hip_stream(); }
#else
hipStream_t kokkos_stream() { return Kokkos::Experimental::HIP().hip_stream(); }
#endif

// rocBLAS' C API as its rocblas.h declares it (handles are pointers, enums and rocblas_int are
// 32-bit ints): rocblas_operation_none is 111, rocblas_status_success 0.
using Handle = void*;
constexpr int rocblas_operation_none = 111;
using CreateFn = int (*)(Handle*);
using SetStreamFn = int (*)(Handle, hipStream_t);
using SgemmFn = int (*)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
using DgemmFn = int (*)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int,
                        const double*, double*, int);

struct Rocblas {
  Handle handle = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  std::string error;
};

const Rocblas& rocblas() {
  static const Rocblas lib = [] {
    Rocblas r;
    void* so = nullptr;
    for (const char* name : {"librocblas.so", "librocblas.so.4", "librocblas.so.3", "librocblas.so.0"})
      if ((so = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!so) {
      r.error = "librocblas.so not found (Debian 12 packages no rocBLAS; install ROCm's, or set LD_LIBRARY_PATH "
                "to it)";
      return r;
    }
    auto create = reinterpret_cast<CreateFn>(dlsym(so, "rocblas_create_handle"));
    auto set_stream = reinterpret_cast<SetStreamFn>(dlsym(so, "rocblas_set_stream"));
    r.sgemm = reinterpret_cast<SgemmFn>(dlsym(so, "rocblas_sgemm"));
    r.dgemm = reinterpret_cast<DgemmFn>(dlsym(so, "rocblas_dgemm"));
    if (!create || !set_stream || !r.sgemm || !r.dgemm || create(&r.handle) != 0) {
      r.error = "librocblas.so lacks the expected entry points or rocblas_create_handle failed";
      r.handle = nullptr;
      return r;
    }
    set_stream(r.handle, kokkos_stream());
    return r;
  }();
  return lib;
}
}  // namespace

const char* gpu_blas_name() { return "rocBLAS"; }

bool gpu_blas_available(std::string* why) {
  if (!rocblas().handle && why) *why = rocblas().error;
  return rocblas().handle != nullptr;
}

// Row-major C = A B is column-major C^T = B^T A^T: pass B first.
template <>
void gpu_blas_gemm<float>(const float* A, const float* B, float* C, long m, long n, long k) {
  const float one = 1, zero = 0;
  rocblas().sgemm(rocblas().handle, rocblas_operation_none, rocblas_operation_none, int(n), int(m), int(k), &one, B,
                  int(n), A, int(k), &zero, C, int(n));
}
template <>
void gpu_blas_gemm<double>(const double* A, const double* B, double* C, long m, long n, long k) {
  const double one = 1, zero = 0;
  rocblas().dgemm(rocblas().handle, rocblas_operation_none, rocblas_operation_none, int(n), int(m), int(k), &one, B,
                  int(n), A, int(k), &zero, C, int(n));
}

namespace {
__global__ void empty_kernel() {}

template <class F>
double seconds_per(int repetitions, F f) {
  f();  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repetitions; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repetitions;
}
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
