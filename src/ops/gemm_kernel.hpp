// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the matrix-product kernels, written once for every backend. C = op(A) op(B) (+ bias
// along columns) (+ C). Strides express the transposes. Three kernels:
//  - HostGemmKernel (cpu()): FLOP-bound; BLIS' loop structure written as one Kokkos kernel, with
//    the micro-tile shape and cache blocking of the vector ISA the build targets (host_isa.hpp):
//    one thread per tile of C packs a k-slice of op(B) into an L2-sized block and streams strips
//    of op(A) past it, keeping a rows x cols micro-tile of C in registers (10 x 32 floats on
//    AVX-512: 20 zmm accumulators). Tiles shrink with the problem and split until every thread
//    has work; small products run on the calling thread.
//  - TeamGemmKernel (GPUs, real and emulated): the SIMT SGEMM ladder (2-D block tiling, k-major
//    shared-memory tiles, 128-bit shared-memory loads, warp tiling). A team of `threads` threads
//    loads a BK-deep slice of op(A) and op(B) into padded k-major scratch, then each thread
//    multiplies its 2V x 2V micro-tile (V = elements per 128 bits) from registers: per k step it
//    loads two V-vectors of A and two of B and issues 4V^2 fmas. TeamTiling's index functions
//    are what a host test checks for shared-memory bank conflicts.
//  - GemvKernel (n == 1 or m == 1): a matrix-vector product needs no tiling; on a GPU a warp
//    (wavefront) per row reads it coalesced and reduces in registers, on cpu() a contiguous row
//    folds into vector lanes (HostGemvKernel).
// The GPU kernels' shapes (warp width, team layout, gemv lanes, block size) are chosen per GPU
// vendor in one place, GpuKernelShape below; the vendor itself is dispatch/gpu_vendor.hpp's.

#include <algorithm>
#include <cstdint>

#include "core/kokkos_compat.hpp"

#include "core/fail.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/gpu_vendor.hpp"
#include "dispatch/host_isa.hpp"

namespace kten::detail {

/// \brief The kernels' labels, as profilers show them.
inline constexpr const char* gemm_label = "kten::gemm";
inline constexpr const char* gemv_label = "kten::gemv";

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

/// \brief What a multiply-add weighs against the serial grain of with_grain, which
/// counts elements of a bandwidth-bound operation: a product runs on the calling thread below
/// 8 x 8192 = 65536 multiply-adds (about 40^3); two threads win from about 48^3 on (measured;
/// docs/performance.md).
inline constexpr double host_gemm_macs_per_element = 8;

/// \brief How the host cuts C: tiles of `rows` x `cols` (whole micro-tiles), `tiles_m` x
/// `tiles_n` of them, one per team (thread).
struct HostGemmPlan {
  std::int64_t rows = 0, cols = 0, tiles_m = 0, tiles_n = 0;
  std::int64_t tiles() const { return tiles_m * tiles_n; }
};

/// \brief The tiling of a product on `threads` threads. Tiles are as tall as C and at most
/// HostGemmBlocking::nc wide, so they shrink with the problem (no padding beyond one micro-tile);
/// then, while the tiles would not share out evenly over the threads, the side with more
/// micro-tiles per tile is cut once more (rows cost a re-packed B slice, columns nothing).
template <class T>
HostGemmPlan plan_host_gemm(const GemmShape& s, int threads) {
  using Blk = HostGemmBlocking<T>;
  HostGemmPlan plan;
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const std::int64_t micro_rows = ceil_div(s.m, Blk::rows), micro_cols = ceil_div(s.n, Blk::cols);
  std::int64_t parts_m = 1, parts_n = ceil_div(micro_cols, Blk::nc / Blk::cols);
  std::int64_t per_m = micro_rows, per_n = ceil_div(micro_cols, parts_n);  // micro-tiles per tile
  auto tiles = [&] { return ceil_div(micro_rows, per_m) * ceil_div(micro_cols, per_n); };
  while (tiles() % threads != 0 && tiles() < 4 * static_cast<std::int64_t>(threads) && (per_m > 1 || per_n > 1)) {
    if (per_m >= per_n) per_m = ceil_div(micro_rows, ++parts_m);
    else per_n = ceil_div(micro_cols, ++parts_n);
  }
  plan.rows = per_m * Blk::rows;
  plan.cols = per_n * Blk::cols;
  plan.tiles_m = ceil_div(s.m, plan.rows);
  plan.tiles_n = ceil_div(s.n, plan.cols);
  return plan;
}

/// \brief One team (thread) per tile of C. Per k-slice the thread packs the tile's kc x cols slice
/// of op(B) into scratch as micro-panels (kc rows of one micro-tile's columns, zero past n), then
/// walks the tile's rows a strip of `rows` at a time: the strip of op(A) is read in place when A's
/// rows are contiguous (it stays in L1 across the strip's micro-tiles), packed otherwise and for
/// the last, partial strip. Each micro-tile keeps rows x cols accumulators in registers; an edge one runs
/// the narrowest whole-vector kernel that covers it. C carries the partial sums between k-slices.
template <class T, class Member>
struct HostGemmKernel {
  using Blk = HostGemmBlocking<T>;
  static constexpr int MR = Blk::rows, NR = Blk::cols, KC = Blk::kc;
  GemmArgs<T> args;  // args.tiles_n == plan.tiles_n
  HostGemmPlan plan;

