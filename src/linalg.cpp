// Matrix product and transpose.
#include <string>

#include <kten/ops.hpp>

#include "checks.hpp"
#include "dispatch.hpp"

namespace kten {
namespace detail {

// FLOP-bound. Each work item computes `W` adjacent outputs of one row of C, keeping them in
// registers while it streams row i of A and rows of B: on CPUs W = 16 gives contiguous,
// vectorisable inner loops; on GPUs W = 1 so adjacent threads read adjacent columns of B.
template <class Backend, class T>
void gemm_kernel(const Backend& be, const T* A, const T* B, T* C, std::int64_t m, std::int64_t n,
                 std::int64_t k) {
  constexpr int W = Backend::is_host ? 16 : 1;
  const std::int64_t blocks = (n + W - 1) / W;
  Kokkos::parallel_for(
      "kten::matmul", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, m * blocks),
      KOKKOS_LAMBDA(std::int64_t idx) {
        const std::int64_t i = idx / blocks;
        const std::int64_t j0 = (idx % blocks) * W;
        const T* a = A + i * k;
        T acc[W] = {};
        if (j0 + W <= n) {
          for (std::int64_t p = 0; p < k; ++p) {
            const T av = a[p];
            const T* b = B + p * n + j0;
            for (int w = 0; w < W; ++w) acc[w] += av * b[w];
          }
          for (int w = 0; w < W; ++w) C[i * n + j0 + w] = acc[w];
        } else {
          const int width = static_cast<int>(n - j0);
          for (std::int64_t p = 0; p < k; ++p) {
            const T av = a[p];
            const T* b = B + p * n + j0;
            for (int w = 0; w < width; ++w) acc[w] += av * b[w];
          }
          for (int w = 0; w < width; ++w) C[i * n + j0 + w] = acc[w];
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
  detail::with_backend(a.device(), [&](auto be) {
    detail::with_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      detail::gemm_kernel(be, static_cast<const T*>(a.data()), static_cast<const T*>(b.data()),
                          static_cast<T*>(out.data()), m, n, k);
    });
  });
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
