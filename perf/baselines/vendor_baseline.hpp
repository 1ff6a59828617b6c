#pragma once
// Vendor baselines for the perf suite only (kten's kernels never use them): cuBLAS, opened at run
// time so a build made with one CUDA release runs against the cuBLAS of another, a raw CUDA
// kernel launch, and cudaMemcpy from pinned memory.

#include <cstddef>
#include <string>

namespace kten::perf {

/// \brief Whether cuBLAS could be loaded (false in host-only builds); `why` says why not.
bool cublas_available(std::string* why);
/// \brief Row-major C (m x n) = A (m x k) * B (k x n) in device memory on Kokkos' CUDA stream,
/// without TF32. T is float or double.
template <class T>
void cublas_gemm(const T* A, const T* B, T* C, long m, long n, long k);

/// \brief Seconds for one empty CUDA kernel launch on Kokkos' stream, to completion (0 without CUDA).
double raw_launch_seconds(int repetitions);
/// \brief Seconds for one cudaMemcpy of `bytes` from pinned host memory to the GPU (0 without CUDA).
double raw_pinned_h2d_seconds(std::size_t bytes, int repetitions);

}  // namespace kten::perf
