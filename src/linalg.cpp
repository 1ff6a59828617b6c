// Matrix product and transpose.
#include <string>

#include <kten/ops.hpp>

#include <kten/detail/kokkos_compat.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "linalg.hpp"

namespace kten {
namespace detail {

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

template <class T, bool Host>
struct GemmTiling {  // host
  static constexpr int TM = 6, TN = 64 / sizeof(T), BM = 32 * TM, BN = 32 * TN, BK = 192, threads = 1;
};
template <class T>
struct GemmTiling<T, false> {  // GPU
  static constexpr int TM = 4, TN = 4, BM = 64, BN = 64, BK = 16, threads = (BM / TM) * (BN / TN);
};

template <class Backend, class T>
void gemm_kernel(const Backend& be, const T* A, const T* B, T* C, const T* bias, bool accumulate, GemmShape s) {
  using Tile = GemmTiling<T, Backend::is_host>;
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
        // This thread's micro-tiles: exactly one on a GPU, all of the tile on the host.
        const int rank = team.team_rank(), stride = team.team_size();
        T acc[TM * TN];
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
          if constexpr (Backend::is_host) {  // one thread: plain loops, no index arithmetic per element
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
            // On the host C carries the partial sums between k-slices; a GPU thread keeps them.
            if (Backend::is_host || first)
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
            if (Backend::is_host || last)
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

// Bandwidth-bound: one read and one write per element; writes are contiguous.
template <class Backend, class T>
void transpose_kernel(const Backend& be, const T* x, T* out, std::int64_t rows, std::int64_t cols) {
  Kokkos::parallel_for(
      "kten::transpose", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, rows * cols),
      KOKKOS_LAMBDA(std::int64_t o) {
        const std::int64_t j = o / rows, i = o % rows;  // out is cols x rows
        out[o] = x[i * cols + j];
      });
}

void gemm(const Tensor& A, bool transpose_a, const Tensor& B, bool transpose_b, const Tensor& C,
          const Tensor* bias, bool accumulate) {
  const std::int64_t ar = A.shape()[0], ac = A.ndim() == 2 ? A.shape()[1] : 1;
  const std::int64_t br = B.shape()[0], bc = B.ndim() == 2 ? B.shape()[1] : 1;
  GemmShape s{};
  s.m = transpose_a ? ac : ar;
  s.k = transpose_a ? ar : ac;
  s.n = transpose_b ? br : bc;
  s.a_row = transpose_a ? 1 : ac;
  s.a_col = transpose_a ? ac : 1;
  s.b_row = transpose_b ? 1 : bc;
  s.b_col = transpose_b ? bc : 1;
  with_backend(A.device(), [&](auto be) {
    with_dtype(A.dtype(), [&](auto zero) {
      using T = decltype(zero);
      gemm_kernel(be, static_cast<const T*>(A.data()), static_cast<const T*>(B.data()), static_cast<T*>(C.data()),
                  bias ? static_cast<const T*>(bias->data()) : nullptr, accumulate, s);
    });
  });
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_compatible("kten::matmul", a, b);
  const bool matvec = a.ndim() == 2 && b.ndim() == 1;
  if (a.ndim() != 2 || (b.ndim() != 2 && !matvec))
    throw ShapeError("kten: matmul: expects (m x k) * (k x n) or (m x k) * (k), got " + shape_str(a.shape()) +
                     " and " + shape_str(b.shape()));
  const std::int64_t m = a.shape()[0], k = a.shape()[1];
  const std::int64_t n = matvec ? 1 : b.shape()[1];
  if (b.shape()[0] != k)
    throw ShapeError("kten: matmul: inner dimensions differ: " + shape_str(a.shape()) + " * " +
                     shape_str(b.shape()) + " (" + std::to_string(k) + " vs " + std::to_string(b.shape()[0]) + ")");
  Tensor out = empty(matvec ? Shape{m} : Shape{m, n}, a.device(), a.dtype());
  detail::gemm(a, false, b, false, out, nullptr, false);
  return out;
}

Tensor transpose(const Tensor& x) {
  detail::check_defined(x, "kten::transpose");
  if (x.ndim() != 2)
    throw ShapeError("kten: transpose: expects a 2-D tensor, got shape " + shape_str(x.shape()));
  const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
  Tensor out = empty({cols, rows}, x.device(), x.dtype());
  detail::with_backend(x.device(), [&](auto be) {
    detail::with_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      detail::transpose_kernel(be, static_cast<const T*>(x.data()), static_cast<T*>(out.data()), rows, cols);
    });
  });
  return out;
}

}  // namespace kten
