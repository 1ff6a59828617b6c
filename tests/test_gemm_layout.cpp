// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The real GPU GEMM layouts (256 threads: 8 warps of 32 lanes for NVIDIA, 4 wavefronts of 64 for
// AMD; the narrow ones for few rows 128) run by as many host threads with a stand-in team member,
// so their thread mapping, barriers, the register prefetch of the next slice,
// scratch alignment and edges are exercised exactly as a GPU block runs them. Host-only builds: in a CUDA build the kernel is
// __host__ __device__ and may not call the stand-in's host-only barrier (nvcc rejects it).
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <type_traits>

#include <catch2/catch_template_test_macros.hpp>

#include "ops/gemm_kernel.hpp"
#include "support.hpp"

namespace kten::test {

/// A team of host threads standing in for a GPU block: rank, league, barrier, aligned scratch.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      all_here_.notify_all();
    } else {
      all_here_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_here_;
  const int count_;
  int waiting_ = 0;
  long generation_ = 0;
};

struct StandInScratch {
  mutable char* next;
  char* end;
  void* get_shmem_aligned(std::size_t bytes, std::ptrdiff_t alignment) const {
    const auto misaligned = reinterpret_cast<std::uintptr_t>(next) % alignment;
    if (misaligned) next += alignment - misaligned;
    void* p = next;
    next += bytes;
    if (next > end) {  // the kernel must stay within the scratch it asked for (no Catch2 off the main thread)
      std::fprintf(stderr, "TeamGemmKernel used more team scratch than scratch_bytes\n");
      std::abort();
    }
    return p;
  }
};

struct StandInMember {
  int rank, league;
  Barrier* barrier;
  StandInScratch scratch;
  int team_rank() const { return rank; }
  int league_rank() const { return league; }
  void team_barrier() const { barrier->arrive_and_wait(); }
  const StandInScratch& team_scratch(int) const { return scratch; }
};

/// A strided op(B) read the way the convolutions read their gathered one (tabled offsets, the next
/// slice prefetched).
template <class T>
struct Gathered : detail::StridedOperand<T> {
  static constexpr bool gathered = true;
  Gathered(const T* data, std::int64_t row_stride, std::int64_t col_stride) : detail::StridedOperand<T>{data, row_stride, col_stride} {}
};

template <class T, class Tile, bool Gather>
void check_gpu_layout(std::int64_t m, std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b) {
  const Shape a_shape = transpose_a ? Shape{k, m} : Shape{m, k}, b_shape = transpose_b ? Shape{n, k} : Shape{k, n};
  auto A = uniform(a_shape, -1, 1, cpu(), 1, dtype_of<T>()), B = uniform(b_shape, -1, 1, cpu(), 2, dtype_of<T>());
  auto bias = uniform({n}, -1, 1, cpu(), 3, dtype_of<T>()), C = uniform({m, n}, -1, 1, cpu(), 4, dtype_of<T>());
  const auto ha = host_doubles<T>(A), hb = host_doubles<T>(B), hbias = host_doubles<T>(bias), hc = host_doubles<T>(C);
  detail::GemmShape s{m, n, k, transpose_a ? 1 : k, transpose_a ? m : 1, transpose_b ? 1 : n, transpose_b ? k : 1};
  std::vector<double> ref(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double v = hbias[j] + hc[i * n + j];
      for (std::int64_t p = 0; p < k; ++p) v += ha[i * s.a_row + p * s.a_col] * hb[p * s.b_row + j * s.b_col];
      ref[i * n + j] = v;
    }
  const std::int64_t tiles_n = (n + Tile::BN - 1) / Tile::BN, tiles = ((m + Tile::BM - 1) / Tile::BM) * tiles_n;
  const detail::TeamGemmKernel<T, Tile, StandInMember, std::conditional_t<Gather, Gathered<T>, detail::StridedOperand<T>>> kernel{
      {static_cast<const T*>(A.data()), static_cast<const T*>(B.data()), static_cast<T*>(C.data()),
       static_cast<const T*>(bias.data()), true, s, tiles_n}};
  std::vector<char> shared(Tile::scratch_bytes + 8);
  for (int league = 0; league < tiles; ++league) {
    Barrier barrier(Tile::threads);
    std::vector<std::thread> team;
    // Kokkos may start team scratch 8 bytes past a 16-byte boundary: the kernel must realign.
    StandInScratch scratch{shared.data() + 8, shared.data() + shared.size()};
    for (int rank = 0; rank < Tile::threads; ++rank)
      team.emplace_back([&, rank] {
        StandInScratch own{scratch.next, scratch.end};
        kernel(StandInMember{rank, league, &barrier, own});
      });
    for (auto& thread : team) thread.join();
  }
  require_allclose<T>(C, ref);
}

template <class T, class Tile>
void check_gpu_layout_covers_the_tile() {
  std::vector<int> owners(Tile::BM * Tile::BN, 0);
  for (int rank = 0; rank < Tile::threads; ++rank)
    for (int hr = 0; hr < 2; ++hr)
      for (int hc = 0; hc < 2; ++hc)
        for (int r = 0; r < Tile::V; ++r)
          for (int c = 0; c < Tile::V; ++c)
            ++owners[(Tile::thread_row(rank, hr) + r) * Tile::BN + Tile::thread_col(rank, hc) + c];
  CHECK(std::count(owners.begin(), owners.end(), 1) == Tile::BM * Tile::BN);
}

}  // namespace kten::test

namespace kten::test {
template <class T, class Tile>
void check_gpu_layout_of() {
  check_gpu_layout_covers_the_tile<T, Tile>();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta, tb);
      check_gpu_layout<T, Tile, false>(13, 11, 21, ta, tb);   // one partial tile
      check_gpu_layout<T, Tile, false>(130, 129, 9, ta, tb);  // tiles in both directions, partial k-slice
      check_gpu_layout<T, Tile, true>(33, 140, 17, ta, tb);   // the next slice in flight, partial last
    }
  check_gpu_layout<T, Tile, false>(5, 70, 0, false, false);  // k = 0: bias + C
  check_gpu_layout<T, Tile, true>(5, 70, 0, false, false);
}
}  // namespace kten::test

TEMPLATE_TEST_CASE("the real GPU GEMM layouts compute every element once, with a block's threads per team",
                   "[internal][matmul]", float, double) {
  using kten::detail::GpuNarrowTiling;
  using kten::detail::GpuTiling;
  using kten::detail::GpuVendor;
  using T = TestType;
  SECTION("NVIDIA: 8 warps of 32 lanes") { kten::test::check_gpu_layout_of<T, GpuTiling<T, GpuVendor::nvidia>>(); }
  SECTION("AMD: 4 wavefronts of 64 lanes") { kten::test::check_gpu_layout_of<T, GpuTiling<T, GpuVendor::amd>>(); }
  SECTION("NVIDIA, narrow: 4 warps") { kten::test::check_gpu_layout_of<T, GpuNarrowTiling<T, GpuVendor::nvidia>>(); }
  SECTION("AMD, narrow: 2 wavefronts") { kten::test::check_gpu_layout_of<T, GpuNarrowTiling<T, GpuVendor::amd>>(); }
}
