// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// White-box tests of the GEMM kernels' structure, run on the host:
//  - the host kernel's plan (tiles shrink with the product and share out over the threads) and
//    every path of it: whole and edge micro-tiles of each width, A read in place or packed,
//    several k-slices and column blocks, each split the plan makes for 1 to 7 threads;
//  - the cooperative (GPU) kernel, with teams of 1 and 2 host threads, on odd shapes and
//    transposed operands (the emulated-GPU suite runs it too, through matmul);
//  - the shared-memory bank-conflict degree of the real GPU layouts' scratch accesses (NVIDIA's
//    32-lane warps and AMD's 64-lane wavefronts), computed from the same index functions the
//    kernel uses, for every warp of a team.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <catch2/catch_template_test_macros.hpp>

#include "dispatch/dispatch.hpp"
#include "ops/gemm_kernel.hpp"
#include "support.hpp"

namespace kten::test {  // named (not anonymous): nvcc's extended lambdas need nameable types


/// C (m x n) = op(A) op(B) (+ bias) (+ C) in float64 on the host, from operands made for a test.
struct GemmCase {
  std::int64_t m, n, k;
  bool transpose_a, transpose_b, with_bias, accumulate;
};

template <class T>
struct GemmOperands {
  Tensor A, B, bias, C;
  std::vector<double> ref;
  detail::GemmShape s;
};

template <class T>
GemmOperands<T> make_gemm(const GemmCase& g) {
  const auto [m, n, k, ta, tb, with_bias, accumulate] = g;
  GemmOperands<T> o;
  o.A = uniform(ta ? Shape{k, m} : Shape{m, k}, -1, 1, cpu(), 1, dtype_of<T>());
  o.B = uniform(tb ? Shape{n, k} : Shape{k, n}, -1, 1, cpu(), 2, dtype_of<T>());
  o.bias = uniform({n}, -1, 1, cpu(), 3, dtype_of<T>());
  o.C = uniform({m, n}, -1, 1, cpu(), 4, dtype_of<T>());
  const auto ha = host_doubles<T>(o.A), hb = host_doubles<T>(o.B), hbias = host_doubles<T>(o.bias),
             hc = host_doubles<T>(o.C);
  o.ref.resize(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double v = (with_bias ? hbias[j] : 0) + (accumulate ? hc[i * n + j] : 0);
      for (std::int64_t p = 0; p < k; ++p) v += (ta ? ha[p * m + i] : ha[i * k + p]) * (tb ? hb[j * k + p] : hb[p * n + j]);
      o.ref[i * n + j] = v;
    }
  o.s = detail::GemmShape{m, n, k, ta ? 1 : k, ta ? m : 1, tb ? 1 : n, tb ? k : 1};
  return o;
}

template <class T>
const T* bias_of(const GemmCase& g, const GemmOperands<T>& o) {
  return g.with_bias ? static_cast<const T*>(o.bias.data()) : nullptr;
}

/// Every combination of transposes, bias and accumulation for one shape.
std::vector<GemmCase> gemm_variants(std::int64_t m, std::int64_t n, std::int64_t k) {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool with_bias : {false, true})
        for (bool accumulate : {false, true}) cases.push_back({m, n, k, ta, tb, with_bias, accumulate});
  return cases;
}

template <class Tile, class T>
void check_team_gemm(bool transpose_a, bool transpose_b, bool with_bias, bool accumulate) {
  // Partial tiles in every direction, a partial k-slice.
  const GemmCase g{13, 11, 21, transpose_a, transpose_b, with_bias, accumulate};
  auto o = make_gemm<T>(g);
  detail::launch_team_gemm<Tile>(detail::EmulatedGpuBackend{}, static_cast<const T*>(o.A.data()),
                                 static_cast<const T*>(o.B.data()), static_cast<T*>(o.C.data()), bias_of(g, o),
                                 accumulate, o.s);
  require_allclose<T>(o.C, o.ref);
}

/// Shared memory has 32 banks of 4-byte words (NVIDIA's shared memory, and the LDS of AMD's CDNA
/// GPUs). A warp's access is served in phases of 128 bytes: 32 lanes for 4-byte accesses, 16
/// lanes for 8-byte and 8 lanes for 16-byte ones (a 64-lane wavefront takes twice as many phases).
/// Within a phase, lanes that touch different words of one bank are serialised; lanes reading the
/// same word share it. Returns the worst number of distinct words one bank serves in one phase
/// (1 = conflict-free). `word_of_lane[l]` is the first 4-byte word lane l touches, `words` how
/// many it touches.
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

