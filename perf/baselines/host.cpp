// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host baselines: plain OpenMP loops and Eigen (see host_baseline.hpp).
#include "host_baseline.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <Eigen/Core>
#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace kten::perf {

namespace {

// Blocks of 2^16 elements (256 KiB of float), dealt to the threads as schedule(static) deals
// iterations: each thread streams through its own contiguous run of memory.
constexpr std::int64_t block = std::int64_t(1) << 16;

// out[i] = f(i) for i in [begin, end), the 16-byte-aligned middle with streaming stores (SSE's
// movntps: every x86-64 has it; the width does not matter when memory sets the pace).
template <class F>
void store_streaming(float* out, std::int64_t begin, std::int64_t end, F f) {
  std::int64_t i = begin;
#if defined(__SSE__)
  for (; i < end && reinterpret_cast<std::uintptr_t>(out + i) % 16 != 0; ++i) out[i] = f(i);
  for (; i + 4 <= end; i += 4) _mm_stream_ps(out + i, _mm_set_ps(f(i + 3), f(i + 2), f(i + 1), f(i)));
  _mm_sfence();
#endif
  for (; i < end; ++i) out[i] = f(i);
}

}  // namespace

void omp_triad(const float* a, const float* b, const float* c, float* d, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) d[i] = a[i] * b[i] + c[i];
}

void omp_copy(const float* a, float* b, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) b[i] = a[i];
}

void omp_triad_streaming(const float* a, const float* b, const float* c, float* d, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t begin = 0; begin < n; begin += block)
    store_streaming(d, begin, std::min(n, begin + block), [&](std::int64_t i) { return a[i] * b[i] + c[i]; });
}

void omp_copy_streaming(const float* a, float* b, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t begin = 0; begin < n; begin += block)
    store_streaming(b, begin, std::min(n, begin + block), [&](std::int64_t i) { return a[i]; });
}

void omp_copy_memcpy(const float* a, float* b, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t begin = 0; begin < n; begin += block)
    std::memcpy(b + begin, a + begin, static_cast<std::size_t>(std::min(n - begin, block)) * sizeof(float));
}

float omp_read(const float* a, std::int64_t n) {
  // Independent partial sums per thread (four vector registers' worth), so the loop vectorises
  // without reassociating and no chain of dependent adds sets the pace.
  constexpr int lanes = 64;
  const std::int64_t blocks = n / lanes;
  float total = 0;
#pragma omp parallel reduction(+ : total)
  {
    float lane[lanes] = {};
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b)
      for (int l = 0; l < lanes; ++l) lane[l] += a[b * lanes + l];
    for (int l = 0; l < lanes; ++l) total += lane[l];
  }
  for (std::int64_t i = blocks * lanes; i < n; ++i) total += a[i];
  return total;
}

void plain_add(const float* x, const float* y, float* z, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

template <class T>
void eigen_gemm(const T* A, const T* B, T* C, std::int64_t n) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Matrix> a(A, n, n), b(B, n, n);
  Eigen::Map<Matrix> c(C, n, n);
  c.noalias() = a * b;
}
template void eigen_gemm<float>(const float*, const float*, float*, std::int64_t);
template void eigen_gemm<double>(const double*, const double*, double*, std::int64_t);

void eigen_fma(const float* a, const float* b, const float* c, float* d, std::int64_t n) {
  using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
  Eigen::Map<Array>(d, n) = Eigen::Map<const Array>(a, n) * Eigen::Map<const Array>(b, n) + Eigen::Map<const Array>(c, n);
}

void eigen_exp(const float* a, float* b, std::int64_t n) {
  using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
  Eigen::Map<Array>(b, n) = Eigen::Map<const Array>(a, n).exp();
}

#define KTEN_STRINGIFY2(x) #x
#define KTEN_STRINGIFY(x) KTEN_STRINGIFY2(x)
const char* eigen_version() {
  return KTEN_STRINGIFY(EIGEN_WORLD_VERSION) "." KTEN_STRINGIFY(EIGEN_MAJOR_VERSION) "." KTEN_STRINGIFY(EIGEN_MINOR_VERSION);
}

}  // namespace kten::perf