  /// \brief Scratch bytes per team: the packed B slice and one packed A strip, 64-byte aligned.
  static std::size_t scratch_bytes(const HostGemmPlan& plan) {
    return sizeof(T) * (static_cast<std::size_t>(KC) * plan.cols + MR * KC) + 2 * 64;
  }

  /// \brief c (Rows x Cols, row stride ldc) += a b over kb steps of k (c = a b without
  /// Accumulate). a(r, p) is a[p * MR + r] when Packed, else a[r * lda + p]; b's rows lie ldb apart:
  /// a packed micro-panel (rows of NR) but for the direct convolution's rows read in place
  /// (conv_gemm.cpp, conv_direct.cpp, conv_winograd.cpp); the first Cols columns are used. Rows
  /// is MR but for the convolutions' shorter strips, which split a few channels evenly rather than
  /// pad the last strip to MR rows. The convolutions sum `parts` such products (the direct
  /// convolution's taps, the weight gradient's output rows) with the accumulators held in
  /// registers: part q's a from a + q * a_step, its b from b + b_offsets[q]. No branches around
  /// the loop: with them GCC keeps fewer accumulators in the 16 registers of AVX2 and spills the
  /// rest.
  template <bool Packed, int Cols, int Rows = MR, bool Accumulate = true>
  KOKKOS_INLINE_FUNCTION static void micro_tile(const T* a, std::int64_t lda, const T* b, int kb, T* c,
                                                std::int64_t ldc, std::int64_t ldb = NR, int parts = 1,
                                                std::int64_t a_step = 0, const std::int64_t* b_offsets = nullptr) {
    static_assert(Rows >= 1 && Rows <= MR, "a micro-tile holds at most MR rows");
    T acc[Rows * Cols];
    for (int r = 0; r < Rows; ++r)
      for (int j = 0; j < Cols; ++j) acc[r * Cols + j] = Accumulate ? c[r * ldc + j] : T(0);
    for (int q = 0; q < parts; ++q) {
      const T* aq = a + q * a_step;
      const T* bq = b_offsets ? b + b_offsets[q] : b;
      for (int p = 0; p < kb; ++p) {
        const T* bp = bq + p * ldb;
        KTEN_UNROLL
        for (int r = 0; r < Rows; ++r) {
          const T av = Packed ? aq[p * MR + r] : aq[r * lda + p];
          KTEN_UNROLL
          for (int j = 0; j < Cols; ++j) acc[r * Cols + j] = host_fma(av, bp[j], acc[r * Cols + j]);
        }
      }
    }
    for (int r = 0; r < Rows; ++r)
      for (int j = 0; j < Cols; ++j) c[r * ldc + j] = acc[r * Cols + j];
  }

  /// \brief An edge micro-tile, h <= MR rows by w <= NR columns of c: the narrowest kernel that
  /// covers w in whole vectors, run on a buffer so that only the h x w part touches C.
  template <bool Packed, int Cols>
  KOKKOS_INLINE_FUNCTION static void edge_tile(const T* a, std::int64_t lda, const T* b, int kb, T* c,
                                               std::int64_t ldc, int h, int w) {
    if constexpr (Cols > Blk::lanes) {
      if (w <= Cols - Blk::lanes) return edge_tile<Packed, Cols - Blk::lanes>(a, lda, b, kb, c, ldc, h, w);
    }
    T edge[MR * Cols] = {};
    for (int r = 0; r < h; ++r)
      for (int j = 0; j < w; ++j) edge[r * Cols + j] = c[r * ldc + j];
    micro_tile<Packed, Cols>(a, lda, b, kb, edge, Cols);
    for (int r = 0; r < h; ++r)
      for (int j = 0; j < w; ++j) c[r * ldc + j] = edge[r * Cols + j];
  }

