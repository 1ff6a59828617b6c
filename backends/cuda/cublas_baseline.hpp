#pragma once
// cuBLAS as a baseline for the perf suite only (kten's kernels never call it). The library is
// opened at run time, so a build made with one CUDA release runs against the cuBLAS of another.

#include <string>

namespace kten::detail {

/// \brief Whether cuBLAS could be loaded (false in host-only builds); `why` says why not.
bool cublas_available(std::string* why);
/// \brief Row-major C (m x n) = A (m x k) * B (k x n) in device memory on Kokkos' CUDA stream,
/// without TF32. T is float or double.
template <class T>
void cublas_gemm(const T* A, const T* B, T* C, long m, long n, long k);

}  // namespace kten::detail
