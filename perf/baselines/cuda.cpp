// cuBLAS baseline for the perf suite, loaded with dlopen: the GPU machines may carry a newer cuBLAS
// than the CUDA 11.8 Debian builds with, so nothing links against a particular cuBLAS. Also a raw
// CUDA kernel launch and cudaMemcpy from pinned memory, the floors kten's GPU rows compare with.
#include "vendor_baseline.hpp"

#include <dlfcn.h>

#include <chrono>

#include <Kokkos_Core.hpp>

namespace kten::perf {

namespace {
using Handle = void*;
using CreateFn = int (*)(Handle*);
using SetStreamFn = int (*)(Handle, cudaStream_t);
using SetMathModeFn = int (*)(Handle, int);
using SgemmFn = int (*)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
using DgemmFn = int (*)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int,
                        const double*, double*, int);

struct Cublas {
  Handle handle = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  std::string error;
};

const Cublas& cublas() {
  static const Cublas lib = [] {
    Cublas c;
    void* so = nullptr;
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"})
      if ((so = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!so) {
      c.error = "libcublas.so not found (set LD_LIBRARY_PATH to the CUDA libraries)";
      return c;
    }
    auto create = reinterpret_cast<CreateFn>(dlsym(so, "cublasCreate_v2"));
    auto set_stream = reinterpret_cast<SetStreamFn>(dlsym(so, "cublasSetStream_v2"));
    auto set_math = reinterpret_cast<SetMathModeFn>(dlsym(so, "cublasSetMathMode"));
    c.sgemm = reinterpret_cast<SgemmFn>(dlsym(so, "cublasSgemm_v2"));
    c.dgemm = reinterpret_cast<DgemmFn>(dlsym(so, "cublasDgemm_v2"));
    if (!create || !set_stream || !set_math || !c.sgemm || !c.dgemm || create(&c.handle) != 0) {
      c.error = "libcublas.so lacks the expected entry points or cublasCreate failed";
      c.handle = nullptr;
      return c;
    }
    set_stream(c.handle, Kokkos::Cuda().cuda_stream());
    set_math(c.handle, 0);  // CUBLAS_DEFAULT_MATH: no TF32 for sgemm
    return c;
  }();
  return lib;
}
}  // namespace

const char* gpu_blas_name() { return "cuBLAS"; }

bool gpu_blas_available(std::string* why) {
  if (!cublas().handle && why) *why = cublas().error;
  return cublas().handle != nullptr;
}

// Row-major C = A B is column-major C^T = B^T A^T: pass B first.
template <>
void gpu_blas_gemm<float>(const float* A, const float* B, float* C, long m, long n, long k) {
  const float one = 1, zero = 0;
  cublas().sgemm(cublas().handle, 0, 0, int(n), int(m), int(k), &one, B, int(n), A, int(k), &zero, C, int(n));
}
template <>
void gpu_blas_gemm<double>(const double* A, const double* B, double* C, long m, long n, long k) {
  const double one = 1, zero = 0;
  cublas().dgemm(cublas().handle, 0, 0, int(n), int(m), int(k), &one, B, int(n), A, int(k), &zero, C, int(n));
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
  cudaStream_t stream = Kokkos::Cuda().cuda_stream();
  return seconds_per(repetitions, [&] {
    empty_kernel<<<1, 1, 0, stream>>>();
    cudaStreamSynchronize(stream);
  });
}

double raw_pinned_h2d_seconds(std::size_t bytes, int repetitions) {
  void *host = nullptr, *device = nullptr;
  if (cudaMallocHost(&host, bytes) != cudaSuccess) return 0;
  if (cudaMalloc(&device, bytes) != cudaSuccess) {
    cudaFreeHost(host);
    return 0;
  }
  const double s = seconds_per(repetitions, [&] { cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice); });
  cudaFree(device);
  cudaFreeHost(host);
  return s;
}

}  // namespace kten::perf