  /// \brief Packs op(B)(k0 .. k0+kb, j0 .. j1) as micro-panels of NR columns, zero past j1.
  KOKKOS_INLINE_FUNCTION void pack_b(T* Bs, std::int64_t k0, int kb, std::int64_t j0, std::int64_t j1) const {
    const T* B = args.B;
    const GemmShape& s = args.s;
    for (std::int64_t jb = j0; jb < j1; jb += NR) {
      T* panel = Bs + (jb - j0) * kb;
      const int w = j1 - jb < NR ? static_cast<int>(j1 - jb) : NR;
      if (s.b_row == 1 && s.b_col != 1) {
        // op(B) column-major (a transposed view, e.g. Linear's (out, in) weight): each column is
        // read along k, contiguously, rather than gathered one element per column and row.
        for (int j = 0; j < NR; ++j) {
          const T* b = j < w ? B + k0 + (jb + j) * s.b_col : nullptr;
          for (int p = 0; p < kb; ++p) panel[p * NR + j] = b ? b[p] : T(0);
        }
        continue;
      }
      for (int p = 0; p < kb; ++p) {
        const T* b = B + (k0 + p) * s.b_row + jb * s.b_col;
        T* out = panel + p * NR;
        if (w == NR && s.b_col == 1)
          for (int j = 0; j < NR; ++j) out[j] = b[j];
        else
          for (int j = 0; j < NR; ++j) out[j] = j < w ? b[j * s.b_col] : T(0);
      }
    }
  }

  /// \brief Packs op(A)(i .. i+h, k0 .. k0+kb) p-major (As[p * MR + r]), zero rows past h.
  KOKKOS_INLINE_FUNCTION void pack_a(T* As, std::int64_t i, int h, std::int64_t k0, int kb) const {
    const T* A = args.A;
    const GemmShape& s = args.s;
    for (int p = 0; p < kb; ++p) {
      const T* a = A + i * s.a_row + (k0 + p) * s.a_col;
      for (int r = 0; r < MR; ++r) As[p * MR + r] = r < h ? a[r * s.a_row] : T(0);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const auto& [A, B, C, bias, accumulate, s, tiles_n] = args;
    const std::int64_t i0 = team.league_rank() / tiles_n * plan.rows;
    const std::int64_t j0 = team.league_rank() % tiles_n * plan.cols;
    const std::int64_t i1 = i0 + plan.rows < s.m ? i0 + plan.rows : s.m;
    const std::int64_t j1 = j0 + plan.cols < s.n ? j0 + plan.cols : s.n;
    T* Bs = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * KC * plan.cols, 64));
    T* As = static_cast<T*>(team.team_scratch(1).get_shmem_aligned(sizeof(T) * MR * KC, 64));
    // The tile starts from C (accumulate) or zero, plus the bias; the k-slices add the products.
    if (!accumulate || bias)
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j)
          C[i * s.n + j] = (accumulate ? C[i * s.n + j] : T(0)) + (bias ? bias[j] : T(0));
    for (std::int64_t k0 = 0; k0 < s.k; k0 += KC) {
      const int kb = s.k - k0 < KC ? static_cast<int>(s.k - k0) : KC;
      pack_b(Bs, k0, kb, j0, j1);
      for (std::int64_t i = i0; i < i1; i += MR) {
        const int h = i1 - i < MR ? static_cast<int>(i1 - i) : MR;
        const bool in_place = s.a_col == 1 && h == MR;
        if (!in_place) pack_a(As, i, h, k0, kb);
        const T* a = in_place ? A + i * s.a_row + k0 : As;
        for (std::int64_t jb = j0; jb < j1; jb += NR) {
          const int w = j1 - jb < NR ? static_cast<int>(j1 - jb) : NR;
          const T* b = Bs + (jb - j0) * kb;
          T* c = C + i * s.n + jb;
          if (in_place && w == NR) micro_tile<false, NR>(a, s.a_row, b, kb, c, s.n);
          else if (in_place) edge_tile<false, NR>(a, s.a_row, b, kb, c, s.n, h, w);
          else if (h == MR && w == NR) micro_tile<true, NR>(a, 0, b, kb, c, s.n);
          else edge_tile<true, NR>(a, 0, b, kb, c, s.n, h, w);
        }
      }
    }
  }
};

// --- GPU (cooperative team) --------------------------------------------------------------------

/// \brief The team layout of the GPU kernel. A team is warps_m x warps_n warps (AMD: wavefronts)
/// of lanes_m x lanes_n lanes; each thread owns a (2V) x (2V) micro-tile made of two V-row halves
/// WM/2 apart and two V-column halves WN/2 apart. With lanes_n = 8, the 8 lanes of a 128-bit
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
  static constexpr int a_loads = BM * BK / threads, b_loads = BK * BN / threads;  // per thread and slice
  static_assert(a_loads * threads == BM * BK && b_loads * threads == BK * BN, "every thread loads as many elements");
  /// \brief The two slices, then op(B)'s offsets: BN columns, and the rows of two slices.
  static constexpr std::size_t scratch_bytes =
      sizeof(T) * BK * (lda + ldb) + sizeof(std::int64_t) * (BN + 2 * BK) + 4 * 16;  // + alignment slack

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

// --- GPU kernel shapes, per vendor: the one place they are chosen ------------------------------

