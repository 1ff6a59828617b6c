// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Matrix products with torch.matmul's rules (matrices, vectors, broadcast batches; operands row- or
// column-major, views included) and transpose (a view). ONNX's Einsum loads as einsum.cpp's
// products.
#include <string>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "elementwise.hpp"
#include "dispatch/dispatch.hpp"
#include "gemm_kernel.hpp"
#include "linalg.hpp"
#include "registry.hpp"

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

namespace {

// The product of two 2-D operands, or of a matrix and a vector, in one GEMM.
Tensor matrix_product(const Tensor& a, const Tensor& b) {
  const bool matvec = b.ndim() == 1;
  const std::int64_t m = a.shape()[0], n = matvec ? 1 : b.shape()[1];
  Tensor out = empty(matvec ? Shape{m} : Shape{m, n}, a.device(), a.dtype());
  gemm(a, false, b, false, out, nullptr, false);
  if (recording(a, b))
    record("kten::matmul", out, {&a, &b}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      if (b.ndim() == 1)  // dA = g b^T (an outer product), db = A^T g
        return Grads{needs[0] ? matmul(g.unsqueeze(1), b.unsqueeze(0)) : Tensor(), needs[1] ? matmul(a.transpose(), g) : Tensor()};
      return Grads{needs[0] ? matmul(g, b.transpose()) : Tensor(), needs[1] ? matmul(a.transpose(), g) : Tensor()};
    });
  return out;
}

// The matrix at flat batch index `index` of x (batch axes first, then the matrix' two), as a 2-D
// view. An axis of extent 1 gets stride 1, so the GEMM reads a row or column of any stride in place.
Tensor matrix_at(const Tensor& x, std::int64_t index) {
  const int nd = x.ndim();
  std::int64_t offset = x.offset();
  for (int d = nd - 3; d >= 0; --d) {
    offset += (index % x.shape()[d]) * x.strides()[d];
    index /= x.shape()[d];
  }
  const std::int64_t rows = x.shape()[nd - 2], cols = x.shape()[nd - 1];
  return Tensor(x.storage(), {rows, cols}, {rows == 1 ? 1 : x.strides()[nd - 2], cols == 1 ? 1 : x.strides()[nd - 1]},
                offset, x.dtype());
}

// Batches of matrices, (..., m, k) * (..., k, n) with the batch axes broadcast, one of the
// operands with more than two axes: one GEMM per matrix of the result, each reading strided 2-D
// views of the operands in place (a broadcast operand's matrix is read again for each batch, no
// copy). Each GEMM is a launch of its own: for large matrices that costs nothing, but a batch of
// many small ones is bound by the launch overhead (a few microseconds each on a GPU), where a
// batched kernel would do them all in one.
Tensor batched_product(const Tensor& a_in, const Tensor& b_in) {
  const Shape& sa = a_in.shape();
  const Shape& sb = b_in.shape();
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape batch = broadcast_shapes("matmul's batch axes", Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2)).shape;
  const std::int64_t batches = checked_numel(batch, "kten::matmul");
  // Matrices neither row- nor column-major are gathered once here, not once per batch.
  const auto operand = [&](const Tensor& x, std::int64_t rows, std::int64_t cols) {
    const Tensor v = x.detach();
    const std::int64_t r = v.strides()[v.ndim() - 2], c = v.strides()[v.ndim() - 1];
    Shape shape = batch;
    shape.insert(shape.end(), {rows, cols});
    return (r == 1 || c == 1 || rows == 1 || cols == 1 ? v : v.contiguous()).expand(shape);
  };
  const Tensor a = operand(a_in, m, k), b = operand(b_in, k, n);
  batch.insert(batch.end(), {m, n});
  Tensor out = empty(batch, a.device(), a.dtype());
  for (std::int64_t i = 0; i < batches; ++i)
    gemm(matrix_at(a, i), false, matrix_at(b, i), false, matrix_at(out, i), nullptr, false);
  if (recording(a_in, b_in))
    record("kten::matmul", out, {&a_in, &b_in}, [a = saved(a_in), b = saved(b_in)](const Tensor& g, const Needs& needs) {
      // The products broadcast like the forward; sum_to folds the broadcast batch axes back.
      return Grads{needs[0] ? sum_to(matmul(g, b.transpose(-1, -2)), a.shape()) : Tensor(),
                   needs[1] ? sum_to(matmul(a.transpose(-1, -2), g), b.shape()) : Tensor()};
    });
  return out;
}

}  // namespace
}  // namespace detail

// torch.matmul's cases, each reduced to a matrix product by views (recorded, so the gradients
// follow): a vector on the left becomes a row (1, k), dropped again from the result; batches times
// one matrix or vector fold the batch into the rows of one GEMM.
Tensor matmul(const Tensor& a, const Tensor& b) {
  constexpr const char* op = "kten::matmul";
  detail::check_compatible(op, a, b);
  if (a.ndim() == 0 || b.ndim() == 0)
    detail::fail<ShapeError>(op, "needs operands of at least one axis, got shapes ", a.shape(), " and ", b.shape(),
                             "; multiply by a 0-d tensor with *");
  const std::int64_t k = a.shape().back(), kb = b.shape()[b.ndim() == 1 ? 0 : b.ndim() - 2];
  if (k != kb)
    detail::fail<ShapeError>(op, "inner dimensions differ: ", a.shape(), " * ", b.shape(), " (", k, " vs ", kb, ")");
  if (a.ndim() == 1) return matmul(a.unsqueeze(0), b).squeeze(b.ndim() == 1 ? -1 : -2);
  if (a.ndim() == 2 && b.ndim() <= 2) return detail::matrix_product(a, b);
  if (b.ndim() <= 2) {
    Shape rows_shape(a.shape().begin(), a.shape().end() - 1), out_shape = rows_shape;
    if (b.ndim() == 2) out_shape.push_back(b.shape()[1]);
    const Tensor rows = a.reshape({detail::checked_numel(rows_shape, op), k});
    return detail::matrix_product(rows, b).reshape(out_shape);
  }
  return detail::batched_product(a, b);
}

