// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file ops.hpp
/// \brief Operations on tensors. Each runs on its inputs' device and returns a tensor there;
/// inputs on different devices throw kten::DeviceMismatch, mixed dtypes kten::DTypeError.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <kten/tensor.hpp>

namespace kten {

/// \brief a + b with NumPy broadcasting.
Tensor operator+(const Tensor& a, const Tensor& b);
/// \brief a - b with NumPy broadcasting.
Tensor operator-(const Tensor& a, const Tensor& b);
/// \brief a * b (elementwise) with NumPy broadcasting.
Tensor operator*(const Tensor& a, const Tensor& b);
/// \brief a / b (elementwise) with NumPy broadcasting.
Tensor operator/(const Tensor& a, const Tensor& b);
/// \brief Adds a scalar to every element.
Tensor operator+(const Tensor& a, double s);
/// \brief Adds every element to a scalar.
Tensor operator+(double s, const Tensor& a);
/// \brief Subtracts a scalar from every element.
Tensor operator-(const Tensor& a, double s);
/// \brief s - a, elementwise.
Tensor operator-(double s, const Tensor& a);
/// \brief Multiplies every element by a scalar.
Tensor operator*(const Tensor& a, double s);
/// \brief Multiplies a scalar by every element.
Tensor operator*(double s, const Tensor& a);
/// \brief Divides every element by a scalar.
Tensor operator/(const Tensor& a, double s);
/// \brief s / a, elementwise.
Tensor operator/(double s, const Tensor& a);
/// \brief -a, elementwise.
Tensor operator-(const Tensor& a);

/// \brief a * b + c in one pass over memory (one kernel, one rounding); shapes must be equal.
/// Writing `a * b + c` makes two passes and a temporary, as in PyTorch (torch.addcmul fuses).
Tensor fma(const Tensor& a, const Tensor& b, const Tensor& c);

/// \brief Elementwise e^x.
Tensor exp(const Tensor& x);
/// \brief Elementwise natural logarithm.
Tensor log(const Tensor& x);
/// \brief Elementwise square root.
Tensor sqrt(const Tensor& x);
/// \brief Elementwise absolute value.
Tensor abs(const Tensor& x);
/// \brief Elementwise negation.
Tensor neg(const Tensor& x);
/// \brief Elementwise max(x, 0).
Tensor relu(const Tensor& x);
/// \brief Elementwise logistic function.
Tensor sigmoid(const Tensor& x);
/// \brief Elementwise hyperbolic tangent.
Tensor tanh(const Tensor& x);

// Differentiable like every op here, with PyTorch 1.13's values and gradients at the edges.

/// \brief Elementwise x^exponent (torch.pow): exponents 0.5 and -0.5 are sqrt and 1/sqrt (so
/// pow(-inf, 0.5) is NaN), 0 gives 1 everywhere, NaN included, and a gradient of 0.
Tensor pow(const Tensor& x, double exponent);
/// \brief Elementwise a^b with NumPy broadcasting; d/db is a^b log(a), taken as 0 where a == 0 and
/// b >= 0, and d/da is 0 where b == 0 (as PyTorch).
Tensor pow(const Tensor& a, const Tensor& b);
/// \brief Elementwise larger of a and b with broadcasting (torch.maximum): NaN when either is NaN;
/// at a tie each input gets half the gradient.
Tensor maximum(const Tensor& a, const Tensor& b);
/// \brief Elementwise smaller of a and b with broadcasting (torch.minimum): NaN when either is
/// NaN; at a tie each input gets half the gradient.
Tensor minimum(const Tensor& a, const Tensor& b);
/// \brief Elementwise min(max(x, lo), hi) (hi everywhere when lo > hi; NaN everywhere when a bound
/// is NaN); the gradient passes where lo <= x <= hi, bounds included, and is 0 elsewhere.
Tensor clamp(const Tensor& x, double lo, double hi);
/// \brief Elementwise largest integer not above x (NaN and infinities stay); zero gradient.
Tensor floor(const Tensor& x);
/// \brief Elementwise smallest integer not below x; zero gradient.
Tensor ceil(const Tensor& x);
/// \brief Elementwise x rounded toward zero; zero gradient.
Tensor trunc(const Tensor& x);
/// \brief Elementwise nearest integer, halves to even (torch.round: 0.5 -> 0, 2.5 -> 2); zero gradient.
Tensor round(const Tensor& x);
/// \brief Elementwise -1, 0 or 1 by x's sign; 0 and -0 stay, NaN stays NaN (NumPy's and ONNX's;
/// PyTorch 1.13 gives 0); zero gradient.
Tensor sign(const Tensor& x);
/// \brief Elementwise C remainder of a / b with broadcasting, the sign of a (torch.fmod); NaN where
/// b is 0. Gradients: g for a, -g trunc(a / b) for b.
Tensor fmod(const Tensor& a, const Tensor& b);
/// \brief Elementwise remainder of a / b with broadcasting, the sign of b (torch.remainder, Python's
/// %); NaN where b is 0. Gradients: g for a, -g floor(a / b) for b.
Tensor remainder(const Tensor& a, const Tensor& b);
/// \brief Elementwise sine.
Tensor sin(const Tensor& x);
/// \brief Elementwise cosine.
Tensor cos(const Tensor& x);
/// \brief Elementwise arctangent, in (-pi/2, pi/2); the gradient is g / (1 + x^2).
Tensor atan(const Tensor& x);
/// \brief Elementwise log(1 + x), accurate for small x.
Tensor log1p(const Tensor& x);
/// \brief Elementwise e^x - 1, accurate for small x.
Tensor expm1(const Tensor& x);
/// \brief Elementwise error function.
Tensor erf(const Tensor& x);
/// \brief Elementwise log(1 + e^(beta x)) / beta, and x itself where beta x > threshold
/// (torch.nn.functional.softplus).
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
/// \brief Elementwise exact GELU, x/2 (1 + erf(x / sqrt 2)) (torch.nn.functional.gelu, approximate='none').
Tensor gelu(const Tensor& x);
/// \brief Elementwise SiLU (swish), x / (1 + e^-x).
Tensor silu(const Tensor& x);

// Reductions: over every element (a 0-d tensor on x's device, no host synchronisation), along one
// axis (removed), or over several axes (removed, or kept as extent 1 with keepdim). Axes may be
// negative (counting from the end) and are named at most once (ShapeError otherwise); an empty
// list means every axis, as PyTorch 1.13's sum(x, dim=[]); a 0-d tensor takes axis 0 or -1. Each
// has a gradient. A braced list picks the several-axes form: sum(x, {0, 2}), sum(x, {}, true).

/// \brief Sum of all elements: a 0-d tensor on x's device (no host synchronisation).
Tensor sum(const Tensor& x);
/// \brief Sum along one axis (negative counts from the end); the axis is removed.
Tensor sum(const Tensor& x, int axis);
/// \brief Sum over several axes (torch.sum(x, dim, keepdim)).
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
/// \brief Mean of all elements: a 0-d tensor on x's device; NaN for an empty tensor.
Tensor mean(const Tensor& x);
/// \brief Mean along one axis.
Tensor mean(const Tensor& x, int axis);
/// \brief Mean over several axes (torch.mean(x, dim, keepdim)).
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
/// \brief Largest element: a 0-d tensor on x's device; ShapeError for an empty tensor.
Tensor max(const Tensor& x);
/// \brief Largest element along one axis.
Tensor max(const Tensor& x, int axis);
/// \brief Largest element over several axes (torch.amax; ShapeError when they hold no element).
/// Its gradient goes to the elements equal to the result, shared evenly among ties.
Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
/// \brief Smallest element: a 0-d tensor on x's device; ShapeError for an empty tensor.
Tensor min(const Tensor& x);
/// \brief Smallest element along one axis.
Tensor min(const Tensor& x, int axis);
/// \brief Smallest element over several axes (torch.amin), its gradient as max's.
Tensor min(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
/// \brief Frobenius (L2) norm of all elements: a 0-d tensor on x's device.
Tensor norm(const Tensor& x);
/// \brief L2 norm along one axis.
Tensor norm(const Tensor& x, int axis);
/// \brief L2 norm over several axes (torch.linalg.vector_norm(x, 2, dim, keepdim)); its gradient
/// x / norm is 0 where the norm is 0.
Tensor norm(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
/// \brief Unbiased variance of all elements (torch.var: squared deviations from the mean over
/// n - 1, computed in two passes); NaN for fewer than two elements.
Tensor var(const Tensor& x);
/// \brief Unbiased variance along one axis.
Tensor var(const Tensor& x, int axis);
/// \brief Unbiased variance over several axes (torch.var(x, dim, unbiased=True, keepdim)).
Tensor var(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);

// Comparisons, selection and indexing. Comparisons and where() take every dtype; index tensors
// are int64. where(), index_select() and gather() are differentiable in their float operands;
// comparisons and argmax() are not.

/// \brief a == b elementwise with NumPy broadcasting -> boolean. a and b have one dtype (convert
/// with astype() otherwise); NaN equals nothing, itself included (IEEE).
Tensor eq(const Tensor& a, const Tensor& b);
/// \brief a != b elementwise with broadcasting -> boolean; true wherever either is NaN (IEEE).
Tensor ne(const Tensor& a, const Tensor& b);
/// \brief a < b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor lt(const Tensor& a, const Tensor& b);
/// \brief a <= b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor le(const Tensor& a, const Tensor& b);
/// \brief a > b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor gt(const Tensor& a, const Tensor& b);
/// \brief a >= b elementwise with broadcasting -> boolean; false wherever either is NaN.
Tensor ge(const Tensor& a, const Tensor& b);
/// \brief a == s elementwise -> boolean. The scalar is converted to a's dtype; for an int64 (or
/// boolean) tensor it must be an integer (0 or 1) that the dtype holds, else DTypeError: compare
/// with a float copy instead (a.astype(kten::float64)).
Tensor eq(const Tensor& a, double s);
/// \brief a != s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor ne(const Tensor& a, double s);
/// \brief a < s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor lt(const Tensor& a, double s);
/// \brief a <= s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor le(const Tensor& a, double s);
/// \brief a > s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor gt(const Tensor& a, double s);
/// \brief a >= s elementwise -> boolean (the scalar as for eq(a, s)).
Tensor ge(const Tensor& a, double s);

/// \brief a where cond is true, else b: cond boolean (DTypeError otherwise: make one with a
/// comparison), a and b of one dtype (any), all three broadcast together; the result has a's dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// \brief where() with b a scalar, converted to a's dtype (as full() converts).
Tensor where(const Tensor& cond, const Tensor& a, double b);
/// \brief where() with a a scalar, converted to b's dtype (as full() converts).
Tensor where(const Tensor& cond, double a, const Tensor& b);

/// \brief The index (int64) of the largest element along `axis`, which is removed (kept with
/// extent 1 when `keepdim`). NaN counts as the largest (the first NaN wins, as PyTorch); among
/// equal largest elements the first index wins. ShapeError when the axis is empty.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);
/// \brief The flat row-major index (a 0-d int64 tensor on x's device) of the largest element,
/// NaN and ties as for argmax(x, axis); ShapeError for an empty tensor.
Tensor argmax(const Tensor& x);
/// \brief The index (int64) of the smallest element along `axis` (torch.argmin): NaN and ties as
/// for argmax(x, axis) (a NaN is found; ties give the first index).
Tensor argmin(const Tensor& x, int axis, bool keepdim = false);
/// \brief The flat row-major index of the smallest element (a 0-d int64 tensor on x's device).
Tensor argmin(const Tensor& x);

/// \brief Running sums along `axis` (torch.cumsum): out[..., j, ...] = x[..., 0, ...] + ... +
/// x[..., j, ...]; float32 accumulated in float64. Its gradient is the running sum from the end.
Tensor cumsum(const Tensor& x, int axis);
/// \brief The k largest (or, not `largest`, smallest) elements along `axis` and their int64
/// indices (torch.topk), sorted, NaN counting as the largest; equal values in index order (ONNX's
/// TopK; PyTorch's order of ties is unspecified). ShapeError unless 0 <= k <= the axis' extent.
/// One thread per line, O(extent * k) each: for the short axes of models, not a sort.
std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, int axis = -1, bool largest = true, bool sorted = true);

/// \brief The slices of x at `indices` along `axis` (torch.index_select): indices is a 1-D int64
/// tensor; the result has x's shape with that axis's extent indices.numel(). An index outside
/// [0, extent) (negative ones included, as PyTorch) is an IndexError, found by the kernel as it
/// reads the index (no host synchronisation): thrown by the call on cpu(), at the next
/// synchronisation on a GPU (the kernel gives 0 there meanwhile), as for the graph ops below.
Tensor index_select(const Tensor& x, int axis, const Tensor& indices);
/// \brief torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for axis 0 (likewise for the
/// other axes). index is int64 with x's rank and no extent larger than x's off the axis; the result
/// has index's shape. Indices are checked as for index_select (IndexError, no host synchronisation).
Tensor gather(const Tensor& x, int axis, const Tensor& index);

// --- Graph ops: scatter, index_add, embedding (deterministic) -----------------------------------
// For meshes and particles: sums (and means, maxima, minima) of many sources into one destination,
// with the same bits run to run, across thread counts and on every device (no floating-point
// atomics: each destination adds its sources itself, in the order of their positions along the
// axis; docs/numerics.md). index is int64; an index outside [0, extent) is an IndexError naming
// the op and the shapes, found by the kernel without a host synchronisation: on cpu() it is thrown
// by the call, on a GPU at the next synchronisation (item(), a copy to the host, synchronize());
// the kernel skips it meanwhile. Differentiable in x and the sources (float32, float64; strided
// inputs read in place).

/// \brief torch.index_add: x with source's slices added along `axis` at positions `index`:
/// out[..., index[i], ...] += source[..., i, ...]. index is 1-D int64 of source's extent along the
/// axis; source has x's shape elsewhere. A repeated index adds every slice, in the order of i.
Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source);
/// \brief torch.scatter_add: x with out[index[i][j]][j] += src[i][j] for axis 0 (likewise for
/// the other axes). index, src and x have one rank; index is no larger than src on any axis and no
/// larger than x off `axis`; src's elements outside index's shape are not used.
Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src);
/// \brief torch.scatter_reduce: as scatter_add, each destination reduced with `reduce`: "sum",
/// "mean" (divided by the number of values, x's own included when include_self), "amax" or "amin"
/// (NaN wins). With include_self = false a destination that receives a value does not take x's
/// own; one that receives none keeps x's. Gradients as PyTorch 1.13's (amax/amin: split evenly
/// among the values equal to the result).
Tensor scatter_reduce(const Tensor& x, int axis, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self = true);
/// \brief at::embedding: the rows of `weight` (num, dim) at `indices` (int64, any shape): a
/// result of shape indices.shape() + {dim}. Its gradient adds each row's gradients in index order
/// (index_add), deterministically.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// --- end of graph ops ---------------------------------------------------------------------------