/// \brief The block of the GEMM and gemv team kernels on a real GPU: 256 threads.
inline constexpr int gpu_block_threads = 256;

template <GpuVendor>
struct GpuKernelShape;

/// \brief NVIDIA (CUDA): warps of 32 lanes. GEMM: 8 warps of 4 x 8 lanes, 4 x 2 warps; 128 x 128
/// float or 64 x 64 double tiles, 8x8 (float) or 4x4 (double) per thread. The narrow tile (the
/// convolutions' few channels): 4 warps of 4 x 8 lanes side by side, 32 x 256 float or 16 x 128
/// double, the same micro-tile per thread. gemv: a warp per row.
/// No launch bounds: nvcc already allows 255 registers a thread, and with a bound of 256 threads
/// ptxas spends more of them (sm_80, CUDA 11.8: the float64 GEMM 92 -> 195 registers, float32
/// 115 -> 122, float64 gemv 28 -> 36): one 256-thread float64 GEMM block per SM instead of two.
/// Unbounded, the CUDA kernels stay as they were measured.
template <>
struct GpuKernelShape<GpuVendor::nvidia> {
  static constexpr int warp_size = 32;
  static constexpr int launch_bound = 0;
  template <class T>
  using Tiling = TeamTiling<T, 4, 8, 4, 2>;
  template <class T>
  using NarrowTiling = TeamTiling<T, 4, 8, 1, 4>;
  static constexpr int gemv_lanes = 32;
};

/// \brief AMD (HIP; CDNA's 64-lane wavefronts, which Kokkos' HIP backend assumes). GEMM: 4
/// wavefronts of 8 x 8 lanes, 2 x 2 of them: the same 128 x 128 float / 64 x 64 double tiles and
/// micro-tiles as on NVIDIA; the narrow tile 2 wavefronts side by side, 64 x 128 float or 32 x 64
/// double. gemv: a wavefront per row. Launch bounds of the real block: Kokkos
/// 3.4 otherwise compiles for 1024-thread blocks, 128 VGPRs a lane, and the float64 GEMM spills
/// (gfx90a, ROCm 5.2: 119 VGPRs spilled, 464 bytes of scratch a lane; bounded: 240 VGPRs, none).
template <>
struct GpuKernelShape<GpuVendor::amd> {
  static constexpr int warp_size = 64;
  static constexpr int launch_bound = gpu_block_threads;
  template <class T>
  using Tiling = TeamTiling<T, 8, 8, 2, 2>;
  template <class T>
  using NarrowTiling = TeamTiling<T, 8, 8, 1, 2>;
  static constexpr int gemv_lanes = 64;
};

/// \brief The layout real GPUs of `Vendor` run.
template <class T, GpuVendor Vendor = this_gpu_vendor>
using GpuTiling = typename GpuKernelShape<Vendor>::template Tiling<T>;
/// \brief The layout for products of few rows (a convolution's channels): a quarter or half of
/// GpuTiling's rows, more columns, half its threads.
template <class T, GpuVendor Vendor = this_gpu_vendor>
using GpuNarrowTiling = typename GpuKernelShape<Vendor>::template NarrowTiling<T>;
/// \brief The same kernel on an emulated GPU: a team of as many host threads as `Threads` (1 or 2).
template <class T, int Threads>
using EmulatedTiling = TeamTiling<T, 1, Threads, 1, 1>;
/// \brief The launch bound of the GEMM and gemv team kernels on this build's GPU (0: none).
inline constexpr int gpu_launch_bound = GpuKernelShape<this_gpu_vendor>::launch_bound;

