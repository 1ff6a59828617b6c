// White-box test of the GEMM kernel's cooperative layout (the one GPUs use: a team of threads,
// one micro-tile each, accumulators kept across k-slices) run on the host with tiny tiles, so the
// GPU code path is exercised on machines without a GPU.
#include <catch2/catch_template_test_macros.hpp>

#include "../src/dispatch.hpp"
#include "../src/gemm_kernel.hpp"
#include "support.hpp"

namespace kten::test {  // named (not anonymous): nvcc's extended lambdas need nameable types

template <int Threads>
struct TinyCooperative {  // 2 x 2 micro-tiles, k-slices of 3, one or two threads per team
  static constexpr int TM = 2, TN = 2, BM = 2 * Threads, BN = 2, BK = 3, threads = Threads;
  static constexpr bool cooperative = true;
};

template <class Tile, class T>
void check_tiled(bool with_bias, bool accumulate) {
  const std::int64_t m = 7, n = 5, k = 10;  // partial tiles in every direction, a partial k-slice
  auto A = uniform({m, k}, -1, 1, cpu(), 1, dtype_of<T>()), B = uniform({k, n}, -1, 1, cpu(), 2, dtype_of<T>());
  auto bias = uniform({n}, -1, 1, cpu(), 3, dtype_of<T>());
  auto C = uniform({m, n}, -1, 1, cpu(), 4, dtype_of<T>());
  const auto ha = test::host_doubles<T>(A), hb = test::host_doubles<T>(B), hbias = test::host_doubles<T>(bias),
             hc = test::host_doubles<T>(C);
  std::vector<double> ref(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double v = (with_bias ? hbias[j] : 0) + (accumulate ? hc[i * n + j] : 0);
      for (std::int64_t p = 0; p < k; ++p) v += ha[i * k + p] * hb[p * n + j];
      ref[i * n + j] = v;
    }
  const detail::GemmShape s{m, n, k, k, 1, n, 1};
  detail::gemm_tiled<Tile>(detail::HostBackend{}, static_cast<const T*>(A.data()), static_cast<const T*>(B.data()),
                           static_cast<T*>(C.data()), with_bias ? static_cast<const T*>(bias.data()) : nullptr,
                           accumulate, s);
  test::require_allclose<T>(C, ref);
}

}  // namespace kten::test

using kten::test::check_tiled;
using kten::test::TinyCooperative;

TEMPLATE_TEST_CASE("the cooperative GEMM layout is right on odd shapes", "[internal][matmul]", float, double) {
  for (bool with_bias : {false, true})
    for (bool accumulate : {false, true}) {
      CAPTURE(with_bias, accumulate);
      check_tiled<TinyCooperative<1>, TestType>(with_bias, accumulate);
      if (kten::host_threads() >= 2) check_tiled<TinyCooperative<2>, TestType>(with_bias, accumulate);
    }
}
