// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Convolutions (conv1d/2d/3d and their transposes), each with its gradient.
//
// One kernel serves 1-D, 2-D and 3-D: lower ranks are 3-D with unit axes (extent 1, kernel 1,
// stride 1, no padding). A convolution is three matrix products per (batch item, group), each with
// one operand gathered on the fly from the implicit im2col matrix (never materialised, not even a
// whole batch item's):
//   forward       Y (C_out/g x out_pix)  = W (C_out/g x C_in/g kvol)  * im2col(X)
//   grad_input    dX (C_in/g x in_pix)   = W^T (C_in/g x C_out/g kvol) * col2im-gather(dY)
//   grad_weight   dW (C_out/g x C_in/g kvol) = dY (C_out/g x pixels) * im2col(X)^T
// where col2im-gather reads, for each input pixel and kernel tap, the output pixel that tap came
// from (zero where the stride skips it), so the gradient is a gather, not a scatter with atomics.
// The transposed convolutions are the same products with the roles swapped: conv_transpose's
// forward is grad_input, its input gradient the forward, its weight gradient grad_weight.
// This file holds the arguments' checks, the geometry, the choice of path for each product, the
// public forms, their registry rows and ONNX forms. The paths (conv_paths.hpp): a GPU runs every
// product as the implicit GEMM, its B gathered from E, a zero-extended copy of the gathered tensor
// (conv_gemm.cpp, conv_extension.cpp). On cpu(), a 3x3 (3x3x3) forward or grad_input at stride 1
// with enough channels runs as Winograd (conv_winograd.cpp: F(4x4, 3x3) for 2-D float32 from 16
// channels, else F(2x2, 3x3) or F(2x2x2, 3x3x3) from 32), the forward (stride 1 along w) and
// grad_input (stride 1) with enough channels and long enough rows as a direct convolution on E
// (conv_direct.cpp), and the rest as the implicit GEMM, packed straight from the tensor (grad_weight
// at stride 1 along w reads E in place). pad, which the padded convolution layers call first, is in
// pad.cpp.
#include "conv.hpp"

#include <string>
#include <vector>

#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "conv_paths.hpp"
#include "core/checked.hpp"
#include "core/checks.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief (N, channels, sizes of the last `dims` of the three spatial axes).
Shape conv_shape(std::int64_t batch, std::int64_t channels, const std::int64_t* sizes, int dims) {
  Shape s{batch, channels};
  for (int a = 3 - dims; a < 3; ++a) s.push_back(sizes[a]);
  return s;
}

/// \brief Y = conv(X, W) + b: the forward product (X any strided view).
Tensor conv_forward(const char* op, const ConvGeometry& g, int dims, const Tensor& x, const Tensor& w, const Tensor* b) {
  const Shape y_shape = conv_shape(g.batch, g.groups * g.cout_g, g.out, dims);
  const bool winograd = x.device().is_cpu() && winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(x.dtype()))) > 0;
  if (winograd || direct_on(ConvProduct::forward, g, x)) {  // A: the weight as (groups, kvol, C_out/g, C_in/g), a small copy
    const Tensor a = w.reshape({g.groups, g.cout_g, g.cin_g, g.kvol()}).permute({0, 3, 1, 2}).contiguous();
    return (winograd ? conv_winograd : conv_direct)(op, ConvProduct::forward, g, dims, a, x, b, y_shape);
  }
  return conv_product(op, ConvProduct::forward, g, dims, w.contiguous(), x, b, 1, y_shape);
}

