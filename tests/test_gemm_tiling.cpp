// White-box tests of the GEMM kernels' structure, run on the host:
//  - the cooperative (GPU) kernel, with teams of 1 and 2 host threads, on odd shapes and
//    transposed operands (the emulated-GPU suite runs it too, through matmul);
//  - the shared-memory bank-conflict degree of the real GPU layout's scratch accesses, computed
//    from the same index functions the kernel uses, for every warp of a team.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <catch2/catch_template_test_macros.hpp>

#include "dispatch.hpp"
#include "gemm_kernel.hpp"
#include "support.hpp"

namespace kten::test {  // named (not anonymous): nvcc's extended lambdas need nameable types

template <class Tile, class T>
void check_team_gemm(bool transpose_a, bool transpose_b, bool with_bias, bool accumulate) {
  const std::int64_t m = 13, n = 11, k = 21;  // partial tiles in every direction, a partial k-slice
  const Shape a_shape = transpose_a ? Shape{k, m} : Shape{m, k}, b_shape = transpose_b ? Shape{n, k} : Shape{k, n};
  auto A = uniform(a_shape, -1, 1, cpu(), 1, dtype_of<T>()), B = uniform(b_shape, -1, 1, cpu(), 2, dtype_of<T>());
  auto bias = uniform({n}, -1, 1, cpu(), 3, dtype_of<T>());
  auto C = uniform({m, n}, -1, 1, cpu(), 4, dtype_of<T>());
  const auto ha = host_doubles<T>(A), hb = host_doubles<T>(B), hbias = host_doubles<T>(bias), hc = host_doubles<T>(C);
  std::vector<double> ref(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double v = (with_bias ? hbias[j] : 0) + (accumulate ? hc[i * n + j] : 0);
      for (std::int64_t p = 0; p < k; ++p)
        v += (transpose_a ? ha[p * m + i] : ha[i * k + p]) * (transpose_b ? hb[j * k + p] : hb[p * n + j]);
      ref[i * n + j] = v;
    }
  detail::GemmShape s{m, n, k, 0, 0, 0, 0};
  s.a_row = transpose_a ? 1 : k;
  s.a_col = transpose_a ? m : 1;
  s.b_row = transpose_b ? 1 : n;
  s.b_col = transpose_b ? k : 1;
  detail::launch_team_gemm<Tile>(detail::EmulatedGpuBackend{}, static_cast<const T*>(A.data()),
                                 static_cast<const T*>(B.data()), static_cast<T*>(C.data()),
                                 with_bias ? static_cast<const T*>(bias.data()) : nullptr, accumulate, s);
  require_allclose<T>(C, ref);
}

/// Shared memory has 32 banks of 4-byte words. A warp's access is served in phases: all 32 lanes
/// for 4-byte accesses, 16 lanes for 8-byte and 8 lanes for 16-byte ones. Within a phase, lanes
/// that touch different words of one bank are serialised; lanes reading the same word share it.
/// Returns the worst number of distinct words one bank serves in one phase (1 = conflict-free).
/// `word_of_lane[l]` is the first 4-byte word lane l touches, `words` how many it touches.
int bank_conflict_degree(const std::vector<long>& word_of_lane, int words) {
  const int lanes_per_phase = 32 / words;
  int worst = 1;
  for (std::size_t first = 0; first < word_of_lane.size(); first += lanes_per_phase) {
    std::map<int, std::set<long>> bank_words;
    for (std::size_t l = first; l < std::min(word_of_lane.size(), first + lanes_per_phase); ++l)
      for (int w = 0; w < words; ++w) bank_words[(word_of_lane[l] + w) % 32].insert(word_of_lane[l] + w);
    for (const auto& [bank, distinct] : bank_words) worst = std::max(worst, static_cast<int>(distinct.size()));
  }
  return worst;
}

/// The worst conflict degree of one scratch access over every warp (and every repetition) of a
/// team; `element_of(rank)` is the scratch element a thread touches, `elements` how many at once.
template <class Tile, class T, class ElementOf>
int worst_degree(ElementOf element_of, int elements) {
  const int words = static_cast<int>(sizeof(T)) * elements / 4;
  int worst = 1;
  for (int warp = 0; warp < Tile::threads / 32; ++warp) {
    std::vector<long> word_of_lane;
    for (int lane = 0; lane < 32; ++lane)
      word_of_lane.push_back(static_cast<long>(element_of(warp * 32 + lane)) * static_cast<long>(sizeof(T)) / 4);
    worst = std::max(worst, bank_conflict_degree(word_of_lane, words));
  }
  return worst;
}

template <class T>
void check_bank_conflicts() {
  using Tile = detail::GpuTiling<T>;
  // Stores of the op(A) and op(B) slices, for both memory layouts of each operand, every iteration.
  for (bool contiguous : {true, false}) {
    CAPTURE(contiguous);
    for (int it = 0; it * Tile::threads < Tile::BM * Tile::BK; ++it) {
      CAPTURE(it);
      CHECK(worst_degree<Tile, T>([&](int rank) {
        int i, p;
        Tile::a_element(rank + it * Tile::threads, contiguous, i, p);
        return Tile::a_offset(i, p);
      }, 1) <= 1);
    }
    for (int it = 0; it * Tile::threads < Tile::BK * Tile::BN; ++it) {
      CAPTURE(it);
      CHECK(worst_degree<Tile, T>([&](int rank) {
        int p, j;
        Tile::b_element(rank + it * Tile::threads, contiguous, p, j);
        return Tile::b_offset(p, j);
      }, 1) <= 1);
    }
  }
  // The 128-bit loads of the inner loop, both halves of each micro-tile, every k step.
  for (int p = 0; p < Tile::BK; ++p)
    for (int h = 0; h < 2; ++h) {
      CAPTURE(p, h);
      CHECK(worst_degree<Tile, T>([&](int rank) { return Tile::a_offset(Tile::thread_row(rank, h), p); }, Tile::V) <= 1);
      CHECK(worst_degree<Tile, T>([&](int rank) { return Tile::b_offset(p, Tile::thread_col(rank, h)); }, Tile::V) <= 1);
    }
}

}  // namespace kten::test