// The GEMM reads the (out, in) weight as the (in, out) column-major operand it is, in place.
Tensor detail::linear(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  Tensor out = empty({x.shape()[0], weight.shape()[0]}, x.device(), x.dtype());
  gemm(x, false, weight, true, out, bias, false);
  const bool with_bias = bias != nullptr;
  if (with_bias ? recording(x, weight, *bias) : recording(x, weight)) {
    std::vector<const Tensor*> inputs{&x, &weight};
    if (with_bias) inputs.push_back(bias);
    record("kten::linear", out, inputs, [x = saved(x), w = saved(weight), with_bias](const Tensor& g, const Needs& needs) {
      // dx = g W (batch, in), dW = g^T x (out, in): transposed views, read in place by the GEMM.
      Grads grads{needs[0] ? matmul(g, w) : Tensor(), needs[1] ? matmul(g.transpose(), x) : Tensor()};
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

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> onnx_gemm(OnnxCall& c) {
  const Tensor& a = c.at(0);
  const Tensor& b = c.at(1);
  if (a.ndim() != 2 || b.ndim() != 2)
    fail<ShapeError>("onnx", c.where(), ": A and B must be 2-D, not ", a.shape(), " and ", b.shape());
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_real("alpha", 1.0), beta = c.attr_real("beta", 1.0);
  const std::int64_t n = tb ? b.size(0) : b.size(1);
  // PyTorch's Linear: x W^T + b in one GEMM with the bias in its epilogue, as nn::Linear runs.
  if (!ta && tb && alpha == 1 && beta == 1 && (!c.has(2) || (c.in[2].ndim() == 1 && c.in[2].size(0) == n)) &&
      a.size(1) == b.size(1) && is_floating(a.dtype()) && a.dtype() == b.dtype() &&
      a.device() == b.device() &&
      (!c.has(2) || (c.in[2].dtype() == a.dtype() && c.in[2].device() == a.device())))
    return {kten::detail::linear(a, b, c.has(2) ? &c.in[2] : nullptr)};
  Tensor y = registered("matmul", {ta ? a.transpose() : a, tb ? b.transpose() : b});
  if (alpha != 1) y = y * alpha;
  if (c.has(2)) y = y + (beta != 1 ? c.in[2] * beta : c.in[2]);
  return {y};
}

std::vector<Tensor> matmul_op(OnnxCall& c) { return {registered("matmul", {c.at(0), c.at(1)})}; }

// Einsum: kten::einsum (einsum.cpp), int64 through float64 (exact below 2^53).
std::vector<Tensor> einsum_op(OnnxCall& c) {
  const OnnxAttribute* equation = c.attr("equation");
  if (!equation || equation->kind != OnnxAttribute::text)
    fail<FormatError>("onnx", c.where(), ": its equation attribute is missing or not a string");
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < c.in.size(); ++i) in.push_back(c.at(i));
  OpAttrs attrs;
  attrs.text = equation->s;
  return {onnx_numeric(in, [&](const std::vector<Tensor>& v) { return registered("einsum", v, attrs); })};
}

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> linalg_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {
      {"matmul", "matmul(Tensor,Tensor)", 2, {Domain::real}, DTypes::floating, true, [](X x, A) { return matmul(x[0], x[1]); }},
      {"transpose", "transpose(Tensor)", 1, {Domain::real}, DTypes::any, true, [](X x, A) { return transpose(x[0]); }},
      // text: the equation (einsum.cpp: made of kten's ops, which record themselves)
      {"einsum", "einsum(string,vector<Tensor>)", -1, {Domain::real}, DTypes::floating, true,
       [](X x, A a) { return einsum(a.text, x); }},
  };
  // matmul also carries Linear's forms (kten::detail::linear: the product with its bias).
  set_onnx(rows, "matmul",
           {{"MatMul", 13, kOnnxLastOpset, 2, 2, 1, true, matmul_op, nullptr, 0},
            {"Gemm", 13, kOnnxLastOpset, 2, 3, 1, true, onnx_gemm, nullptr, 0},
            {"Einsum", 12, kOnnxLastOpset, 1, 1 << 20, 1, true, einsum_op, nullptr, 0}},
           {onnx_node_of("kten::matmul", "MatMul"),
            {"kten::linear", [](OnnxEmit& e) {  // x W^T + b: Gemm for a matrix
               const bool bias = e.in.size() > 2;
               if (e.t(0).ndim() == 2) {
                 std::vector<std::string> inputs{e.in[0], e.in[1]};
                 if (bias) inputs.push_back(e.in[2]);
                 return e.node("Gemm", inputs, {attr_i("transB", 1)});
               }
               const std::string y = e.node("MatMul", {e.in[0], e.node("Transpose", {e.in[1]})});
               return bias ? e.node("Add", {y, e.in[2]}) : y;
             }}});
  return rows;
}

}  // namespace kten::ops