/// \brief dX from dY (any strided view), plus a bias per input channel (conv_transpose's forward).
Tensor conv_grad_input(const char* op, const ConvGeometry& g, int dims, const Tensor& dy, const Tensor& w, const Tensor* b) {
  const Shape dx_shape = conv_shape(g.batch, g.groups * g.cin_g, g.in, dims);
  const Tensor w4 = w.reshape({g.groups, g.cout_g, g.cin_g, g.kvol()});
  const bool winograd = dy.device().is_cpu() && winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(dy.dtype()))) > 0;
  if (winograd || direct_on(ConvProduct::grad_input, g, dy))  // A: (groups, kvol, C_in/g, C_out/g), a small copy
    return (winograd ? conv_winograd : conv_direct)(op, ConvProduct::grad_input, g, dims, w4.permute({0, 3, 2, 1}).contiguous(),
                                                    dy, b, dx_shape);
  // A: the weight as (groups, C_in/g, C_out/g, kvol), a small copy.
  return conv_product(op, ConvProduct::grad_input, g, dims, w4.permute({0, 2, 1, 3}).contiguous(), dy, b, 1, dx_shape);
}

/// \brief dW (the weight's shape `w_shape`) from X (any strided view) and dY. The sum over
/// pixels is cut into slabs of whole output rows, at least 1024 pixels (batch items times pieces), about 64 of them,
/// each written to its own partial product and then summed: parallel work for a single batch item,
/// and slabs that do not depend on the number of threads.
Tensor conv_grad_weight(const char* op, const ConvGeometry& g, int dims, const Tensor& x, const Tensor& dy, const Shape& w_shape) {
  if (g.batch == 0) return zeros(w_shape, x.device(), x.dtype());
  const std::int64_t wanted = (64 + g.batch * g.groups - 1) / (g.batch * g.groups);
  const std::int64_t pieces = std::max<std::int64_t>(1, std::min({wanted, g.out_pix() / 1024, g.out[0] * g.out[1]}));
  const std::int64_t chunks = g.batch * pieces;
  const Tensor partial = conv_product(op, ConvProduct::grad_weight, g, dims, dy.contiguous(), x, nullptr, pieces,
                                      {chunks, g.groups * g.cout_g, g.cin_g * g.kvol()});
  return (chunks == 1 ? partial : sum(partial, 0)).reshape(w_shape);
}

/// \brief The bias gradient: dY summed over the batch and every spatial axis.
Tensor bias_grad(const Tensor& dy) {
  std::vector<int> axes{0};
  for (int a = 2; a < dy.ndim(); ++a) axes.push_back(a);
  return sum(dy, axes);
}

// --- arguments and their checks ------------------------------------------------------------------

/// \brief A size argument (stride, padding, ...) as one value per spatial axis: one value applies to
/// every axis. ShapeError for another length or a value below `least`.
std::vector<std::int64_t> per_axis(const char* op, const char* what, const Shape& v, int dims, std::int64_t least) {
  if (v.size() != 1 && v.size() != static_cast<std::size_t>(dims))
    fail<ShapeError>(op, what, " ", v, " must hold 1 or ", dims, " values");
  std::vector<std::int64_t> out(dims, v[0]);
  for (int a = 0; a < dims; ++a) {
    if (v.size() > 1) out[a] = v[a];
    if (out[a] < least) fail<ShapeError>(op, what, " ", v, " must be >= ", least);
  }
  return out;
}

/// \brief a * b + c over a convolution's sizes and attributes; a ShapeError where it leaves int64
/// (a stride, padding, dilation or group count near 2^63, from a caller or a model file).
std::int64_t geometry_mad(const char* op, std::int64_t a, std::int64_t b, std::int64_t c) {
  const auto product = checked_mul(a, b);
  const auto result = product ? checked_add(*product, c) : std::nullopt;
  if (!result)
    fail<ShapeError>(op, "the geometry overflows 64 bits (", a, " * ", b, " + ", c,
                     "): the stride, padding, dilation or groups is too large");
  return *result;
}

