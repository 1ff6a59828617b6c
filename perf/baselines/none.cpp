// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Vendor baselines in a build without a GPU backend: none to compare with.
#include "vendor_baseline.hpp"

namespace kten::perf {

double raw_launch_seconds(int) { return 0; }
double raw_pinned_h2d_seconds(std::size_t, int) { return 0; }
const char* gpu_blas_name() { return "GPU BLAS"; }
bool gpu_blas_available(std::string* why) {
  if (why) *why = "this build has no GPU backend";
  return false;
}
template <class T>
void gpu_blas_gemm(const T*, const T*, T*, long, long, long) {}
template void gpu_blas_gemm<float>(const float*, const float*, float*, long, long, long);
template void gpu_blas_gemm<double>(const double*, const double*, double*, long, long, long);

}  // namespace kten::perf
