// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuBLAS baseline for the perf suite, loaded with dlopen: the GPU machines may carry a newer cuBLAS
// than the CUDA 11.8 Debian builds with, so nothing links against a particular cuBLAS. Also a raw
// CUDA kernel launch and cudaMemcpy from pinned memory, the floors kten's GPU rows compare with.
#include "vendor_baseline.hpp"

#include "gpu_blas_loader.hpp"

#include <Kokkos_Core.hpp>

namespace kten::perf {

const LoadedBlas& vendor_blas() {
  static const LoadedBlas lib = [] {
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

const char* gpu_blas_name() { return "cuBLAS"; }

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
  return pinned_h2d_seconds(
      bytes, repetitions, [](void** p, std::size_t n) { return cudaMallocHost(p, n) == cudaSuccess; },
      [](void** p, std::size_t n) { return cudaMalloc(p, n) == cudaSuccess; },
      [](void* device, const void* host, std::size_t n) { cudaMemcpy(device, host, n, cudaMemcpyHostToDevice); },
      [](void* p) { cudaFreeHost(p); }, [](void* p) { cudaFree(p); });
}

}  // namespace kten::perf
