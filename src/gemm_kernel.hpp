#pragma once
// Internal: the matrix-product kernels, written once for every backend. C = op(A) op(B) (+ bias
// along columns) (+ C). Strides express the transposes. Three kernels:
//  - HostGemmKernel (cpu()): FLOP-bound; one thread per BM x BN tile packs slices of op(A) and
//    op(B) into scratch in the order its inner loop reads them, and walks TM x TN micro-tiles with
//    the accumulators in registers (TN spans two SIMD registers, TM = 6 rows: 12 accumulators on
//    AVX2), fed by explicit fma. C carries the partial sums between k-slices.
//  - TeamGemmKernel (GPUs, real and emulated): the SIMT SGEMM ladder (2-D block tiling, k-major
//    shared-memory tiles, 128-bit shared-memory loads, warp tiling). A team of `threads` threads
//    loads a BK-deep slice of op(A) and op(B) into padded k-major scratch, then each thread
//    multiplies its 2V x 2V micro-tile (V = elements per 128 bits) from registers: per k step it
//    loads two V-vectors of A and two of B and issues 4V^2 fmas. TeamTiling's index functions
//    are what a host test checks for shared-memory bank conflicts.
//  - GemvKernel (n == 1 or m == 1): a matrix-vector product needs no tiling; on a GPU a warp per
//    row reads it coalesced and reduces in registers.

#include <cstdint>

#include <kten/detail/kokkos_compat.hpp>

#include "dispatch.hpp"

namespace kten::detail {

/// \brief Extents and strides of C (m x n) = op(A) (m x k) * op(B) (k x n).
struct GemmShape {
  std::int64_t m, n, k;
  std::int64_t a_row, a_col;  // op(A)(i, p) = A[i * a_row + p * a_col]
  std::int64_t b_row, b_col;  // op(B)(p, j) = B[p * b_row + j * b_col]
};

/// \brief The operands of C = op(A) op(B) (+ bias along columns) (+ C), as the tiled kernels take them.
template <class T>
struct GemmArgs {
  const T *A, *B;
  T* C;
  const T* bias;
  bool accumulate;
  GemmShape s;
  std::int64_t tiles_n;  // tiles along n: tile t covers rows (t / tiles_n) and columns (t % tiles_n)
};

// --- host --------------------------------------------------------------------------------------

/// \brief Host tile sizes: BK = 192 keeps a packed B slice in L2 (tuned on AVX2 by kten-perf).
template <class T>
struct HostGemmTiling {
  static constexpr int TM = 6, TN = 64 / sizeof(T), BM = 32 * TM, BN = 32 * TN, BK = 192;
};

template <class T, class Member, class Scratch>
struct HostGemmKernel {
  using Tile = HostGemmTiling<T>;
  GemmArgs<T> args;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const auto& [A, B, C, bias, accumulate, s, tiles_n] = args;
    constexpr int TM = Tile::TM, TN = Tile::TN, BM = Tile::BM, BN = Tile::BN, BK = Tile::BK;
    const std::int64_t i0 = (team.league_rank() / tiles_n) * BM, j0 = (team.league_rank() % tiles_n) * BN;
    Scratch As(team.team_scratch(1), BM * BK), Bs(team.team_scratch(1), BK * BN);
    for (std::int64_t k0 = 0; k0 < s.k || k0 == 0; k0 += BK) {
      const int kb = s.k - k0 < BK ? static_cast<int>(s.k - k0) : BK;
      const bool first = k0 == 0, last = k0 + BK >= s.k;
      // Pack: As[(mr * kb + p) * TM + r] = A(i0 + mr*TM + r, k0 + p); Bs likewise by TN columns.
      for (int row = 0; row < BM; ++row) {
        const std::int64_t i = i0 + row;
        for (int p = 0; p < kb; ++p)
          As((row / TM * kb + p) * TM + row % TM) = i < s.m ? A[i * s.a_row + (k0 + p) * s.a_col] : T(0);
      }
      for (int p = 0; p < kb; ++p)
        for (int col = 0; col < BN; ++col) {
          const std::int64_t j = j0 + col;
          Bs((col / TN * kb + p) * TN + col % TN) = j < s.n ? B[(k0 + p) * s.b_row + j * s.b_col] : T(0);
        }
      for (int mr = 0; mr < BM / TM; ++mr)
        for (int mc = 0; mc < BN / TN; ++mc) {
          const std::int64_t ib = i0 + mr * TM, jb = j0 + mc * TN;
          if (ib >= s.m || jb >= s.n) continue;
          T acc[TM * TN];
          for (int r = 0; r < TM; ++r)
            for (int c = 0; c < TN; ++c) {
              const std::int64_t i = ib + r, j = jb + c;
              acc[r * TN + c] = (first && !accumulate) || i >= s.m || j >= s.n ? T(0) : C[i * s.n + j];
            }
          const T* a = &As(mr * kb * TM);
          const T* b = &Bs(mc * kb * TN);
          for (int p = 0; p < kb; ++p) {
            const T* ap = a + p * TM;
            const T* bp = b + p * TN;
            KTEN_UNROLL
            for (int r = 0; r < TM; ++r) {
              const T av = ap[r];
              KTEN_UNROLL
              for (int c = 0; c < TN; ++c) acc[r * TN + c] = compat::fma(av, bp[c], acc[r * TN + c]);
            }
          }
          for (int r = 0; r < TM; ++r)
            for (int c = 0; c < TN; ++c) {
              const std::int64_t i = ib + r, j = jb + c;
              if (i < s.m && j < s.n) C[i * s.n + j] = last && bias ? acc[r * TN + c] + bias[j] : acc[r * TN + c];
            }
        }
    }
  }
};