/// \brief sum, mean, max, min, norm and var of a braced list of axes: name(x, {0, 2}, keepdim) is
/// name(x, std::vector<int>{0, 2}, keepdim), and name(x, {}) reduces every axis. Without these a
/// braced list would convert to int ({1}, and {} to axis 0) and pick the one-axis form.
#define KTEN_BRACED_AXES(name)                                                                     \
  inline Tensor name(const Tensor& x, std::initializer_list<int> axes, bool keepdim = false) {     \
    return name(x, std::vector<int>(axes), keepdim);                                              \
  }
KTEN_BRACED_AXES(sum)
KTEN_BRACED_AXES(mean)
KTEN_BRACED_AXES(max)
KTEN_BRACED_AXES(min)
KTEN_BRACED_AXES(norm)
KTEN_BRACED_AXES(var)
#undef KTEN_BRACED_AXES

/// \brief Softmax along `axis`: exp(x - max) / sum(exp(x - max)) (stable for any finite x; NaN
/// propagates, and a slice holding +inf, or only -inf, gives NaN, as PyTorch). Differentiable.
Tensor softmax(const Tensor& x, int axis);
/// \brief log(softmax(x, axis)) computed stably as (x - max) - log(sum(exp(x - max))), as PyTorch.
Tensor log_softmax(const Tensor& x, int axis);
/// \brief log(sum(exp(x), axis)) without overflow (torch.logsumexp): NaN when an element is NaN,
/// else +inf when one is +inf, -inf when every one is -inf (an empty axis included). Differentiable.
Tensor logsumexp(const Tensor& x, int axis, bool keepdim = false);