/// The first 4-byte word each lane of warp `warp` touches; `element_of(rank)` is the scratch
/// element a thread touches.
template <class Tile, class T, class ElementOf>
std::vector<long> words_of_warp(ElementOf element_of, int warp) {
  std::vector<long> word_of_lane;
  for (int lane = 0; lane < Tile::warp_size; ++lane)
    word_of_lane.push_back(static_cast<long>(element_of(warp * Tile::warp_size + lane)) * static_cast<long>(sizeof(T)) / 4);
  return word_of_lane;
}

/// The worst conflict degree of one scratch access over every warp (and every repetition) of a
/// team; `element_of(rank)` is the scratch element a thread touches, `elements` how many at once.
template <class Tile, class T, class ElementOf>
int worst_degree(ElementOf element_of, int elements) {
  const int words = static_cast<int>(sizeof(T)) * elements / 4;
  int worst = 1;
  for (int warp = 0; warp < Tile::threads / Tile::warp_size; ++warp)
    worst = std::max(worst, bank_conflict_degree(words_of_warp<Tile, T>(element_of, warp), words));
  return worst;
}

/// Whether every warp's access, `elements` at a time per lane, touches at most 32 distinct words
/// that fall in 32 distinct banks: then no grouping of its lanes into phases can conflict (AMD
/// does not serve 128-bit LDS reads in phases of consecutive lanes).
template <class Tile, class T, class ElementOf>
bool conflict_free_in_any_phase(ElementOf element_of, int elements) {
  const int words = static_cast<int>(sizeof(T)) * elements / 4;
  for (int warp = 0; warp < Tile::threads / Tile::warp_size; ++warp) {
    std::set<long> distinct;
    for (long first : words_of_warp<Tile, T>(element_of, warp))
      for (int w = 0; w < words; ++w) distinct.insert(first + w);
    std::set<long> banks;
    for (long word : distinct) banks.insert(word % 32);
    if (banks.size() != distinct.size()) return false;
  }
  return true;
}