TEMPLATE_TEST_CASE("the cooperative GEMM kernel is right on odd shapes and transposed operands",
                   "[internal][matmul]", float, double) {
  using T = TestType;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool with_bias : {false, true})
        for (bool accumulate : {false, true}) {
          CAPTURE(ta, tb, with_bias, accumulate);
          kten::test::check_team_gemm<kten::detail::EmulatedTiling<T, 1>, T>(ta, tb, with_bias, accumulate);
          if (kten::host_threads() >= 2)
            kten::test::check_team_gemm<kten::detail::EmulatedTiling<T, 2>, T>(ta, tb, with_bias, accumulate);
        }
}

TEST_CASE("the bank-conflict model counts what the hardware serialises", "[internal][matmul]") {
  using kten::test::bank_conflict_degree;
  std::vector<long> consecutive, stride32, same, stride2;
  for (long l = 0; l < 32; ++l) {
    consecutive.push_back(l);
    stride32.push_back(32 * l);
    same.push_back(7);
    stride2.push_back(2 * l);
  }
  CHECK(bank_conflict_degree(consecutive, 1) == 1);
  CHECK(bank_conflict_degree(stride32, 1) == 32);
  CHECK(bank_conflict_degree(same, 1) == 1);  // a broadcast
  CHECK(bank_conflict_degree(stride2, 1) == 2);
  std::vector<long> vec_consecutive, vec_stride8;
  for (long l = 0; l < 32; ++l) {
    vec_consecutive.push_back(4 * l);
    vec_stride8.push_back(8 * l);
  }
  CHECK(bank_conflict_degree(vec_consecutive, 4) == 1);  // 8 lanes x 16 bytes per phase
  CHECK(bank_conflict_degree(vec_stride8, 4) == 2);
}

TEMPLATE_TEST_CASE("the GPU GEMM layout's shared-memory accesses are free of bank conflicts",
                   "[internal][matmul]", float, double) {
  kten::test::check_bank_conflicts<TestType>();
}