// --- Pooling and resampling (issue 31 item 2) ---------------------------------------------------
// Channels first, as PyTorch: (N, C, L), (N, C, H, W), (N, C, D, H, W), or without the batch axis
// for pooling, (C, L) ... (C, D, H, W). Sizes are kten::Shape: one value for every spatial axis, or
// one per axis. Differentiable, on every device, float32 and float64, strided inputs read in place;
// gradients are gathers (each input element sums the outputs that read it), so they give the same
// bits run to run. Bad sizes (a window larger than the padded input, an output below 1, padding
// above half the kernel, a wrong rank) throw kten::ShapeError naming the op and the shapes.

}  // namespace kten

namespace kten::nn {
/// \brief interpolate's and Upsample's modes (PyTorch's 'nearest', 'linear', 'bilinear',
/// 'trilinear'): linear takes (N, C, L), bilinear (N, C, H, W), trilinear (N, C, D, H, W); nearest
/// any of them.
enum class InterpolateMode { nearest, linear, bilinear, trilinear };
}  // namespace kten::nn

namespace kten {

/// \brief F.max_pool1d: the largest element of each window of `kernel` elements, windows `stride`
/// apart (default: the kernel), the input padded with -inf by `padding` on both sides (at most half
/// the kernel). NaN in a window gives NaN (as PyTorch); the gradient goes to the arg max (the first
/// of tied elements, the last NaN).
Tensor max_pool1d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0});
/// \brief F.max_pool2d over (H, W), as max_pool1d.
Tensor max_pool2d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0});
/// \brief F.max_pool3d over (D, H, W), as max_pool1d.
Tensor max_pool3d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0});
/// \brief F.avg_pool1d: the mean of each window (as max_pool1d's), zero padding counted in the
/// divisor when count_include_pad; ceil_mode rounds the output size up (a last window that starts
/// inside the input or its left padding).
Tensor avg_pool1d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
/// \brief F.avg_pool2d over (H, W), as avg_pool1d.
Tensor avg_pool2d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
/// \brief F.avg_pool3d over (D, H, W), as avg_pool1d.
Tensor avg_pool3d(const Tensor& x, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
/// \brief F.adaptive_avg_pool1d: `output_size` means per axis, bin o of an axis of n elements
/// covering [floor(o n / out), ceil((o + 1) n / out)) (uneven bins, overlapping where n / out is
/// not whole, as PyTorch).
Tensor adaptive_avg_pool1d(const Tensor& x, const Shape& output_size);
/// \brief F.adaptive_avg_pool2d over (H, W), as adaptive_avg_pool1d.
Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size);
/// \brief F.adaptive_avg_pool3d over (D, H, W), as adaptive_avg_pool1d.
Tensor adaptive_avg_pool3d(const Tensor& x, const Shape& output_size);
/// \brief F.interpolate to `size` (the spatial extents of the result) of a batched input (N, C,
/// ...): nearest (PyTorch's 'nearest': source floor(o in / out)) or the linear family, whose
/// align_corners maps the corner elements onto each other (else the corners of the elements, the
/// source clamped at 0); align_corners with nearest is refused, as PyTorch.
Tensor interpolate(const Tensor& x, const Shape& size, nn::InterpolateMode mode = nn::InterpolateMode::nearest,
                   bool align_corners = false);