/// \brief x (N, C, spatial...) and w (O, I, kernel...) checked for a convolution of `dims` spatial
/// axes: ranks, dtypes and devices, groups and the bias. An unbatched x (C, spatial...) is seen
/// with a batch of one.
void check_conv_operands(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t groups) {
  check_defined(x, op);
  check_defined(w, op);
  check_compatible(op, x, w);
  if (b.defined()) check_compatible(op, x, b);
  if (x.ndim() != dims + 2)
    fail<ShapeError>(op, "expects an input of ", dims + 2, " axes (N, C, spatial...) or ", dims + 1, " unbatched, got shape ", x.shape());
  if (w.ndim() != dims + 2)
    fail<ShapeError>(op, "expects a weight of ", dims + 2, " axes, got shape ", w.shape(), " for input ", x.shape());
  if (groups < 1) fail<ShapeError>(op, "groups must be >= 1, got ", groups);
}

/// \brief The geometry of conv{dims}d(x, w) and its output shape's spatial sizes.
ConvGeometry conv_geometry(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b,
                           const Shape& stride, const Shape& padding, const Shape& dilation, std::int64_t groups) {
  check_conv_operands(op, dims, x, w, b, groups);
  const std::int64_t cin = x.shape()[1], cout = w.shape()[0];
  if (cin % groups != 0 || cout % groups != 0)
    fail<ShapeError>(op, "groups ", groups, " must divide the input channels and the weight's output channels: input ",
                     x.shape(), ", weight ", w.shape());
  const std::int64_t expected = geometry_mad(op, w.shape()[1], groups, 0);
  if (expected != cin)
    fail<ShapeError>(op, "the input's ", cin, " channels do not match the weight: input ", x.shape(), ", weight ", w.shape(),
                     " with groups ", groups, " expects ", expected, " channels");
  if (b.defined() && (b.ndim() != 1 || b.shape()[0] != cout))
    fail<ShapeError>(op, "the bias must have shape (", cout, "), got ", b.shape(), " for weight ", w.shape());
  const auto s = per_axis(op, "stride", stride, dims, 1), p = per_axis(op, "padding", padding, dims, 0),
             d = per_axis(op, "dilation", dilation, dims, 1);
  ConvGeometry g;
  g.batch = x.shape()[0];
  g.groups = groups;
  g.cin_g = cin / groups;
  g.cout_g = cout / groups;
  for (int a = 0; a < dims; ++a) {
    const int t = 3 - dims + a;
    g.in[t] = x.shape()[2 + a];
    g.k[t] = w.shape()[2 + a];
    g.stride[t] = s[a];
    g.pad[t] = p[a];
    g.dil[t] = d[a];
    if (g.in[t] == 0) fail<ShapeError>(op, "the input ", x.shape(), " has an empty spatial axis (PyTorch's refusal too)");
    const std::int64_t span = geometry_mad(op, d[a], g.k[t] - 1, 1), padded = geometry_mad(op, 2, p[a], g.in[t]);
    if (g.k[t] < 1 || span > padded)
      fail<ShapeError>(op, "the kernel (", w.shape(), ", dilation ", dilation, ") is larger than the padded input (",
                       x.shape(), ", padding ", padding, ")");
    g.out[t] = (padded - span) / s[a] + 1;
  }
  return g;
}