template <GpuVendor Vendor>
constexpr bool check_gpu_kernel_shape() {
  using Shape = GpuKernelShape<Vendor>;
  static_assert(GpuTiling<float, Vendor>::threads == gpu_block_threads &&
                    GpuTiling<double, Vendor>::threads == gpu_block_threads,
                "one GEMM team is one block of gpu_block_threads threads");
  static_assert(GpuTiling<float, Vendor>::warp_size == Shape::warp_size &&
                    GpuTiling<double, Vendor>::warp_size == Shape::warp_size,
                "a GEMM warp tile is one hardware warp (wavefront)");
  using Narrow = GpuNarrowTiling<float, Vendor>;
  using NarrowDouble = GpuNarrowTiling<double, Vendor>;
  static_assert(Narrow::warp_size == Shape::warp_size && NarrowDouble::warp_size == Shape::warp_size &&
                    Narrow::threads <= gpu_block_threads && NarrowDouble::threads <= gpu_block_threads,
                "a narrow warp tile is one hardware warp, its team at most a block");
  static_assert(GpuTiling<float, Vendor>::lanes_n == 8 && GpuTiling<double, Vendor>::lanes_n == 8 && Narrow::lanes_n == 8 &&
                    NarrowDouble::lanes_n == 8,
                "8 lanes along n: one 128-bit shared-memory phase reads 32 consecutive words of B");
  static_assert(GpuTiling<float, Vendor>::scratch_bytes <= 48 * 1024 && GpuTiling<double, Vendor>::scratch_bytes <= 48 * 1024 &&
                    Narrow::scratch_bytes <= 48 * 1024 && NarrowDouble::scratch_bytes <= 48 * 1024,
                "scratch must fit the 48 KiB of shared memory every CUDA GPU gives a block without opt-in "
                "(AMD's LDS: 64 KiB)");
  static_assert(Shape::gemv_lanes == Shape::warp_size && gpu_block_threads % Shape::gemv_lanes == 0,
                "gemv: a warp per row, whole rows per block");
  static_assert(Shape::launch_bound == 0 || Shape::launch_bound >= gpu_block_threads,
                "a launch bound admits the kernels' blocks");
  return true;
}
static_assert(check_gpu_kernel_shape<GpuVendor::nvidia>() && check_gpu_kernel_shape<GpuVendor::amd>());
static_assert(GpuKernelShape<this_gpu_vendor>::warp_size == this_gpu_warp_size,
              "the shapes' warp is the hardware's (Kokkos' wavefront width on AMD)");

/// \brief op(B) as a team tile reads it: element (p, j) is at(row(p) + col(j)). A strided matrix
/// here: row and column offsets are a multiplication each, found per element (`gathered` false).
/// A gathered operand (`gathered` true: a convolution's rows are (channel, tap), its columns
/// pixels, several divisions each) has the team find the offsets of a slice's BK rows once per
/// slice and of its BN columns once per tile (shared tables), so that an element costs one
/// addition; the tile also loads its next slice into registers while it multiplies the current
/// one. Those registers and tables cost the GEMM's float kernel its second block per SM (sm_70:
/// 122 -> 168 registers; GPGPU-Sim's 512^3 on two SMs 2.68M -> 2.95M cycles, 3.12M with the tables
/// alone), while the gathering kernels run one block per SM either way.
template <class T>
struct StridedOperand {
  static constexpr bool gathered = false;
  const T* data;
  std::int64_t row_stride, col_stride;
  KOKKOS_INLINE_FUNCTION std::int64_t row(std::int64_t p) const { return p * row_stride; }
  KOKKOS_INLINE_FUNCTION std::int64_t col(std::int64_t j) const { return j * col_stride; }
  KOKKOS_INLINE_FUNCTION T at(std::int64_t offset) const { return data[offset]; }
};