/// \brief F.interpolate by `scale` per spatial axis (or one for all): extents floor(n scale), the
/// sources computed from the scale itself (PyTorch's recompute_scale_factor=False), as the other
/// form otherwise.
Tensor interpolate(const Tensor& x, const std::vector<double>& scale, nn::InterpolateMode mode = nn::InterpolateMode::nearest,
                   bool align_corners = false);
// --- end of pooling and resampling ---------------------------------------------------------------

/// \brief Matrix product with torch.matmul's rules: (m x k) * (k x n) -> (m x n); a vector on the
/// left is a row, dropped from the result, and on the right a column: (k) * (k) -> a 0-d dot
/// product, (m x k) * (k) -> (m), (k) * (k x n) -> (n); more than 2 axes are batches of matrices,
/// (..., m, k) * (..., k, n) -> (..., m, n), their batch axes broadcast like NumPy (a matrix or a
/// vector applies to every batch). ShapeError for a 0-d operand or differing k. Differentiable.
Tensor matmul(const Tensor& a, const Tensor& b);
/// \brief torch.einsum: the sum of products the subscripts name, e.g. "bij,bjk->bik" (a batched
/// matmul), "ii->i" (a diagonal), "...ij->...ji"; without "->", NumPy's implicit output (the
/// ellipsis, then the letters used once, sorted). Labels of extent 1 broadcast. Made of kten's ops
/// (pairs of operands are batched matmuls, left to right), which give its gradient.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
/// \brief F.scaled_dot_product_attention: softmax(query key^T scale + bias) value, query (..., L, E),
/// key (..., S, E), value (..., S, Ev) -> (..., L, Ev), the batch axes broadcast as matmul's. The
/// bias: `attn_mask` broadcast to (..., L, S), a boolean one true where a query may attend to a key
/// (0 there, -inf elsewhere), a float one (the query's dtype) added as it is; `is_causal` lets query
/// i attend to keys 0..i alone (with attn_mask: a kten::Error, as PyTorch). `scale` defaults to
/// 1 / sqrt(E). `dropout_p` in [0, 1] drops attention weights (always: pass 0 in evaluation, as
/// PyTorch), the masks drawn from `seed` (default nn::next_seed()). A query that may attend to no
/// key gets NaN (softmax of -inf alone, as PyTorch 1.13; PyTorch 2.5+ gives 0 there). Made of
/// kten's ops (two batched GEMMs around softmax), which give its gradient on every device.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    std::optional<std::uint64_t> seed = std::nullopt);
/// \brief Transposed view of a 2-D tensor (x.transpose(); shares storage, no copy).
Tensor transpose(const Tensor& x);