/// \brief The geometry of conv_transpose{dims}d(x, w): the convolution whose input gradient it
/// is, its input side the transposed convolution's output.
ConvGeometry conv_transpose_geometry(const char* op, int dims, const Tensor& x, const Tensor& w, const Tensor& b,
                                     const Shape& stride, const Shape& padding, const Shape& output_padding,
                                     std::int64_t groups, const Shape& dilation) {
  check_conv_operands(op, dims, x, w, b, groups);
  const std::int64_t cin = x.shape()[1], cout = geometry_mad(op, w.shape()[1], groups, 0);
  if (cin % groups != 0)
    fail<ShapeError>(op, "groups ", groups, " must divide the input channels: input ", x.shape(), ", weight ", w.shape());
  if (w.shape()[0] != cin)
    fail<ShapeError>(op, "the input's ", cin, " channels do not match the weight: input ", x.shape(), ", weight ",
                     w.shape(), " expects ", w.shape()[0], " channels");
  if (b.defined() && (b.ndim() != 1 || b.shape()[0] != cout))
    fail<ShapeError>(op, "the bias must have shape (", cout, "), got ", b.shape(), " for weight ", w.shape(), " and groups ", groups);
  const auto s = per_axis(op, "stride", stride, dims, 1), p = per_axis(op, "padding", padding, dims, 0),
             op_ = per_axis(op, "output_padding", output_padding, dims, 0), d = per_axis(op, "dilation", dilation, dims, 1);
  ConvGeometry g;
  g.batch = x.shape()[0];
  g.groups = groups;
  g.cin_g = cout / groups;
  g.cout_g = cin / groups;
  for (int a = 0; a < dims; ++a) {
    const int t = 3 - dims + a;
    g.out[t] = x.shape()[2 + a];
    g.k[t] = w.shape()[2 + a];
    g.stride[t] = s[a];
    g.pad[t] = p[a];
    g.dil[t] = d[a];
    if (g.out[t] == 0) fail<ShapeError>(op, "the input ", x.shape(), " has an empty spatial axis (PyTorch's refusal too)");
    if (op_[a] >= s[a] && op_[a] >= d[a])
      fail<ShapeError>(op, "output_padding ", output_padding, " must be smaller than the stride ", stride, " or the dilation ", dilation);
    // (out - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    const std::int64_t strided = geometry_mad(op, g.out[t] - 1, s[a], op_[a] + 1);
    g.in[t] = geometry_mad(op, -2, p[a], geometry_mad(op, d[a], g.k[t] - 1, strided));
    if (g.k[t] < 1 || g.in[t] < 1)
      fail<ShapeError>(op, "the output size ", g.in[t], " along spatial axis ", a, " is below 1: input ", x.shape(), ", weight ",
                       w.shape(), ", stride ", stride, ", padding ", padding, ", dilation ", dilation);
  }
  return g;
}

// --- the public forms ------------------------------------------------------------------------