/// \brief One team's BM x BN tile of C = op(A) op(B) at (i0, j0), C being m x n with k-deep
/// products: the team loads BK-deep slices through load_a(i, p) (global indices) and b (a
/// StridedOperand-like gather), zero past the product's edges, adjacent threads along whichever
/// index `a_k_contiguous` / `b_n_contiguous` say is contiguous in memory, then each thread
/// multiplies its micro-tile from registers; store(i, j, sum) writes each result inside C. A
/// gathered op(B) (StridedOperand's note) has its offsets tabled and its next slice prefetched into
/// registers, so the loads' latency hides behind the fmas. The GEMM reads strided operands through
/// it, the convolutions gather their implicit im2col operand (conv_gemm.cpp).
template <class T, class Tile, class Member, class LoadA, class GatherB, class Store>
KOKKOS_INLINE_FUNCTION void team_gemm_tile(const Member& team, std::int64_t i0, std::int64_t j0, std::int64_t m,
                                           std::int64_t n, std::int64_t k, bool a_k_contiguous, bool b_n_contiguous,
                                           const LoadA& load_a, const GatherB& b, const Store& store) {
  constexpr int V = Tile::V, BN = Tile::BN, BK = Tile::BK, threads = Tile::threads;
  using Vec = typename Tile::Vec;
  Vec* As = static_cast<Vec*>(team.team_scratch(0).get_shmem_aligned(sizeof(T) * BK * Tile::lda, 16));
  Vec* Bs = static_cast<Vec*>(team.team_scratch(0).get_shmem_aligned(sizeof(T) * BK * Tile::ldb, 16));
  auto* cols = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem_aligned(sizeof(std::int64_t) * BN, 16));
  auto* rows = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem_aligned(sizeof(std::int64_t) * 2 * BK, 16));
  constexpr bool gathered = GatherB::gathered;
  const int rank = team.team_rank();
  if (gathered)
    for (int j = rank; j < BN; j += threads) cols[j] = j0 + j < n ? b.col(j0 + j) : 0;
  // Slice s's row offsets in half s % 2 of `rows`: found before the barrier ahead of the slice's
  // fetch; the other half is the one the fetch before it read.
  const auto find_rows = [&](std::int64_t k0, std::int64_t* half) {
    if (gathered)
      for (int p = rank; p < BK; p += threads) half[p] = k0 + p < k ? b.row(k0 + p) : 0;
  };
  // With adjacent threads along n, a thread's op(B) elements (b_element's order) form a grid: slot
  // r * cols_per + c is row rows_first + r * rows_step of the slice, column cols_first + c *
  // threads of the tile. Its few columns' offsets stay in registers for the whole tile, so an
  // element costs an addition. With adjacent threads along k (grad_weight, a transposed B) each
  // element looks its column up (a gathered operand's table) or computes it.
  constexpr int cols_per = BN >= threads ? BN / threads : 1, rows_per = Tile::b_loads / cols_per;
  static_assert(BN % threads == 0 || threads % BN == 0, "op(B)'s slots along n form a grid");
  const int rows_first = BN >= threads ? 0 : rank / BN, rows_step = BN >= threads ? 1 : threads / BN;
  const int cols_first = BN >= threads ? rank : rank % BN;
  T a_next[Tile::a_loads], b_next[Tile::b_loads];
  std::int64_t col_offset[cols_per];
  bool col_inside[cols_per];
  const auto fetch = [&](std::int64_t k0, const std::int64_t* half) {
    KTEN_UNROLL
    for (int t = 0; t < Tile::a_loads; ++t) {
      int i, p;
      Tile::a_element(rank + t * threads, a_k_contiguous, i, p);
      a_next[t] = i0 + i < m && k0 + p < k ? load_a(i0 + i, k0 + p) : T(0);
    }
    if (b_n_contiguous) {
      KTEN_UNROLL
      for (int r = 0; r < rows_per; ++r) {
        const int p = rows_first + r * rows_step;
        const bool inside = k0 + p < k;
        const std::int64_t row = gathered ? half[p] : b.row(k0 + p);
        KTEN_UNROLL
        for (int c = 0; c < cols_per; ++c)
          b_next[r * cols_per + c] = inside && col_inside[c] ? b.at(row + col_offset[c]) : T(0);
      }
    } else {
      KTEN_UNROLL
      for (int t = 0; t < Tile::b_loads; ++t) {
        int p, j;
        Tile::b_element(rank + t * threads, false, p, j);
        b_next[t] = k0 + p < k && j0 + j < n ? b.at(gathered ? half[p] + cols[j] : b.row(k0 + p) + b.col(j0 + j)) : T(0);
      }
    }
  };
  const auto stash = [&] {
    KTEN_UNROLL
    for (int t = 0; t < Tile::a_loads; ++t) {
      int i, p;
      Tile::a_element(rank + t * threads, a_k_contiguous, i, p);
      const int o = Tile::a_offset(i, p);
      As[o / V].v[o % V] = a_next[t];
    }
    KTEN_UNROLL
    for (int t = 0; t < Tile::b_loads; ++t) {
      int p, j;
      Tile::b_element(rank + t * threads, b_n_contiguous, p, j);
      const int o = Tile::b_offset(p, j);
      Bs[o / V].v[o % V] = b_next[t];
    }
  };
  find_rows(0, rows);
  team.team_barrier();  // the column offsets and the first slice's rows
  KTEN_UNROLL
  for (int c = 0; c < cols_per; ++c) {
    const int j = cols_first + c * threads;
    col_inside[c] = j0 + j < n;
    col_offset[c] = gathered ? cols[j] : b.col(j0 + j);
  }
  if (gathered) fetch(0, rows);
  T acc[2 * V][2 * V] = {};
  for (std::int64_t k0 = 0, s = 0; k0 < k; k0 += BK, ++s) {
    std::int64_t* next_rows = rows + (s + 1) % 2 * BK;
    const bool more = k0 + BK < k;
    if (!gathered) fetch(k0, rows + s % 2 * BK);
    stash();
    if (more) find_rows(k0 + BK, next_rows);
    team.team_barrier();  // the slice is in scratch, the next one's rows found
    if (gathered && more) fetch(k0 + BK, next_rows);  // in flight during the fmas below
    for (int p = 0; p < BK; ++p) {
      Vec av[2], bv[2];
      for (int h = 0; h < 2; ++h) {
        av[h] = As[Tile::a_offset(Tile::thread_row(rank, h), p) / V];
        bv[h] = Bs[Tile::b_offset(p, Tile::thread_col(rank, h)) / V];
      }
      KTEN_UNROLL
      for (int r = 0; r < 2 * V; ++r) {
        KTEN_UNROLL
        for (int c = 0; c < 2 * V; ++c)
          acc[r][c] = compat::fma(av[r / V].v[r % V], bv[c / V].v[c % V], acc[r][c]);
      }
    }
    team.team_barrier();  // the next stash overwrites the scratch
  }
  for (int r = 0; r < 2 * V; ++r) {
    const std::int64_t i = i0 + Tile::thread_row(rank, r / V) + r % V;
    if (i >= m) continue;
    for (int c = 0; c < 2 * V; ++c) {
      const std::int64_t j = j0 + Tile::thread_col(rank, c / V) + c % V;
      if (j < n) store(i, j, acc[r][c]);
    }
  }
}

