// Matrix product and transpose.
#include <string>

#include <kten/ops.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "gemm_kernel.hpp"
#include "linalg.hpp"

namespace kten {
namespace detail {

// Bandwidth-bound: one read and one write per element; writes are contiguous.
template <class T>
struct TransposeKernel {
  const T* x;
  T* out;
  std::int64_t rows, cols;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    const std::int64_t j = o / rows, i = o % rows;  // out is cols x rows
    out[o] = x[i * cols + j];
  }
};

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
  // Every operand, the bias included, must live on one device with one dtype.
  launch("kten::gemm", [&](const auto& backend, auto* a, auto* b, auto* c, auto* bias_or_c) {
    gemm_kernel(backend, a, b, c, bias ? bias_or_c : nullptr, accumulate, s);
  }, A, B, C, bias ? *bias : C);
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_compatible("kten::matmul", a, b);
  const bool matvec = a.ndim() == 2 && b.ndim() == 1;
  if (a.ndim() != 2 || (b.ndim() != 2 && !matvec))
    detail::fail<ShapeError>("kten::matmul", "expects (m x k) * (k x n) or (m x k) * (k), got ", a.shape(), " and ",
                             b.shape());
  const std::int64_t m = a.shape()[0], k = a.shape()[1];
  const std::int64_t n = matvec ? 1 : b.shape()[1];
  if (b.shape()[0] != k)
    detail::fail<ShapeError>("kten::matmul", "inner dimensions differ: ", a.shape(), " * ", b.shape(), " (", k, " vs ",
                             b.shape()[0], ")");
  Tensor out = empty(matvec ? Shape{m} : Shape{m, n}, a.device(), a.dtype());
  detail::gemm(a, false, b, false, out, nullptr, false);
  return out;
}

Tensor transpose(const Tensor& x) {
  constexpr const char* label = "kten::transpose";
  detail::check_defined(x, label);
  if (x.ndim() != 2)
    detail::fail<ShapeError>(label, "expects a 2-D tensor, got shape ", x.shape());
  const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
  Tensor out = empty({cols, rows}, x.device(), x.dtype());
  detail::launch_each_index(label, rows * cols, [&](auto* in, auto* o) {
    return detail::TransposeKernel<std::remove_pointer_t<decltype(o)>>{in, o, rows, cols};
  }, x, out);
  return out;
}

}  // namespace kten
