// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Host baselines for the perf suite only (kten's kernels never use them): plain OpenMP loops
// that measure the machine's own memory limits (STREAM-style), and Eigen 3.4, the library a C++
// user would pick instead of kten for GEMM and elementwise work. Compiled without Kokkos.

#include <cstdint>

namespace kten::perf {

/// \brief d[i] = a[i] * b[i] + c[i]: STREAM's triad with a third input, so it moves the same
/// four arrays as kten::fma. Plain OpenMP over every thread.
void omp_triad(const float* a, const float* b, const float* c, float* d, std::int64_t n);
/// \brief b[i] = a[i] (STREAM's copy): one read and one write, as exp does.
void omp_copy(const float* a, float* b, std::int64_t n);
/// \brief omp_triad with non-temporal (streaming) stores: d bypasses the caches, so the write costs
/// no read for ownership. One of the loops whose best is the machine's limit in STREAM's sense.
void omp_triad_streaming(const float* a, const float* b, const float* c, float* d, std::int64_t n);
/// \brief omp_copy with non-temporal (streaming) stores.
void omp_copy_streaming(const float* a, float* b, std::int64_t n);
/// \brief omp_copy as each thread's memcpy of its share (the C library's own choice of stores).
void omp_copy_memcpy(const float* a, float* b, std::int64_t n);
/// \brief The sum of a[0..n): one read, as sum and norm do.
float omp_read(const float* a, std::int64_t n);
/// \brief z[i] = x[i] + y[i] on the calling thread: what a small addition costs without a library.
void plain_add(const float* x, const float* y, float* z, std::int64_t n);

/// \brief Row-major C (n x n) = A B with Eigen (its own blocking, and OpenMP threads).
template <class T>
void eigen_gemm(const T* A, const T* B, T* C, std::int64_t n);
/// \brief d = a * b + c with Eigen arrays (Eigen runs coefficient-wise work on one thread).
void eigen_fma(const float* a, const float* b, const float* c, float* d, std::int64_t n);
/// \brief b = exp(a) with Eigen arrays (its vectorised exp, one thread).
void eigen_exp(const float* a, float* b, std::int64_t n);
/// \brief Eigen's version, "major.minor.patch".
const char* eigen_version();

}  // namespace kten::perf
