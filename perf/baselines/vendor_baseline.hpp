// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Vendor baselines for the perf suite only (kten's kernels never use them): the GPU vendor's BLAS
// (cuBLAS, rocBLAS), opened at run time so a build made with one toolkit release runs against the
// library of another, a raw kernel launch, and a copy from pinned memory. One file per GPU backend
// (perf/baselines/<backend>.cpp: cuda, hip, none), the GPU ones sharing gpu_blas.cpp.

#include <cstddef>
#include <string>

namespace kten::perf {

/// \brief The GPU vendor's BLAS this build compares with ("cuBLAS", "rocBLAS"; "GPU BLAS" in
/// host-only builds).
const char* gpu_blas_name();
/// \brief Whether that BLAS could be loaded (false in host-only builds); `why` says why not.
bool gpu_blas_available(std::string* why);
/// \brief Row-major C (m x n) = A (m x k) * B (k x n) in device memory on Kokkos' GPU stream,
/// without reduced-precision tensor-core modes (no TF32). T is float or double.
template <class T>
void gpu_blas_gemm(const T* A, const T* B, T* C, long m, long n, long k);

/// \brief Seconds for one empty GPU kernel launch on Kokkos' stream, to completion (0 without a GPU backend).
double raw_launch_seconds(int repetitions);
/// \brief Seconds for one host-to-GPU copy (cudaMemcpy, hipMemcpy) of `bytes` from pinned host
/// memory (0 without a GPU backend).
double raw_pinned_h2d_seconds(std::size_t bytes, int repetitions);

}  // namespace kten::perf
