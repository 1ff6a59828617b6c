// White-box tests of the GEMM kernels' structure, run on the host:
//  - the cooperative (GPU) kernel, with teams of 1 and 2 host threads, on odd shapes and
//    transposed operands (the emulated-GPU suite runs it too, through matmul);
//  - the real GPU layout (256 threads: 8 warps of 32 lanes) run by 256 host threads with a
//    stand-in team member, so its thread mapping, barriers and edges are exercised exactly;
//  - the shared-memory bank-conflict degree of the real GPU layout's scratch accesses, computed
//    from the same index functions the kernel uses, for every warp of a team.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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

template <class T>
void check_gpu_layout(std::int64_t m, std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b) {
  using Tile = detail::GpuTiling<T>;
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
  const detail::TeamGemmKernel<T, Tile, StandInMember> kernel{
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

template <class T>
void check_gpu_layout_covers_the_tile() {
  using Tile = detail::GpuTiling<T>;
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

TEMPLATE_TEST_CASE("the real GPU GEMM layout computes every element once, with 256 threads per team",
                   "[internal][matmul]", float, double) {
  using T = TestType;
  kten::test::check_gpu_layout_covers_the_tile<T>();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta, tb);
      kten::test::check_gpu_layout<T>(13, 11, 21, ta, tb);    // one partial tile
      kten::test::check_gpu_layout<T>(130, 129, 9, ta, tb);   // tiles in both directions, partial k-slice
    }
  kten::test::check_gpu_layout<T>(5, 70, 0, false, false);  // k = 0: bias + C
}

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
