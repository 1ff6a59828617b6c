// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Views share storage and never copy: reshape and view (where the strides allow), transpose, permute,
// narrow, select, unsqueeze, squeeze and expand make a new (shape, strides, offset) over the same storage. contiguous() copies a view into
// row-major memory on its own device (counted in stats().contiguous_copies); cat and stack make new
// tensors.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "core/checked.hpp"
#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "ops/elementwise.hpp"
#include "core/runtime_internal.hpp"
#include "views.hpp"

namespace kten {
namespace detail {

std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  Shape out(new_shape.size(), 1);
  if (shape.empty()) return out;  // a scalar: the new extents are all 1, any strides do
  int view_d = static_cast<int>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int tensor_d = static_cast<int>(shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    // The end of a chunk of axes that step through memory evenly: the new axes covering it get
    // strides from the chunk's innermost stride.
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

namespace {
// offset + index * stride, ShapeError rather than a wrapped offset.
std::int64_t offset_at(const char* op, std::int64_t offset, std::int64_t index, std::int64_t stride) {
  const auto step = checked_mul(index, stride);
  const auto sum = step ? checked_add(offset, *step) : std::nullopt;
  if (!sum) fail<ShapeError>(op, "the view's offset does not fit in 64 bits");
  return *sum;
}
}  // namespace

// A view's gradient reaches its base: the view is recorded like any other operation, with a
// backward function that maps the view's gradient onto the base's shape. Made only when recording.
template <class MakeBackward>
Tensor recorded_view(const char* name, const Tensor& base, Tensor view, MakeBackward make_backward, TraceAttrs attrs = {}) {
  if (recording(base)) record(name, view, {&base}, make_backward(), attrs);
  return view;
}

// The gradient of a view that picks some of the base's elements: zeros, with the view's part set.
Tensor scatter_into_zeros(const Tensor& g, const Shape& base_shape, const std::function<Tensor(const Tensor&)>& pick) {
  Tensor z = zeros(base_shape, g.device(), g.dtype());
  pick(z).copy_from(g);
  return z;
}

}  // namespace detail

namespace {
// reshape() and view(): the same elements in `shape`, a view where the strides allow it; otherwise
// a contiguous copy when `may_copy` (reshape), a ShapeError when not (view).
Tensor reshaped(const Tensor& t, Shape shape, const char* op, bool may_copy) {
  detail::check_defined(t, op);
  if (std::count(shape.begin(), shape.end(), -1) > 1)
    detail::fail<ShapeError>(op, "at most one extent may be -1, got ", shape);
  // The product of the given extents, with -1 counting as 1: ShapeError for a negative extent or
  // a product past 64 bits.
  const auto inferred = std::find(shape.begin(), shape.end(), -1);
  Shape given = shape;
  if (inferred != shape.end()) given[inferred - shape.begin()] = 1;
  const std::int64_t known = detail::checked_numel(given, op), n = t.numel();
  if (inferred != shape.end()) {
    if (known == 0 || n % known != 0)
      detail::fail<ShapeError>(op, "cannot infer the -1 extent of ", shape, " for ", n, " elements (shape ", t.shape(), ")");
    *inferred = n / known;
  } else if (known != n) {
    detail::fail<ShapeError>(op, "cannot view ", n, " elements (shape ", t.shape(), ") as shape ", shape, " (", known,
                             " elements)");
  }
  std::optional<Shape> strides;
  if (t.is_contiguous()) {
    strides = detail::contiguous_strides(shape);
  } else {
    strides = detail::view_strides(t.shape(), t.strides(), shape);
    if (!strides && may_copy) return t.contiguous().reshape(std::move(shape));  // a copy, as PyTorch
    if (!strides)
      detail::fail<ShapeError>(op, "the strides of this tensor (shape ", t.shape(), ", strides ", t.strides(),
                               ") cannot express shape ", shape, " without a copy, and a view never copies; "
                               "use reshape() (which copies here) or contiguous().view(...)");
  }
  Tensor out(t.storage(), std::move(shape), std::move(*strides), t.offset(), t.dtype());
  if (detail::recording(t))
    detail::record("kten::reshape", out, {&t}, [base = t.shape()](const Tensor& g, const detail::Needs&) {
      return detail::Grads{g.reshape(base)};
    });
  return out;
}
}  // namespace

Tensor Tensor::reshape(Shape shape) const { return reshaped(*this, std::move(shape), "reshape()", true); }

Tensor Tensor::view(Shape shape) const { return reshaped(*this, std::move(shape), "view()", false); }

Tensor Tensor::contiguous() const {
  detail::check_defined(*this, "contiguous()");
  if (is_contiguous()) return *this;
  Tensor out = empty(this->shape(), device(), dtype());
  detail::strided_copy("kten::contiguous", *this, out);
  detail::note_contiguous_copy(out.nbytes());
  return detail::recorded_view("kten::contiguous", *this, std::move(out), [] {
    return [](const Tensor& g, const detail::Needs&) { return detail::Grads{g}; };
  });
}

Tensor Tensor::transpose(int d0, int d1) const {
  constexpr const char* op = "transpose()";
  detail::check_defined(*this, op);
  const int a = detail::normalize_axis(op, *this, d0), b = detail::normalize_axis(op, *this, d1);
  Shape shape = this->shape(), strides = this->strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return detail::recorded_view("kten::transpose", *this, Tensor(storage(), std::move(shape), std::move(strides), offset(), dtype()), [a, b] {
    return [a, b](const Tensor& g, const detail::Needs&) { return detail::Grads{g.transpose(a, b)}; };
  }, [a, b] { return ops::OpAttrs::of_ints({a, b}); });
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
  constexpr const char* op = "permute()";
  detail::check_defined(*this, op);
  if (static_cast<int>(dims.size()) != ndim())
    detail::fail<ShapeError>(op, "got ", dims.size(), " axes for a tensor of shape ", this->shape(), " (ndim ", ndim(),
                             "); name every axis once");
  std::vector<bool> seen(dims.size(), false);
  Shape shape(dims.size()), strides(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int a = detail::normalize_axis(op, *this, dims[i]);
    if (seen[a])
      detail::fail<ShapeError>(op, "axis ", dims[i], " appears twice for a tensor of shape ", this->shape(),
                               "; name every axis once");
    seen[a] = true;
    shape[i] = this->shape()[a];
    strides[i] = this->strides()[a];
  }
  return detail::recorded_view("kten::permute", *this, Tensor(storage(), std::move(shape), std::move(strides), offset(), dtype()), [&] {
    std::vector<int> inverse(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) inverse[detail::normalize_axis(op, *this, dims[i])] = static_cast<int>(i);
    return [inverse](const Tensor& g, const detail::Needs&) { return detail::Grads{g.permute(inverse)}; };
  }, [&] {
    std::vector<std::int64_t> axes;
    for (int a : dims) axes.push_back(detail::normalize_axis(op, *this, a));
    return ops::OpAttrs::of_ints(std::move(axes));
  });
}

Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
  constexpr const char* op = "narrow()";
  detail::check_defined(*this, op);
  const int d = detail::normalize_axis(op, *this, dim);
  const std::int64_t n = this->shape()[d], s = start < 0 ? start + n : start;
  if (s < 0 || s > n || length < 0 || length > n - s)
    detail::fail<ShapeError>(op, "start ", start, " and length ", length, " do not fit axis ", dim, " of extent ", n,
                             " (shape ", this->shape(), "); need -", n, " <= start <= ", n, ", length >= 0 and start + length <= ",
                             n);
  Shape shape = this->shape();
  shape[d] = length;
  return detail::recorded_view("kten::narrow", *this, Tensor(storage(), std::move(shape), this->strides(), detail::offset_at(op, offset(), s, this->strides()[d]), dtype()), [&] {
    return [base = this->shape(), d, s, length](const Tensor& g, const detail::Needs&) {
      return detail::Grads{detail::scatter_into_zeros(g, base, [&](const Tensor& z) { return z.narrow(d, s, length); })};
    };
  }, [=] { return ops::OpAttrs::of_ints({d, s, length}); });
}

Tensor Tensor::select(int dim, std::int64_t index) const {
  constexpr const char* op = "select()";
  detail::check_defined(*this, op);
  const int d = detail::normalize_axis(op, *this, dim);
  const std::int64_t n = this->shape()[d], i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    detail::fail<ShapeError>(op, "index ", index, " is out of range for axis ", dim, " of extent ", n, " (shape ",
                             this->shape(), "); need -", n, " <= index < ", n);
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return detail::recorded_view("kten::select", *this, Tensor(storage(), std::move(shape), std::move(strides), detail::offset_at(op, offset(), i, this->strides()[d]), dtype()), [&] {
    return [base = this->shape(), d, i](const Tensor& g, const detail::Needs&) {
      return detail::Grads{detail::scatter_into_zeros(g, base, [&](const Tensor& z) { return z.select(d, i); })};
    };
  }, [=] { return ops::OpAttrs::of_ints({d, i}); });
}

Tensor Tensor::unsqueeze(int dim) const {
  constexpr const char* op = "unsqueeze()";
  detail::check_defined(*this, op);
  const int a = dim < 0 ? dim + ndim() + 1 : dim;
  if (a < 0 || a > ndim())
    detail::fail<ShapeError>(op, "axis ", dim, " is out of range for a tensor of shape ", this->shape(), "; the new axis goes at -",
                             ndim() + 1, " .. ", ndim());
  // The stride a row-major layout would give the new axis (any works: its extent is 1).
  const std::int64_t stride = a < ndim() ? detail::offset_at(op, 0, this->shape()[a], this->strides()[a]) : 1;
  Shape shape = this->shape(), strides = this->strides();
  shape.insert(shape.begin() + a, 1);
  strides.insert(strides.begin() + a, stride);
  return detail::recorded_view("kten::unsqueeze", *this, Tensor(storage(), std::move(shape), std::move(strides), offset(), dtype()), [a] {
    return [a](const Tensor& g, const detail::Needs&) { return detail::Grads{g.squeeze(a)}; };
  }, [a] { return ops::OpAttrs::of_ints({a}); });
}

Tensor Tensor::squeeze(int dim) const {
  constexpr const char* op = "squeeze()";
  detail::check_defined(*this, op);
  const int d = detail::normalize_axis(op, *this, dim);
  if (this->shape()[d] != 1) return *this;  // as PyTorch: squeezing an axis of another extent changes nothing
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return detail::recorded_view("kten::squeeze", *this, Tensor(storage(), std::move(shape), std::move(strides), offset(), dtype()), [&] {
    return [base = this->shape()](const Tensor& g, const detail::Needs&) { return detail::Grads{g.reshape(base)}; };
  }, [d] { return ops::OpAttrs::of_ints({d}); });
}

Tensor Tensor::squeeze() const {
  detail::check_defined(*this, "squeeze()");
  Shape shape, strides;
  for (int d = 0; d < ndim(); ++d)
    if (this->shape()[d] != 1) {
      shape.push_back(this->shape()[d]);
      strides.push_back(this->strides()[d]);
    }
  return detail::recorded_view("kten::squeeze", *this, Tensor(storage(), std::move(shape), std::move(strides), offset(), dtype()), [&] {
    return [base = this->shape()](const Tensor& g, const detail::Needs&) { return detail::Grads{g.reshape(base)}; };
  }, [&] {  // the axes of extent 1 it drops
    std::vector<std::int64_t> axes;
    for (int d = 0; d < ndim(); ++d)
      if (this->shape()[d] == 1) axes.push_back(d);
    return ops::OpAttrs::of_ints(std::move(axes));
  });
}

Tensor Tensor::expand(const Shape& shape) const {
  constexpr const char* op = "expand()";
  detail::check_defined(*this, op);
  const int rank = static_cast<int>(shape.size()), lead = rank - ndim();
  if (lead < 0)
    detail::fail<ShapeError>(op, "cannot expand shape ", this->shape(), " to ", shape,
                             ", which has fewer axes; the target keeps every axis and may add leading ones");
  Shape extents(shape.size()), strides(shape.size());
  for (int d = 0; d < rank; ++d) {
    const std::int64_t want = shape[d];
    if (d < lead) {
      if (want < 0)
        detail::fail<ShapeError>(op, "extent ", want, " for the new leading axis ", d, " of ", shape,
                                 "; a new axis needs an extent >= 0 (-1 only keeps an existing extent)");
      extents[d] = want;
      strides[d] = 0;
      continue;
    }
    const std::int64_t have = this->shape()[d - lead];
    if (want == -1 || want == have) {
      extents[d] = have;
      strides[d] = this->strides()[d - lead];
    } else if (have == 1 && want >= 0) {
      extents[d] = want;
      strides[d] = 0;
    } else {
      detail::fail<ShapeError>(op, "cannot expand shape ", this->shape(), " to ", shape, ": axis ", d, " has extent ", have,
                               " and only extents of 1 expand; give ", have, " or -1 there");
    }
  }
  return detail::recorded_view("kten::expand", *this, Tensor(storage(), std::move(extents), std::move(strides), offset(), dtype()), [&] {
    return [base = this->shape()](const Tensor& g, const detail::Needs&) { return detail::Grads{detail::sum_to(g, base)}; };
  });
}

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  constexpr const char* op = "kten::cat";
  if (tensors.empty()) detail::fail<ShapeError>(op, "needs at least one tensor");
  const Tensor& first = tensors[0];
  detail::check_defined(first, op);
  const int d = detail::normalize_axis(op, first, dim);
  Shape shape = first.shape();
  shape[d] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_compatible(op, first, t);
    bool fits = t.ndim() == first.ndim();
    for (int a = 0; fits && a < t.ndim(); ++a) fits = a == d || t.shape()[a] == first.shape()[a];
    if (!fits)
      detail::fail<ShapeError>(op, "tensor ", i, " has shape ", t.shape(), " but tensor 0 has shape ", first.shape(),
                               "; shapes must match except along axis ", dim);
    const auto extent = detail::checked_add(shape[d], t.shape()[d]);
    if (!extent) detail::fail<ShapeError>(op, "the joined extent does not fit in 64 bits");
    shape[d] = *extent;
  }
  Tensor out = empty(shape, first.device(), first.dtype());
  std::vector<std::int64_t> starts;
  starts.reserve(tensors.size());
  std::int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (t.numel() > 0) detail::strided_copy(op, t, out.narrow(d, at, t.shape()[d]));
    starts.push_back(at);
    at += t.shape()[d];
  }
  if (detail::recording_any(tensors)) {
    std::vector<const Tensor*> inputs;
    for (const Tensor& t : tensors) inputs.push_back(&t);
    detail::record(op, out, inputs, [starts, d](const Tensor& g, const detail::Needs& needs) {
      detail::Grads grads(needs.size());
      for (std::size_t i = 0; i < needs.size(); ++i) {
        const std::int64_t end = i + 1 < starts.size() ? starts[i + 1] : g.shape()[d];
        if (needs[i]) grads[i] = g.narrow(d, starts[i], end - starts[i]);
      }
      return grads;
    }, [d] { return ops::OpAttrs::of_ints({d}); });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  constexpr const char* op = "kten::stack";
  if (tensors.empty()) detail::fail<ShapeError>(op, "needs at least one tensor");
  const Tensor& first = tensors[0];
  detail::check_defined(first, op);
  const int rank = first.ndim() + 1, a = dim < 0 ? dim + rank : dim;
  if (a < 0 || a >= rank)
    detail::fail<ShapeError>(op, "axis ", dim, " is out of range for stacking tensors of shape ", first.shape(),
                             " (the result has ", rank, " axes)");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_compatible(op, first, t);
    if (t.shape() != first.shape())
      detail::fail<ShapeError>(op, "tensor ", i, " has shape ", t.shape(), " but tensor 0 has shape ", first.shape(),
                               "; stack needs equal shapes (cat joins along an existing axis)");
    parts.push_back(t.unsqueeze(a));
  }
  return cat(parts, a);
}

}  // namespace kten