Tensor conv_nd(const char* op, int dims, const Tensor& x_in, const Tensor& w, const Tensor& b, const Shape& stride,
               const Shape& padding, const Shape& dilation, std::int64_t groups) {
  check_defined(x_in, op);
  const bool unbatched = x_in.ndim() == dims + 1;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const ConvGeometry g = conv_geometry(op, dims, x, w, b, stride, padding, dilation, groups);
  const bool with_bias = b.defined();
  Tensor y = conv_forward(op, g, dims, x.detach(), w.detach(), with_bias ? &b : nullptr);
  if (with_bias ? recording(x, w, b) : recording(x, w)) {
    std::vector<const Tensor*> inputs{&x, &w};
    if (with_bias) inputs.push_back(&b);
    record(op, y, inputs, [x = saved(x), w = saved(w), g, dims, with_bias, op](const Tensor& gy, const Needs& needs) {
      const Tensor dy = gy.contiguous();
      Grads grads{needs[0] ? conv_grad_input(op, g, dims, dy, w, nullptr) : Tensor(),
                  needs[1] ? conv_grad_weight(op, g, dims, x, dy, w.shape()) : Tensor()};
      if (with_bias) grads.push_back(needs[2] ? bias_grad(dy) : Tensor());
      return grads;
    }, [&] {  // the registry's order: stride, padding, dilation (one per axis each), groups
      ops::OpAttrs a;
      for (const auto* v : {g.stride, g.pad, g.dil}) a.ints.insert(a.ints.end(), v + 3 - dims, v + 3);
      a.ints.push_back(groups);
      return a;
    });
  }
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose_nd(const char* op, int dims, const Tensor& x_in, const Tensor& w, const Tensor& b, const Shape& stride,
                         const Shape& padding, const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  check_defined(x_in, op);
  const bool unbatched = x_in.ndim() == dims + 1;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const ConvGeometry g = conv_transpose_geometry(op, dims, x, w, b, stride, padding, output_padding, groups, dilation);
  const bool with_bias = b.defined();
  Tensor y = conv_grad_input(op, g, dims, x.detach(), w.detach(), with_bias ? &b : nullptr);
  if (with_bias ? recording(x, w, b) : recording(x, w)) {
    std::vector<const Tensor*> inputs{&x, &w};
    if (with_bias) inputs.push_back(&b);
    record(op, y, inputs, [x = saved(x), w = saved(w), g, dims, with_bias, op](const Tensor& gy, const Needs& needs) {
      const Tensor dy = gy.contiguous();
      Grads grads{needs[0] ? conv_forward(op, g, dims, dy, w, nullptr) : Tensor(),
                  needs[1] ? conv_grad_weight(op, g, dims, dy, x, w.shape()) : Tensor()};
      if (with_bias) grads.push_back(needs[2] ? bias_grad(dy) : Tensor());
      return grads;
    }, [&] {  // the registry's order: stride, padding, output_padding (one per axis each), groups, dilation
      ops::OpAttrs a;
      for (const auto* v : {g.stride, g.pad}) a.ints.insert(a.ints.end(), v + 3 - dims, v + 3);
      const auto extra = per_axis(op, "output_padding", output_padding, dims, 0);
      a.ints.insert(a.ints.end(), extra.begin(), extra.end());
      a.ints.push_back(groups);
      a.ints.insert(a.ints.end(), g.dil + 3 - dims, g.dil + 3);
      return a;
    });
  }
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace

double conv_multiply_adds(int dims, const Tensor& x, const Tensor& w, const Shape& stride, const Shape& padding,
                          const Shape& dilation, std::int64_t groups) {
  const ConvGeometry g = conv_geometry("conv_multiply_adds", dims, x, w, Tensor(), stride, padding, dilation, groups);
  const double per_pixel = static_cast<double>(g.batch) * static_cast<double>(g.groups) * static_cast<double>(g.cout_g) *
                           static_cast<double>(g.cin_g);
  double out_pixels = 1, taps = 1;
  for (int t = 3 - dims; t < 3; ++t) out_pixels *= static_cast<double>(g.out[t]), taps *= static_cast<double>(g.k[t]);
  const double direct = per_pixel * out_pixels * taps;
  const int r = x.device().is_cpu() ? winograd_tile(g, dims, static_cast<std::int64_t>(dtype_size(x.dtype()))) : 0;
  if (r == 0) return 3 * direct;
  // conv_winograd's tiles of C (dims 3 runs F(2x2x2) whatever the tile says for 2-D).
  const int tile = dims == 3 ? 2 : r;
  const auto winograd = [&](const std::int64_t* pixels) {
    double tiles = 1;
    for (int t = 3 - dims; t < 3; ++t) tiles *= static_cast<double>((pixels[t] + tile - 1) / tile);
    return per_pixel * tiles * static_cast<double>(winograd_points(dims, tile));
  };
  return winograd(g.out) + winograd(g.in) + direct;  // forward, grad_input, grad_weight
}

}  // namespace detail

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv1d", 1, x, w, b, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv2d", 2, x, w, b, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
              const Shape& dilation, std::int64_t groups) {
  return detail::conv_nd("kten::conv3d", 3, x, w, b, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose1d", 1, x, w, b, stride, padding, output_padding, groups, dilation);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose2d", 2, x, w, b, stride, padding, output_padding, groups, dilation);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& stride, const Shape& padding,
                        const Shape& output_padding, std::int64_t groups, const Shape& dilation) {
  return detail::conv_transpose_nd("kten::conv_transpose3d", 3, x, w, b, stride, padding, output_padding, groups, dilation);
}

}  // namespace kten