// --- Convolutions and padding (issue 31) ------------------------------------------------------

namespace nn {
/// \brief How pad() and the convolution layers fill the border: zeros (or a constant value),
/// reflect (mirrored without repeating the edge; a pad must be smaller than its axis), replicate
/// (the edge element repeated) or circular (periodic; a pad must be at most its axis).
enum class PaddingMode { zeros, reflect, replicate, circular };
}  // namespace nn

/// \brief F.pad: pads the last axes of x, `pads` = (before, after) pairs from the last axis
/// backwards (PyTorch's order: {left, right, top, bottom, ...}), every pad >= 0. zeros fills with
/// `value` (PyTorch's 'constant' mode); the other modes as nn::PaddingMode says, on any rank.
/// ShapeError naming the shapes for an odd or too long list, a negative pad, or a pad the mode
/// cannot take. Differentiable (the gradient sums every output element back to its source).
Tensor pad(const Tensor& x, const Shape& pads, nn::PaddingMode mode = nn::PaddingMode::zeros, double value = 0);

/// \brief F.conv1d: x (N, C_in, L) or (C_in, L) unbatched, w (C_out, C_in / groups, k), b (C_out)
/// or undefined (no bias). stride, padding and dilation hold one value for every spatial axis or
/// one per axis. Implicit GEMM on the host, a tiled team kernel on GPUs. ShapeError naming the
/// shapes for channels that do not match the weight, groups that do not divide the channels, a
/// kernel larger than the padded input or an output size below 1. Differentiable in x, w and b.
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1}, const Shape& padding = {0},
              const Shape& dilation = {1}, std::int64_t groups = 1);