template <class T, class Tile>
void check_bank_conflicts() {
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
      const auto a_load = [&](int rank) { return Tile::a_offset(Tile::thread_row(rank, h), p); };
      const auto b_load = [&](int rank) { return Tile::b_offset(p, Tile::thread_col(rank, h)); };
      CHECK(worst_degree<Tile, T>(a_load, Tile::V) <= 1);
      CHECK(worst_degree<Tile, T>(b_load, Tile::V) <= 1);
      CHECK(conflict_free_in_any_phase<Tile, T>(a_load, Tile::V));
      CHECK(conflict_free_in_any_phase<Tile, T>(b_load, Tile::V));
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

TEMPLATE_TEST_CASE("the host GEMM plan shrinks tiles with the product and keeps every thread busy",
                   "[internal][matmul]", float, double) {
  using Blk = kten::detail::HostGemmBlocking<TestType>;
  using kten::detail::plan_host_gemm;
  auto shape = [](std::int64_t m, std::int64_t n, std::int64_t k) {
    return kten::detail::GemmShape{m, n, k, k, 1, n, 1};
  };
  for (auto [m, n, threads] : std::vector<std::array<std::int64_t, 3>>{
           {100, 100, 1}, {100, 100, 2}, {100, 100, 3}, {2048, 2048, 2}, {1024, 1024, 2}, {512, 512, 2},
           {32, 1024, 2}, {1000, 40, 2}, {2048, 2048, 48}, {100, 100, 16}, {7, 9, 4}, {3, 3, 2}, {1, 1, 1}}) {
    CAPTURE(m, n, threads);
    const auto plan = plan_host_gemm<TestType>(shape(m, n, 64), static_cast<int>(threads));
    CHECK(plan.rows % Blk::rows == 0);
    CHECK(plan.cols % Blk::cols == 0);
    CHECK(plan.cols <= Blk::nc);
    // The tiles cover C, none of them empty, and padding stays within one micro-tile.
    CHECK(plan.tiles_m * plan.rows >= m);
    CHECK((plan.tiles_m - 1) * plan.rows < m);
    CHECK(plan.tiles_n * plan.cols >= n);
    CHECK((plan.tiles_n - 1) * plan.cols < n);
    CHECK(plan.rows < m + Blk::rows);
    CHECK(plan.cols < n + Blk::cols);
    if (threads == 1) CHECK(plan.tiles_m == 1);
    // Every thread gets a tile when there are enough micro-tiles, and the tiles share out evenly,
    // or there are plenty of them, or they cannot be cut finer.
    const std::int64_t micro_tiles = (m + Blk::rows - 1) / Blk::rows * ((n + Blk::cols - 1) / Blk::cols);
    CHECK(plan.tiles() >= std::min(threads, micro_tiles));
    CHECK((plan.tiles() % threads == 0 || plan.tiles() >= 4 * threads || plan.tiles() == micro_tiles));
  }
}

TEMPLATE_TEST_CASE("the host GEMM is right on every path, transposes, bias and accumulation",
                   "[internal][matmul]", float, double) {
  using T = TestType;
  using Blk = kten::detail::HostGemmBlocking<T>;
  const kten::detail::HostBackend host;
  // Tiny products for the direct kernel (k = 0 too, a Linear layer's input gradient 32x2 by k = 1,
  // k = 32 on 2x2) and just past it; smaller than one micro-tile; one tile with an edge strip and
  // edge columns, narrow and wide; several k-slices and column blocks, big enough to run on every
  // thread.
  const std::int64_t direct = kten::detail::host_direct_gemm_macs;
  const std::vector<std::array<std::int64_t, 3>> tiny = {{5, 7, 3}, {3, 2, 0}, {32, 2, 1}, {2, 2, 32}, {direct / 2, 2, 1}};
  std::vector<std::array<std::int64_t, 3>> shapes = tiny;
  shapes.insert(shapes.end(), {{2, 2, direct / 4 + 1},
                               {2 * Blk::rows + 3, Blk::cols + 5, 17},
                               {Blk::rows, Blk::cols - 1, 4},
                               {Blk::rows, Blk::lanes + 1, 4},
                               {Blk::rows + 1, Blk::nc + Blk::cols + 3, Blk::kc + 5}});
  for (auto [m, n, k] : shapes)
    for (const auto& g : kten::test::gemm_variants(m, n, k)) {
      CAPTURE(m, n, k, g.transpose_a, g.transpose_b, g.with_bias, g.accumulate);
      auto o = kten::test::make_gemm<T>(g);
      kten::detail::gemm_kernel(host, static_cast<const T*>(o.A.data()), static_cast<const T*>(o.B.data()),
                                static_cast<T*>(o.C.data()), kten::test::bias_of(g, o), g.accumulate, o.s);
      kten::test::require_allclose<T>(o.C, o.ref, 1e-4 * (sizeof(T) == 4), sizeof(T) == 4 ? 1e-4 : 1e-12);
    }
  // The tiled kernel on the products gemm_kernel hands to the direct kernel.
  for (auto [m, n, k] : tiny)
    for (const auto& g : kten::test::gemm_variants(m, n, k)) {
      CAPTURE(m, n, k, g.transpose_a, g.transpose_b, g.with_bias, g.accumulate);
      auto o = kten::test::make_gemm<T>(g);
      kten::detail::run_host_gemm(host, kten::detail::plan_host_gemm<T>(o.s, 1), static_cast<const T*>(o.A.data()),
                                  static_cast<const T*>(o.B.data()), static_cast<T*>(o.C.data()),
                                  kten::test::bias_of(g, o), g.accumulate, o.s);
      kten::test::require_allclose<T>(o.C, o.ref, 1e-4 * (sizeof(T) == 4), sizeof(T) == 4 ? 1e-4 : 1e-12);
    }
  // Every split the plan makes for 1 to 7 threads, run as planned.
  for (int threads = 1; threads <= 7; ++threads)
    for (const auto& g : kten::test::gemm_variants(3 * Blk::rows + 2, 2 * Blk::cols + 1, 9)) {
      CAPTURE(threads, g.transpose_a, g.transpose_b, g.with_bias, g.accumulate);
      auto o = kten::test::make_gemm<T>(g);
      const auto plan = kten::detail::plan_host_gemm<T>(o.s, threads);
      kten::detail::run_host_gemm(kten::detail::HostBackend{}, plan, static_cast<const T*>(o.A.data()),
                                  static_cast<const T*>(o.B.data()), static_cast<T*>(o.C.data()),
                                  kten::test::bias_of(g, o), g.accumulate, o.s);
      kten::test::require_allclose<T>(o.C, o.ref, 1e-5 * (sizeof(T) == 4), sizeof(T) == 4 ? 1e-5 : 1e-12);
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

TEMPLATE_TEST_CASE("the GPU GEMM layouts' shared-memory accesses are free of bank conflicts",
                   "[internal][matmul]", float, double) {
  using kten::detail::GpuVendor;
  using kten::detail::GpuNarrowTiling;
  using kten::detail::GpuTiling;
  SECTION("NVIDIA: 8 warps of 32 lanes") { kten::test::check_bank_conflicts<TestType, GpuTiling<TestType, GpuVendor::nvidia>>(); }
  SECTION("AMD: 4 wavefronts of 64 lanes") { kten::test::check_bank_conflicts<TestType, GpuTiling<TestType, GpuVendor::amd>>(); }
  SECTION("NVIDIA, narrow: 4 warps side by side") {
    kten::test::check_bank_conflicts<TestType, GpuNarrowTiling<TestType, GpuVendor::nvidia>>();
  }
  SECTION("AMD, narrow: 2 wavefronts side by side") {
    kten::test::check_bank_conflicts<TestType, GpuNarrowTiling<TestType, GpuVendor::amd>>();
  }
}