namespace kten::ops {

namespace {
// The registry's encoding of the size arguments: one value per spatial axis each, in the public
// function's order, groups where the function has it.
Shape ints_at(const OpAttrs& a, int first, int dims) {
  return Shape(a.ints.begin() + first, a.ints.begin() + first + dims);
}
Tensor conv_row(const std::vector<Tensor>& x, const OpAttrs& a, int dims) {
  Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t) = {
      conv1d, conv2d, conv3d};
  return f[dims - 1](x[0], x[1], x[2], ints_at(a, 0, dims), ints_at(a, dims, dims), ints_at(a, 2 * dims, dims), a.ints.at(3 * dims));
}
Tensor conv_transpose_row(const std::vector<Tensor>& x, const OpAttrs& a, int dims) {
  Tensor (*const f[])(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&, const Shape&, std::int64_t,
                      const Shape&) = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
  return f[dims - 1](x[0], x[1], x[2], ints_at(a, 0, dims), ints_at(a, dims, dims), ints_at(a, 2 * dims, dims),
                     a.ints.at(3 * dims), ints_at(a, 3 * dims + 1, dims));
}
}  // namespace

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

// A convolution's group count (PyTorch's groups): at least 1.
void check_group(const OnnxNode& n) {
  const std::int64_t group = node_int(n, "group", 1);
  if (group < 1) onnx_invalid(n, "attribute 'group' is " + std::to_string(group) + "; it must be at least 1");
}

void check_conv(const OnnxNode& n) {
  check_window(n, /*same_allowed=*/true);
  check_group(n);
}

std::vector<Tensor> onnx_conv(OnnxCall& c) {
  Tensor x = c.at(0);
  const Tensor& w = c.at(1);
  const int spatial = spatial_axes(c, x);
  Window win = window_of(c, x, Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()));
  const Tensor b = c.has(2) ? c.in[2] : Tensor();
  const std::int64_t groups = c.attr_int("group", 1);
  if (!win.symmetric()) {  // kten's convolutions pad both sides alike: uneven pads go first
    x = pad(x, torch_pads(win.begin, win.end));
    win.begin.assign(win.begin.size(), 0);
  }
  using Conv = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&,
                          const Shape&, std::int64_t);
  const Conv by_rank[3] = {conv1d, conv2d, conv3d};
  if (Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()) != win.kernel)
    fail<ShapeError>("onnx", c.where(), ": kernel_shape ", win.kernel, " differs from the weight's ",
                     w.shape());
  return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, win.dilation, groups)};
}

void check_conv_transpose(const OnnxNode& n) {
  check_window(n, /*same_allowed=*/false);  // SAME pads of a transposed convolution: not taken
  check_group(n);
  const auto it = n.attributes.find("output_padding");
  if (it != n.attributes.end())
    for (std::int64_t p : it->second.ints)
      if (p < 0 || p > kMaxWindow)
        onnx_invalid(
            n, "attribute 'output_padding' holds " + std::to_string(p) + "; it must lie in [0, 2^31 - 1]");
  if (n.attributes.count("output_shape")) onnx_refuse(n, "output_shape (give pads and output_padding)");
}

std::vector<Tensor> onnx_conv_transpose(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const Tensor& w = c.at(1);
  const int spatial = spatial_axes(c, x);
  const Window win = window_of(c, x, Shape(w.shape().begin() + std::min(2, w.ndim()), w.shape().end()));
  const Shape output_padding = c.attr_ints("output_padding", Shape(static_cast<std::size_t>(spatial), 0));
  const Tensor b = c.has(2) ? c.in[2] : Tensor();
  const std::int64_t groups = c.attr_int("group", 1);
  using ConvT = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&,
                           const Shape&, std::int64_t, const Shape&);
  const ConvT by_rank[3] = {conv_transpose1d, conv_transpose2d, conv_transpose3d};
  if (win.symmetric())
    return {by_rank[spatial - 1](x, w, b, win.stride, win.begin, output_padding, groups, win.dilation)};
  // Uneven pads crop the unpadded result: `begin` elements before, `end` after.
  Tensor y = by_rank[spatial - 1](x, w, b, win.stride, Shape(win.begin.size(), 0), output_padding, groups,
                                  win.dilation);
  for (int i = 0; i < spatial; ++i) {
    const std::int64_t keep = y.size(i + 2) - win.begin[i] - win.end[i];
    if (keep < 1) fail<ShapeError>("onnx", c.where(), ": pads leave no output along spatial axis ", i);
    y = y.narrow(i + 2, win.begin[i], keep);
  }
  return {y};
}


