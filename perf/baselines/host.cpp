// Host baselines: plain OpenMP loops and Eigen (see host_baseline.hpp).
#include "host_baseline.hpp"

#include <Eigen/Core>

namespace kten::perf {

void omp_triad(const float* a, const float* b, const float* c, float* d, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) d[i] = a[i] * b[i] + c[i];
}

void omp_copy(const float* a, float* b, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) b[i] = a[i];
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