/// \brief F.conv2d on (N, C, H, W) or (C, H, W), as conv1d.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1}, const Shape& padding = {0},
              const Shape& dilation = {1}, std::int64_t groups = 1);
/// \brief F.conv3d on (N, C, D, H, W) or (C, D, H, W), as conv1d.
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1}, const Shape& padding = {0},
              const Shape& dilation = {1}, std::int64_t groups = 1);
/// \brief F.conv_transpose1d (the gradient of conv1d with respect to its input): x (N, C_in, L),
/// w (C_in, C_out / groups, k), b (C_out) or undefined; output length (L - 1) stride - 2 padding
/// + dilation (k - 1) + output_padding + 1, output_padding smaller than stride or dilation.
/// Errors and gradients as conv1d.
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1},
                        const Shape& padding = {0}, const Shape& output_padding = {0}, std::int64_t groups = 1,
                        const Shape& dilation = {1});
/// \brief F.conv_transpose2d on (N, C, H, W) or (C, H, W), as conv_transpose1d.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1},
                        const Shape& padding = {0}, const Shape& output_padding = {0}, std::int64_t groups = 1,
                        const Shape& dilation = {1});
/// \brief F.conv_transpose3d on (N, C, D, H, W) or (C, D, H, W), as conv_transpose1d.
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b = {}, const Shape& stride = {1},
                        const Shape& padding = {0}, const Shape& output_padding = {0}, std::int64_t groups = 1,
                        const Shape& dilation = {1});
