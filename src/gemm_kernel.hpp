#pragma once
// Internal: the tiled matrix-product kernel, written once for every backend.

#include <cstdint>

#include <Kokkos_Core.hpp>
#include <kten/detail/kokkos_compat.hpp>

#include "thread_model.hpp"

namespace kten::detail {

// FLOP-bound. C is cut into BM x BN tiles, one per team. The team copies ("packs") the tile's
// slices of op(A) and op(B) into scratch memory, in the order the inner loop reads them, then
// each thread computes TM x TN micro-tiles of C with the accumulators in registers: every value
// loaded from scratch feeds TN (or TM) multiply-adds. The tile sizes are chosen per backend:
//  - host: one thread per team, 192 x 512 (float) tiles, BK = 192 so a packed B slice stays in L2
//    (sizes tuned on AVX2 by kten-perf); TN spans two SIMD
//    registers and TM = 6 rows give 12 accumulator registers (AVX2), fed by explicit fma;
//  - GPU: 256 threads per team, 64 x 64 tiles, BK = 16 in shared memory, 4 x 4 per thread.
// Strides express the transposes; the epilogue adds an optional bias row and accumulates into C.
struct GemmShape {
  std::int64_t m, n, k;
  std::int64_t a_row, a_col;  // A(i, p) = A[i * a_row + p * a_col]
  std::int64_t b_row, b_col;  // B(p, j) = B[p * b_row + j * b_col]
};

// Tile sizes and team layout. `cooperative`: a team of `threads` threads, one micro-tile each,
// that keep their accumulators across k-slices (GPU); otherwise one thread walks every micro-tile
// of the tile and C carries the partial sums between k-slices (host).
template <class T, bool Host>
struct GemmTiling {  // host
  static constexpr int TM = 6, TN = 64 / sizeof(T), BM = 32 * TM, BN = 32 * TN, BK = 192, threads = 1;
  static constexpr bool cooperative = false;
};
template <class T>
struct GemmTiling<T, false> {  // GPU
  static constexpr int TM = 4, TN = 4, BM = 64, BN = 64, BK = 16, threads = (BM / TM) * (BN / TN);
  static constexpr bool cooperative = true;
};

template <class Tile, class Backend, class T>
void gemm_tiled(const Backend& be, const T* A, const T* B, T* C, const T* bias, bool accumulate, GemmShape s) {
  static_assert(!Tile::cooperative || Tile::threads == (Tile::BM / Tile::TM) * (Tile::BN / Tile::TN),
                "a cooperative team has one thread per micro-tile");
  constexpr int TM = Tile::TM, TN = Tile::TN, BM = Tile::BM, BN = Tile::BN, BK = Tile::BK;
  constexpr int micro_rows = BM / TM, micro_cols = BN / TN;
  using Policy = Kokkos::TeamPolicy<typename Backend::execution_space>;
  using Scratch = Kokkos::View<T*, typename Backend::execution_space::scratch_memory_space,
                               Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::int64_t tiles_n = (s.n + BN - 1) / BN, tiles = ((s.m + BM - 1) / BM) * tiles_n;
  const std::size_t scratch_bytes = Scratch::shmem_size(BM * BK) + Scratch::shmem_size(BK * BN);
  const int scratch_level = Backend::is_host ? 1 : 0;
  Policy policy(be.space, tiles, Tile::threads);
  Kokkos::parallel_for(
      "kten::gemm", policy.set_scratch_size(scratch_level, Kokkos::PerTeam(scratch_bytes)),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const std::int64_t i0 = (team.league_rank() / tiles_n) * BM, j0 = (team.league_rank() % tiles_n) * BN;
        Scratch As(team.team_scratch(scratch_level), BM * BK), Bs(team.team_scratch(scratch_level), BK * BN);
        // This thread's micro-tiles: exactly one in a cooperative team, else all of the tile.
        const int rank = team.team_rank(), stride = team.team_size();
        T acc[TM * TN] = {};
        for (std::int64_t k0 = 0; k0 < s.k || k0 == 0; k0 += BK) {
          const int kb = s.k - k0 < BK ? static_cast<int>(s.k - k0) : BK;
          // Pack: As[(mr * kb + p) * TM + r] = A(i0 + mr*TM + r, k0 + p); Bs likewise by TN columns.
          auto pack_a = [&](int row, int p) {
            const std::int64_t i = i0 + row;
            As((row / TM * kb + p) * TM + row % TM) = i < s.m ? A[i * s.a_row + (k0 + p) * s.a_col] : T(0);
          };
          auto pack_b = [&](int p, int col) {
            const std::int64_t j = j0 + col;
            Bs((col / TN * kb + p) * TN + col % TN) = j < s.n ? B[(k0 + p) * s.b_row + j * s.b_col] : T(0);
          };
          if constexpr (!Tile::cooperative) {  // one thread: plain loops, no index arithmetic per element
            for (int row = 0; row < BM; ++row)
              for (int p = 0; p < kb; ++p) pack_a(row, p);
            for (int p = 0; p < kb; ++p)
              for (int col = 0; col < BN; ++col) pack_b(p, col);
          } else {  // adjacent threads read adjacent addresses
            for (int e = rank; e < BM * kb; e += stride) pack_a(e / kb, e % kb);
            for (int e = rank; e < kb * BN; e += stride) pack_b(e / BN, e % BN);
          }
          team.team_barrier();
          for (int t = rank; t < micro_rows * micro_cols; t += stride) {
            const int mr = t / micro_cols, mc = t % micro_cols;
            const std::int64_t ib = i0 + mr * TM, jb = j0 + mc * TN;
            if (ib >= s.m || jb >= s.n) continue;
            const bool first = k0 == 0, last = k0 + BK >= s.k;
            // One thread per tile: C carries the partial sums between k-slices; a team thread keeps them.
            if (!Tile::cooperative || first)
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
            if (!Tile::cooperative || last)
              for (int r = 0; r < TM; ++r)
                for (int c = 0; c < TN; ++c) {
                  const std::int64_t i = ib + r, j = jb + c;
                  if (i >= s.m || j >= s.n) continue;
                  C[i * s.n + j] = last && bias ? acc[r * TN + c] + bias[j] : acc[r * TN + c];
                }
          }
          team.team_barrier();
        }
      });
}

template <class Backend, class T>
void gemm_kernel(const Backend& be, const T* A, const T* B, T* C, const T* bias, bool accumulate, GemmShape s) {
  with_team_backend(be, [&](const auto& team_be) {  // README, "Thread model"
    gemm_tiled<GemmTiling<T, Backend::is_host>>(team_be, A, B, C, bias, accumulate, s);
  });
}

}  // namespace kten::detail
