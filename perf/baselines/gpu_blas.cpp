// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// vendor_baseline.hpp's BLAS entry points in a GPU build, the same for every vendor: the backend's
// perf/baselines/<backend>.cpp opens its BLAS (vendor_blas()) and names it.
#include "vendor_baseline.hpp"

#include "gpu_blas_loader.hpp"

namespace kten::perf {

bool gpu_blas_available(std::string* why) { return vendor_blas().available(why); }

template <class T>
void gpu_blas_gemm(const T* A, const T* B, T* C, long m, long n, long k) {
  vendor_blas().gemm(A, B, C, m, n, k);
}
template void gpu_blas_gemm<float>(const float*, const float*, float*, long, long, long);
template void gpu_blas_gemm<double>(const double*, const double*, double*, long, long, long);

}  // namespace kten::perf