// --- GPU (cooperative team) --------------------------------------------------------------------

/// \brief The team layout of the GPU kernel. A team is warps_m x warps_n warps of
/// lanes_m x lanes_n lanes; each thread owns a (2V) x (2V) micro-tile made of two V-row halves
/// WM/2 apart and two V-column halves WN/2 apart, so that the 8 lanes of a 128-bit
/// shared-memory phase read 32 consecutive words of B (and one broadcast word range of A).
/// Scratch holds BK-deep slices k-major (row p holds op(A)(:, p) or op(B)(p, :)), each row padded
/// by V elements so that stores of either operand layout hit 32 distinct banks.
template <class T, int LanesM, int LanesN, int WarpsM, int WarpsN>
struct TeamTiling {
  static constexpr int V = 16 / static_cast<int>(sizeof(T));  // elements per 128-bit access
  static constexpr int TM = 2 * V, TN = 2 * V;
  static constexpr int lanes_m = LanesM, lanes_n = LanesN, warps_m = WarpsM, warps_n = WarpsN;
  static constexpr int warp_size = LanesM * LanesN;
  static constexpr int threads = warp_size * WarpsM * WarpsN;
  static constexpr int WM = LanesM * TM, WN = LanesN * TN;  // warp tile
  static constexpr int BM = WarpsM * WM, BN = WarpsN * WN, BK = 8;
  static constexpr int lda = BM + V, ldb = BN + V;  // padded scratch rows (elements)
  static constexpr std::size_t scratch_bytes = sizeof(T) * BK * (lda + ldb) + 2 * 16;  // + alignment slack

  /// \brief A V-element vector: every scratch access is one aligned 128-bit load or part of it.
  struct alignas(16) Vec {
    T v[V];
  };

  /// \brief First row (within the block tile) of half `h` of thread `rank`'s micro-tile.
  KOKKOS_INLINE_FUNCTION static int thread_row(int rank, int h) {
    const int warp = rank / warp_size, lane = rank % warp_size;
    return (warp / WarpsN) * WM + h * (WM / 2) + (lane / LanesN) * V;
  }
  /// \brief First column of half `h` of thread `rank`'s micro-tile.
  KOKKOS_INLINE_FUNCTION static int thread_col(int rank, int h) {
    const int warp = rank / warp_size, lane = rank % warp_size;
    return (warp % WarpsN) * WN + h * (WN / 2) + (lane % LanesN) * V;
  }
  /// \brief Element e of the op(A) slice a team loads: adjacent e go along whichever of i and p is
  /// contiguous in memory (coalesced global reads).
  KOKKOS_INLINE_FUNCTION static void a_element(int e, bool k_contiguous, int& i, int& p) {
    if (k_contiguous) i = e / BK, p = e % BK;
    else i = e % BM, p = e / BM;
  }
  /// \brief Element e of the op(B) slice.
  KOKKOS_INLINE_FUNCTION static void b_element(int e, bool n_contiguous, int& p, int& j) {
    if (n_contiguous) p = e / BN, j = e % BN;
    else p = e % BK, j = e / BK;
  }
  /// \brief Scratch offsets (elements) of op(A)(i, p) and op(B)(p, j).
  KOKKOS_INLINE_FUNCTION static int a_offset(int i, int p) { return p * lda + i; }
  KOKKOS_INLINE_FUNCTION static int b_offset(int p, int j) { return p * ldb + j; }
};

/// \brief The layout real GPUs run: 8 warps of 32 lanes (4 x 8), 4 x 2 warps; 128 x 128 float or
/// 64 x 64 double tiles, 256 threads, 8x8 (float) or 4x4 (double) per thread.
template <class T>
using GpuTiling = TeamTiling<T, 4, 8, 4, 2>;
/// \brief The same kernel on an emulated GPU: a team of as many host threads as `Threads` (1 or 2).
template <class T, int Threads>
using EmulatedTiling = TeamTiling<T, 1, Threads, 1, 1>;

