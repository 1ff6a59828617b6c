// Matrix product (operands row- or column-major, views included) and transpose (a view).
#include <string>

#include <kten/ops.hpp>

#include "autograd.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "gemm_kernel.hpp"
#include "linalg.hpp"

namespace kten {
namespace detail {

namespace {
// A 2-D operand the GEMM reads in place: row- or column-major, any leading dimension (a transposed
// view, a narrow of columns). Other strides (a select across a 3-D tensor's middle axis, an
// expanded row) go through one contiguous copy.
Tensor gemm_operand(const Tensor& x) {
  if (x.is_contiguous() || x.ndim() == 1) return x;  // a vector: any stride
  return x.strides()[0] == 1 || x.strides()[1] == 1 ? x : x.contiguous();
}
// (row stride, column stride) of a 2-D operand, or of a 1-D one seen as a column.
void operand_strides(const Tensor& x, std::int64_t& row, std::int64_t& col) {
  row = x.strides()[0];
  col = x.ndim() == 2 ? x.strides()[1] : 1;
}
}  // namespace

void gemm(const Tensor& A_in, bool transpose_a, const Tensor& B_in, bool transpose_b, const Tensor& C,
          const Tensor* bias, bool accumulate) {
  const Tensor A = gemm_operand(A_in), B = gemm_operand(B_in);
  const Tensor bias_c = bias ? bias->contiguous() : C;
  check_contiguous("kten::gemm", C);  // the result is written row-major
  const std::int64_t ar = A.shape()[0], ac = A.ndim() == 2 ? A.shape()[1] : 1;
  const std::int64_t br = B.shape()[0], bc = B.ndim() == 2 ? B.shape()[1] : 1;
  std::int64_t a0, a1, b0, b1;
  operand_strides(A, a0, a1);
  operand_strides(B, b0, b1);
  GemmShape s{};
  s.m = transpose_a ? ac : ar;
  s.k = transpose_a ? ar : ac;
  s.n = transpose_b ? br : bc;
  s.a_row = transpose_a ? a1 : a0;
  s.a_col = transpose_a ? a0 : a1;
  s.b_row = transpose_b ? b1 : b0;
  s.b_col = transpose_b ? b0 : b1;
  // Every operand, the bias included, must live on one device with one dtype. A and B may be
  // strided (their strides are in s); C and the bias are contiguous.
  launch_views("kten::gemm", [&](const auto& backend, auto* a, auto* b, auto* c, auto* bias_or_c) {
    gemm_kernel(backend, a, b, c, bias ? bias_or_c : nullptr, accumulate, s);
  }, A, B, C, bias_c);
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
  if (detail::recording(a, b))
    detail::record("kten::matmul", out, {&a, &b}, [a = detail::saved(a), b = detail::saved(b)](const Tensor& g, const detail::Needs& needs) {
      if (b.ndim() == 1)  // dA = g b^T (an outer product), db = A^T g
        return detail::Grads{needs[0] ? matmul(g.unsqueeze(1), b.unsqueeze(0)) : Tensor(),
                             needs[1] ? matmul(a.transpose(), g) : Tensor()};
      return detail::Grads{needs[0] ? matmul(g, b.transpose()) : Tensor(), needs[1] ? matmul(a.transpose(), g) : Tensor()};
    });
  return out;
}

Tensor detail::linear(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  Tensor out = empty({x.shape()[0], weight.shape()[1]}, x.device(), x.dtype());
  gemm(x, false, weight, false, out, bias, false);
  const bool with_bias = bias != nullptr;
  if (with_bias ? recording(x, weight, *bias) : recording(x, weight)) {
    std::vector<const Tensor*> inputs{&x, &weight};
    if (with_bias) inputs.push_back(bias);
    record("kten::linear", out, inputs, [x = saved(x), w = saved(weight), with_bias](const Tensor& g, const Needs& needs) {
      Grads grads{needs[0] ? matmul(g, w.transpose()) : Tensor(), needs[1] ? matmul(x.transpose(), g) : Tensor()};
      if (with_bias) grads.push_back(needs[2] ? sum(g, 0) : Tensor());
      return grads;
    });
  }
  return out;
}

Tensor transpose(const Tensor& x) {
  constexpr const char* label = "kten::transpose";
  detail::check_defined(x, label);
  if (x.ndim() != 2)
    detail::fail<ShapeError>(label, "expects a 2-D tensor, got shape ", x.shape(), "; use transpose(d0, d1) or permute()");
  return x.transpose(0, 1);
}

}  // namespace kten