// Conv and ConvTranspose: attributes as the registry orders them (conv.cpp).
std::function<std::string(OnnxEmit&)> convolution(int dims, bool transposed) {
  return [dims, transposed](OnnxEmit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const Shape& w = e.t(1).shape();
    const std::vector<std::int64_t> stride = e.ints(0, n), pad = e.ints(n, n);
    std::vector<OnnxAttr> attrs{attr_is("kernel_shape", Shape(w.begin() + 2, w.end())),
                                attr_is("strides", stride), attr_is("pads", onnx_pads(pad, pad))};
    if (transposed) {
      attrs.push_back(attr_is("output_padding", e.ints(2 * n, n)));
      attrs.push_back(attr_i("group", e.i(3 * n)));
      attrs.push_back(attr_is("dilations", e.ints(3 * n + 1, n)));
    } else {
      attrs.push_back(attr_is("dilations", e.ints(2 * n, n)));
      attrs.push_back(attr_i("group", e.i(3 * n)));
    }
    std::vector<std::string> inputs{e.in[0], e.in[1]};
    if (e.in.size() > 2) inputs.push_back(e.in[2]);
    return e.node(transposed ? "ConvTranspose" : "Conv", inputs, attrs);
  };
}


}  // namespace

// The registry's rows of this family (registry.hpp). Attributes: conv{d}d's ints are stride,
// padding, dilation (d values each) and groups; conv_transpose{d}d's stride, padding,
// output_padding, groups, dilation; pad's ints are the pads, its reals the mode (PaddingMode's
// index) and the value.
std::vector<OpDef> conv_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real;
  const DTypes floating = DTypes::floating;
  std::vector<OpDef> rows = {
      {"conv1d", "conv1d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 1); }},
      {"conv2d", "conv2d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 2); }},
      {"conv3d", "conv3d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t)", 3, {real}, floating, true, [](X x, A a) { return conv_row(x, a, 3); }},
      {"conv_transpose1d", "conv_transpose1d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 1); }},
      {"conv_transpose2d", "conv_transpose2d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 2); }},
      {"conv_transpose3d", "conv_transpose3d(Tensor,Tensor,Tensor,Shape,Shape,Shape,int64_t,Shape)", 3, {real}, floating, true,
       [](X x, A a) { return conv_transpose_row(x, a, 3); }},
  };
  // Conv and ConvTranspose take 1 to 3 spatial axes: the 2-D rows carry them.
  set_onnx(rows, "conv1d", {}, {{"kten::conv1d", convolution(1, false)}});
  set_onnx(rows, "conv2d", {{"Conv", 13, kOnnxLastOpset, 2, 3, 1, true, onnx_conv, check_conv, 0}},
           {{"kten::conv2d", convolution(2, false)}});
  set_onnx(rows, "conv3d", {}, {{"kten::conv3d", convolution(3, false)}});
  set_onnx(rows, "conv_transpose1d", {}, {{"kten::conv_transpose1d", convolution(1, true)}});
  set_onnx(
      rows, "conv_transpose2d",
      {{"ConvTranspose", 13, kOnnxLastOpset, 2, 3, 1, true, onnx_conv_transpose, check_conv_transpose, 0}},
      {{"kten::conv_transpose2d", convolution(2, true)}});
  set_onnx(rows, "conv_transpose3d", {}, {{"kten::conv_transpose3d", convolution(3, true)}});
  return rows;
}

}  // namespace kten::ops
