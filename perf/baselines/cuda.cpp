// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuBLAS baseline for the perf suite, loaded with dlopen: the GPU machines may carry a newer cuBLAS
// than the CUDA 11.8 Debian builds with, so nothing links against a particular cuBLAS. Also a raw
// CUDA kernel launch and cudaMemcpy from pinned memory, the floors kten's GPU rows compare with.
#include "vendor_baseline.hpp"

#include "gpu_blas_loader.hpp"

#include <Kokkos_Core.hpp>

namespace kten::perf {

namespace {
const LoadedBlas<cudaStream_t>& cublas() {
  static const LoadedBlas<cudaStream_t> lib = [] {
    auto blas = load_blas(BlasNames{{"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"},
                                    "cublasCreate_v2", "cublasSetStream_v2", "cublasSgemm_v2", "cublasDgemm_v2",
                                    /*CUBLAS_OP_N=*/0,
                                    "libcublas.so not found (set LD_LIBRARY_PATH to the CUDA libraries)"},
                          Kokkos::Cuda().cuda_stream());
    using SetMathModeFn = int (*)(void*, int);
    auto set_math = blas.handle ? reinterpret_cast<SetMathModeFn>(dlsym(blas.library, "cublasSetMathMode")) : nullptr;
    if (set_math) set_math(blas.handle, 0);  // CUBLAS_DEFAULT_MATH: no TF32 for sgemm
    return blas;
  }();
  return lib;
}
}  // namespace

const char* gpu_blas_name() { return "cuBLAS"; }

bool gpu_blas_available(std::string* why) {
  if (!cublas().handle && why) *why = cublas().error;
  return cublas().handle != nullptr;
}

template <>
void gpu_blas_gemm<float>(const float* A, const float* B, float* C, long m, long n, long k) {
  cublas().gemm(A, B, C, m, n, k);
}
template <>
void gpu_blas_gemm<double>(const double* A, const double* B, double* C, long m, long n, long k) {
  cublas().gemm(A, B, C, m, n, k);
}

namespace {
__global__ void empty_kernel() {}
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