static_assert(GpuTiling<float>::threads == 256 && GpuTiling<double>::threads == 256,
              "one team is 256 threads: 8 warps");
static_assert(GpuTiling<float>::warp_size == 32, "a warp is 32 lanes");
static_assert(GpuTiling<float>::scratch_bytes <= 48 * 1024 && GpuTiling<double>::scratch_bytes <= 48 * 1024,
              "scratch must fit the 48 KiB of shared memory every CUDA GPU gives a block without opt-in");

template <class T, class Tile, class Member>
struct TeamGemmKernel {
  GemmArgs<T> args;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const auto& [A, B, C, bias, accumulate, s, tiles_n] = args;
    constexpr int V = Tile::V, BM = Tile::BM, BN = Tile::BN, BK = Tile::BK;
    using Vec = typename Tile::Vec;
    Vec* As = static_cast<Vec*>(team.team_scratch(0).get_shmem_aligned(sizeof(T) * BK * Tile::lda, 16));
    Vec* Bs = static_cast<Vec*>(team.team_scratch(0).get_shmem_aligned(sizeof(T) * BK * Tile::ldb, 16));
    const int rank = team.team_rank();
    const std::int64_t i0 = (team.league_rank() / tiles_n) * BM, j0 = (team.league_rank() % tiles_n) * BN;
    const bool a_k_contiguous = s.a_col == 1, b_n_contiguous = s.b_col == 1;
    T acc[2 * V][2 * V] = {};
    for (std::int64_t k0 = 0; k0 < s.k; k0 += BK) {
      for (int e = rank; e < BM * BK; e += Tile::threads) {
        int i, p;
        Tile::a_element(e, a_k_contiguous, i, p);
        const std::int64_t gi = i0 + i, gp = k0 + p;
        const int o = Tile::a_offset(i, p);
        As[o / V].v[o % V] = gi < s.m && gp < s.k ? A[gi * s.a_row + gp * s.a_col] : T(0);
      }
      for (int e = rank; e < BK * BN; e += Tile::threads) {
        int p, j;
        Tile::b_element(e, b_n_contiguous, p, j);
        const std::int64_t gp = k0 + p, gj = j0 + j;
        const int o = Tile::b_offset(p, j);
        Bs[o / V].v[o % V] = gp < s.k && gj < s.n ? B[gp * s.b_row + gj * s.b_col] : T(0);
      }
      team.team_barrier();
      for (int p = 0; p < BK; ++p) {
        Vec a[2], b[2];
        for (int h = 0; h < 2; ++h) {
          a[h] = As[Tile::a_offset(Tile::thread_row(rank, h), p) / V];
          b[h] = Bs[Tile::b_offset(p, Tile::thread_col(rank, h)) / V];
        }
        KTEN_UNROLL
        for (int r = 0; r < 2 * V; ++r) {
          KTEN_UNROLL
          for (int c = 0; c < 2 * V; ++c)
            acc[r][c] = compat::fma(a[r / V].v[r % V], b[c / V].v[c % V], acc[r][c]);
        }
      }
      team.team_barrier();  // the next slice overwrites the scratch
    }
    for (int r = 0; r < 2 * V; ++r) {
      const std::int64_t i = i0 + Tile::thread_row(rank, r / V) + r % V;
      if (i >= s.m) continue;
      for (int c = 0; c < 2 * V; ++c) {
        const std::int64_t j = j0 + Tile::thread_col(rank, c / V) + c % V;
        if (j >= s.n) continue;
        T v = acc[r][c];
        if (bias) v += bias[j];
        if (accumulate) v += C[i * s.n + j];
        C[i * s.n + j] = v;
      }
    }
  }
};

// --- matrix-vector ---------------------------------------------------------------------------

/// \brief y[r] = sum_p A(r, p) x[p * x_stride] (+ bias[r * bias_stride]) (+ y[r]) for r < rows,
/// with A(r, p) = A[r * row + p * col]: C = op(A) x when n == 1, and C^T = op(B)^T op(A)^T when
/// m == 1. Memory-bound: no tiling, one pass over the matrix.
template <class T>
struct GemvKernel {
  const T* A;
  std::int64_t row, col;
  const T* x;
  std::int64_t x_stride;
  T* y;
  const T* bias;
  std::int64_t bias_stride;
  bool accumulate;
  std::int64_t rows, k;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const {
    T acc = T(0);
    for (std::int64_t p = 0; p < k; ++p) acc = compat::fma(A[r * row + p * col], x[p * x_stride], acc);
    finish(r, acc);
  }
  KOKKOS_INLINE_FUNCTION void finish(std::int64_t r, T acc) const {
    if (bias) acc += bias[r * bias_stride];
    if (accumulate) acc += y[r];
    y[r] = acc;
  }
};