// --- Normalisation and leaky_relu (issue 31): torch.nn.functional's forms and argument order, on
// channels-first input (N, C, ...), differentiable in x, weight and bias. Per-channel tensors
// (running statistics, weight, bias) are (C) or undefined (none), of x's dtype and device;
// otherwise ShapeError or DTypeError naming the op and the shapes.

/// \brief torch.nn.functional.batch_norm: in training, normalises each channel by the batch's mean
/// and biased variance over N and the spatial axes, and updates the defined running statistics in
/// place, off the tape: running = (1 - momentum) running + momentum batch, with the unbiased
/// variance (ShapeError for a single value per channel); otherwise normalises by the running
/// statistics (both needed). Then scales by weight and shifts by bias where defined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
/// \brief torch.nn.functional.group_norm: normalises each sample's `groups` groups of C / groups
/// consecutive channels (with their spatial axes) by their mean and biased variance, then the
/// per-channel weight and bias; groups must divide C (ShapeError).
Tensor group_norm(const Tensor& x, std::int64_t groups, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
/// \brief torch.nn.functional.instance_norm: normalises each sample's channels over the spatial axes
/// (more than one element, else ShapeError) when use_input_stats, updating the defined running
/// statistics with the batch's average as batch_norm does; otherwise by the running statistics.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
/// \brief Elementwise x where x > 0, else slope x (torch.nn.functional.leaky_relu); the gradient is
/// g where x > 0, else slope g.
Tensor leaky_relu(const Tensor& x, double slope = 0.01);

}  // namespace kten