/// \brief The GEMM on a GPU: one team per tile of C, op(B) a StridedOperand (the layout tests also
/// run it as a gathered operand, the convolutions' path).
template <class T, class Tile, class Member, class BOperand = StridedOperand<T>>
struct TeamGemmKernel {
  GemmArgs<T> args;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    // Named copies, not a structured binding: nvcc 11.8 cannot capture those in the lambdas.
    const T *A = args.A, *B = args.B, *bias = args.bias;
    T* C = args.C;
    const bool accumulate = args.accumulate;
    const GemmShape& s = args.s;
    const std::int64_t i0 = (team.league_rank() / args.tiles_n) * Tile::BM, j0 = (team.league_rank() % args.tiles_n) * Tile::BN;
    team_gemm_tile<T, Tile>(
        team, i0, j0, s.m, s.n, s.k, s.a_col == 1, s.b_col == 1,
        [&](std::int64_t i, std::int64_t p) { return A[i * s.a_row + p * s.a_col]; }, BOperand{B, s.b_row, s.b_col},
        [&](std::int64_t i, std::int64_t j, T v) {
          if (bias) v += bias[j];
          if (accumulate) v += C[i * s.n + j];
          C[i * s.n + j] = v;
        });
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

/// \brief The same on cpu() when rows are contiguous (col == 1): each row's dot product folds
/// into `Lanes` independent partial sums (two vector registers), so it vectorises and no chain of
/// dependent fmas sets the pace.
template <class T>
struct HostGemvKernel {
  static constexpr int Lanes = 2 * HostIsa::vector_bytes / static_cast<int>(sizeof(T));
  GemvKernel<T> gemv;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const {
    const T* a = gemv.A + r * gemv.row;
    const T* x = gemv.x;
    const std::int64_t stride = gemv.x_stride, k = gemv.k;
    T lane[Lanes] = {};
    std::int64_t p = 0;
    if (stride == 1) {
      for (; p + Lanes <= k; p += Lanes) {
        KTEN_UNROLL
        for (int l = 0; l < Lanes; ++l) lane[l] = host_fma(a[p + l], x[p + l], lane[l]);
      }
    }
    for (; p < k; ++p) lane[0] = host_fma(a[p], x[p * stride], lane[0]);
    T acc = T(0);
    for (int l = 0; l < Lanes; ++l) acc += lane[l];
    gemv.finish(r, acc);
  }
};

/// \brief The same on a GPU when rows are contiguous (col == 1): a warp (wavefront) per row, its
/// `kLanes` vector lanes reading the row coalesced and reducing in registers, kRows rows per team
/// (one block of gpu_block_threads threads).
template <class T, class Member>
struct GemvTeamKernel {
  static constexpr int kLanes = GpuKernelShape<this_gpu_vendor>::gemv_lanes;
  static constexpr int kRows = gpu_block_threads / kLanes;
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
void launch_gemv(const Backend& backend, const GemvKernel<T>& gemv) {
  if constexpr (!Backend::is_host) {
    using Kernel = GemvTeamKernel<T, TeamMember<Backend>>;
    const std::int64_t league = (gemv.rows + Kernel::kRows - 1) / Kernel::kRows;
    if (gemv.col == 1 && gemv.k >= 64 && league <= INT32_MAX) {
      run(gemv_label, backend,
          team_policy<gpu_launch_bound>(backend, static_cast<int>(league), Kernel::kRows, Kernel::kLanes), Kernel{gemv});
      return;
    }
  } else {
    if (gemv.col == 1 && gemv.k >= HostGemvKernel<T>::Lanes) {
      for_each_index(gemv_label, backend, gemv.rows, HostGemvKernel<T>{gemv}, gemv.rows * gemv.k);
      return;
    }
  }
  for_each_index(gemv_label, backend, gemv.rows, gemv, gemv.rows * gemv.k);
}

// --- launch ------------------------------------------------------------------------------------

template <class Tile, class Backend, class T>
void launch_team_gemm(const Backend& backend, const T* A, const T* B, T* C, const T* bias, bool accumulate,
                      const GemmShape& s) {
  const std::int64_t tiles_n = (s.n + Tile::BN - 1) / Tile::BN, tiles = ((s.m + Tile::BM - 1) / Tile::BM) * tiles_n;
  if (tiles > INT32_MAX) fail<ShapeError>("matmul", "the product has more tiles than a GPU launch can hold");
  run(gemm_label, backend,
      fixed_team_policy<gpu_launch_bound>(backend, static_cast<int>(tiles), Tile::threads, TeamScratch{0, Tile::scratch_bytes}),
      TeamGemmKernel<T, Tile, TeamMember<Backend>>{{A, B, C, bias, accumulate, s, tiles_n}});
}

/// \brief The host product on `be` as `plan` cuts it.
template <class Backend, class T>
void run_host_gemm(const Backend& backend, const HostGemmPlan& plan, const T* A, const T* B, T* C, const T* bias,
                   bool accumulate, const GemmShape& s) {
  if (plan.tiles() > INT32_MAX) fail<ShapeError>("matmul", "the product has more tiles than one launch can hold");
  using Kernel = HostGemmKernel<T, TeamMember<Backend>>;
  run(gemm_label, backend, fixed_team_policy(backend, static_cast<int>(plan.tiles()), 1, TeamScratch{1, Kernel::scratch_bytes(plan)}),
      Kernel{{A, B, C, bias, accumulate, s, plan.tiles_n}, plan});
}

/// \brief C(i, j) = sum_p op(A)(i, p) op(B)(p, j) (+ bias[j]) (+ C(i, j)), one output per index
/// with its sum in a register: for products so small that the tiled kernel's team launch,
/// scratch and packing cost more than the arithmetic (a Linear layer's gradients on a batch).
template <class T>
struct DirectGemmKernel {
  GemmArgs<T> args;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {  // row i of C
    const GemmShape& s = args.s;
    const T* a = args.A + i * s.a_row;
    T* c = args.C + i * s.n;
    for (std::int64_t j = 0; j < s.n; ++j) {
      const T* b = args.B + j * s.b_col;
      T acc = T(0);
      for (std::int64_t p = 0; p < s.k; ++p) acc = host_fma(a[p * s.a_col], b[p * s.b_row], acc);
      if (args.bias) acc += args.bias[j];
      if (args.accumulate) acc += c[j];
      c[j] = acc;
    }
  }
};

/// \brief Products of at most this many multiply-adds run DirectGemmKernel on cpu(). Measured on
/// the calling thread (AVX-512 Xeon, float32, matmul with its allocation): 32x1x2 0.21 us against
/// the tiled kernel's 0.39, 3x3x3 0.13 / 0.19, 4x4x4 0.17 / 0.20, 2x32x2 0.31 / 0.32, 6x6x6 0.39 /
/// 0.23: past ~128 the register tile and vector fmas of the tiled kernel win.
inline constexpr std::int64_t host_direct_gemm_macs = 128;

/// \brief cpu(): directly when the product is tiny, on the calling thread when it is small (one
/// tile there), else on every thread.
template <class Backend, class T>
void launch_host_gemm(const Backend& backend, const T* A, const T* B, T* C, const T* bias, bool accumulate,
                      const GemmShape& s) {
  if (s.k <= host_direct_gemm_macs && s.m * s.n <= host_direct_gemm_macs / std::max<std::int64_t>(s.k, 1))
    return for_each_index(gemm_label, backend, s.m, DirectGemmKernel<T>{{A, B, C, bias, accumulate, s, 0}}, s.m * s.n * s.k);
  const double macs = static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  const double elements = std::max(macs / host_gemm_macs_per_element, static_cast<double>(s.m) * s.n);  // C once
  const std::int64_t work = elements < 1e18 ? static_cast<std::int64_t>(elements) : INT64_MAX;
  with_grain(backend, work, [&](const auto& on) {
    run_host_gemm(on, plan_host_gemm<T>(s, on.space.concurrency()), A, B, C, bias, accumulate, s);
  });
}

template <class Backend, class T>
void gemm_kernel(const Backend& backend, const T* A, const T* B, T* C, const T* bias, bool accumulate, const GemmShape& s) {
  if (s.m == 0 || s.n == 0) return;
  if (s.n == 1) return launch_gemv(backend, GemvKernel<T>{A, s.a_row, s.a_col, B, s.b_row, C, bias, 0, accumulate, s.m, s.k});
  if (s.m == 1) return launch_gemv(backend, GemvKernel<T>{B, s.b_col, s.b_row, A, s.a_col, C, bias, 1, accumulate, s.n, s.k});
  if constexpr (Backend::is_host) {
    launch_host_gemm(backend, A, B, C, bias, accumulate, s);
  } else if constexpr (Backend::emulated) {
    // The GPU kernel with a team of host threads: 2 where the host has them, so barriers matter.
    if (backend.space.concurrency() >= 2) launch_team_gemm<EmulatedTiling<T, 2>>(backend, A, B, C, bias, accumulate, s);
    else launch_team_gemm<EmulatedTiling<T, 1>>(backend, A, B, C, bias, accumulate, s);
  } else {
    launch_team_gemm<GpuTiling<T>>(backend, A, B, C, bias, accumulate, s);
  }
}

}  // namespace kten::detail