/// \brief The same on a GPU when rows are contiguous (col == 1): a warp per row (vector lanes
/// reading it coalesced and reducing in registers), kRows rows per team.
template <class T, class Member>
struct GemvTeamKernel {
  static constexpr int kRows = 8;
  GemvKernel<T> gemv;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, kRows), [&](int local) {
      const std::int64_t r = static_cast<std::int64_t>(team.league_rank()) * kRows + local;
      if (r >= gemv.rows) return;
      const T* a = gemv.A + r * gemv.row;
      T acc = T(0);
      Kokkos::parallel_reduce(Kokkos::ThreadVectorRange(team, gemv.k),
                              [&](std::int64_t p, T& part) { part += a[p] * gemv.x[p * gemv.x_stride]; }, acc);
      Kokkos::single(Kokkos::PerThread(team), [&]() { gemv.finish(r, acc); });
    });
  }
};

template <class Backend, class T>
void launch_gemv(const Backend& be, const GemvKernel<T>& gemv) {
  if constexpr (!Backend::is_host) {
    using Kernel = GemvTeamKernel<T, typename TeamPolicy<Backend>::member_type>;
    const std::int64_t league = (gemv.rows + Kernel::kRows - 1) / Kernel::kRows;
    if (gemv.col == 1 && gemv.k >= 64 && league <= INT32_MAX) {
      run("kten::gemv", be, team_policy(be, static_cast<int>(league), Kernel::kRows, 32), Kernel{gemv});
      return;
    }
  }
  for_each_index("kten::gemv", be, gemv.rows, gemv);
}

// --- launch ------------------------------------------------------------------------------------

template <class Tile, class Backend, class T>
void launch_team_gemm(const Backend& be, const T* A, const T* B, T* C, const T* bias, bool accumulate,
                      const GemmShape& s) {
  const std::int64_t tiles_n = (s.n + Tile::BN - 1) / Tile::BN, tiles = ((s.m + Tile::BM - 1) / Tile::BM) * tiles_n;
  if (tiles > INT32_MAX) throw ShapeError("kten: matmul: the product has more tiles than a GPU launch can hold");
  check_launch_thread<Backend, TeamPolicy<Backend>>(false);  // before Kokkos sizes the team
  using Policy = TeamPolicy<Backend>;
  Policy policy(be.space, static_cast<int>(tiles), Tile::threads);
  run("kten::gemm", be, policy.set_scratch_size(0, Kokkos::PerTeam(Tile::scratch_bytes)),
      TeamGemmKernel<T, Tile, typename Policy::member_type>{{A, B, C, bias, accumulate, s, tiles_n}});
}

template <class Backend, class T>
void gemm_kernel(const Backend& be, const T* A, const T* B, T* C, const T* bias, bool accumulate, const GemmShape& s) {
  if (s.m == 0 || s.n == 0) return;
  if (s.n == 1) return launch_gemv(be, GemvKernel<T>{A, s.a_row, s.a_col, B, s.b_row, C, bias, 0, accumulate, s.m, s.k});
  if (s.m == 1) return launch_gemv(be, GemvKernel<T>{B, s.b_col, s.b_row, A, s.a_col, C, bias, 1, accumulate, s.n, s.k});
  if constexpr (Backend::is_host) {
    using Tile = HostGemmTiling<T>;
    using Policy = TeamPolicy<Backend>;
    using Scratch = Kokkos::View<T*, typename Backend::execution_space::scratch_memory_space,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const std::int64_t tiles_n = (s.n + Tile::BN - 1) / Tile::BN, tiles = ((s.m + Tile::BM - 1) / Tile::BM) * tiles_n;
    const std::size_t scratch = Scratch::shmem_size(Tile::BM * Tile::BK) + Scratch::shmem_size(Tile::BK * Tile::BN);
    Policy policy(be.space, static_cast<int>(tiles), 1);
    run("kten::gemm", be, policy.set_scratch_size(1, Kokkos::PerTeam(scratch)),
        HostGemmKernel<T, typename Policy::member_type, Scratch>{{A, B, C, bias, accumulate, s, tiles_n}});
  } else if constexpr (Backend::emulated) {
    // The GPU kernel with a team of host threads: 2 where the host has them, so barriers matter.
    if (be.space.concurrency() >= 2) launch_team_gemm<EmulatedTiling<T, 2>>(be, A, B, C, bias, accumulate, s);
    else launch_team_gemm<EmulatedTiling<T, 1>>(be, A, B, C, bias, accumulate, s);
  } else {
    launch_team_gemm<GpuTiling<T>>(be, A, B, C, bias, accumulate, s);
  }
}

}  // namespace kten::detail
