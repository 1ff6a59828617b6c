// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Transfers: every copy between devices goes through copy_bytes (Kokkos::deep_copy on the right
// execution-space instance), is counted, and fences only where the host reads the result next.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <kten/runtime.hpp>
#include <kten/tensor.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/index_errors.hpp"
#include "ops/elementwise.hpp"
#include "core/runtime_internal.hpp"
#include "core/storage.hpp"
#include "transfer.hpp"

namespace kten {
namespace detail {

void copy_bytes(const Storage& src, const Storage& dst, std::size_t bytes) { copy_bytes(src, 0, dst, 0, bytes); }

void copy_bytes(const Storage& src, std::size_t src_offset, const Storage& dst, std::size_t dst_offset,
                std::size_t bytes) {
  note_transfer(src.device, dst.device, bytes);
  if (bytes == 0) return;
  if (dst.pinned) wait_for_pending_reader(dst);
  Region region("kten::copy");
  with_backend(src.device, [&](auto from) {
    with_backend(dst.device, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      RawView<From, char> s(static_cast<char*>(src.data) + src_offset, bytes);
      RawView<To, char> d(static_cast<char*>(dst.data) + dst_offset, bytes);
      KernelAccess<From> reading;  // emulated-GPU memory is open during the copy only
      KernelAccess<To> writing;
      if constexpr (From::is_host && To::is_host) {
        Kokkos::deep_copy(to.space, d, s);  // one in-order host instance: no fence needed
      } else if constexpr (From::is_host) {
        // The host producers of `src` have finished (free on synchronous host backends). A copy
        // from pageable memory is staged by the runtime before deep_copy returns; one from pinned
        // memory is a DMA that may still read `src` later, so the host waits for it before
        // writing or freeing the buffer.
        from.space.fence();
        Kokkos::deep_copy(to.space, d, s);
        if (src.pinned) src.pending_reader = dst.device.index();
      } else {
        Kokkos::deep_copy(from.space, d, s);      // ordered after the kernels that produced `src`
        if constexpr (To::is_host) fence(src.device);  // host code reads `dst` next
      }
    });
  });
  // A synchronisation: index checks that kernels queued before it reported are thrown now.
  if (!src.device.is_cpu() && dst.device.is_cpu()) report_index_errors(src.device);
}

void read_to_host(const Tensor& t, void* dst, DType expected, const char* what) {
  check_defined(t, what);
  if (t.dtype() != expected)
    fail<DTypeError>("", what, " asked for ", expected, " values from a ", t.dtype(),
                     " tensor; use the matching type (", element_type_name(t.dtype()), ") or .astype(...) first");
  const Tensor c = t.contiguous();  // a view is gathered on its device first (counted)
  note_host_sync(t.device(), what, /*implicit=*/true);
  Storage host{dst, t.nbytes(), cpu(), nullptr};
  copy_bytes(*c.storage(), byte_offset(c), host, 0, t.nbytes());
}

void read_cpu_values(const Tensor& t, void* dst, DType expected, std::size_t count) {
  if (!t.device().is_cpu() || t.dtype() != expected)
    fail("", "read_cpu_values needs a ", expected, " tensor on cpu(), got a ", t.dtype(), " one on ", t.device());
  if (static_cast<std::size_t>(t.numel()) != count)
    fail<ShapeError>("", "read_cpu_values has room for ", count, " values, got a tensor of shape ", t.shape());
  const Tensor c = t.contiguous();
  Storage host{dst, t.nbytes(), cpu(), nullptr};
  copy_bytes(*c.storage(), byte_offset(c), host, 0, t.nbytes());
}

// item<T>() converts as libtorch's item<T>() (and Python's float(t), int(t), bool(t)) do: any dtype
// to any T; floats to int64 truncate toward zero; to bool is != 0 (NaN is true). A value T cannot
// hold (NaN, an infinity or one past 2^63 to int64; a finite float64 past float32's range) is a
// DTypeError, as libtorch's "cannot be converted without overflow".
void read_item(const Tensor& t, void* dst, DType wanted) {
  if (t.defined() && t.numel() != 1)  // an undefined tensor gets read_to_host's "undefined" error
    fail<ShapeError>("", "item() needs a tensor with exactly one element, got shape ", t.shape());
  const DType from = t.defined() ? t.dtype() : wanted;
  alignas(8) unsigned char raw[8] = {};
  read_to_host(t, raw, from, "item()");
  if (from == wanted) return static_cast<void>(std::memcpy(dst, raw, dtype_size(from)));
  double real = 0;           // the value, for a float or boolean source
  std::int64_t integer = 0;  // the value, exactly, for an int64 or boolean source
  switch (from) {
    case DType::float32: { float v; std::memcpy(&v, raw, sizeof v); real = v; break; }
    case DType::float64: std::memcpy(&real, raw, sizeof real); break;
    case DType::int64: std::memcpy(&integer, raw, sizeof integer); real = static_cast<double>(integer); break;
    case DType::boolean: { bool v; std::memcpy(&v, raw, sizeof v); integer = v; real = v; break; }
  }
  const bool exact_integer = from == DType::int64 || from == DType::boolean;
  const auto cannot_hold = [&] {
    fail<DTypeError>("", "item() cannot give the ", from, " value ", real, " as ", element_type_name(wanted),
                     ": it is out of that type's range");
  };
  switch (wanted) {
    case DType::float32: {
      if (std::isfinite(real) && std::fabs(real) > std::numeric_limits<float>::max()) cannot_hold();
      const float v = exact_integer ? static_cast<float>(integer) : static_cast<float>(real);
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case DType::float64: std::memcpy(dst, &real, sizeof real); break;
    case DType::int64: {
      if (!exact_integer) {
        if (!(real >= -9223372036854775808.0 && real < 9223372036854775808.0)) cannot_hold();  // NaN too
        integer = static_cast<std::int64_t>(real);
      }
      std::memcpy(dst, &integer, sizeof integer);
      break;
    }
    case DType::boolean: {
      const bool v = exact_integer ? integer != 0 : real != 0;  // NaN != 0
      std::memcpy(dst, &v, sizeof v);
      break;
    }
  }
}

Tensor from_host(const void* values, const Shape& shape, DType dtype, const Device& device) {
  Tensor out = empty(shape, device, dtype);
  Storage host{const_cast<void*>(values), out.nbytes(), cpu(), nullptr};
  copy_bytes(host, *out.storage(), out.nbytes());  // pageable source: staged, no fence needed
  return out;
}

}  // namespace detail

Tensor Tensor::copyto(const Device& device) const {
  detail::check_defined(*this, "copyto()");
  const Tensor c = contiguous();  // a view is gathered on its device first (counted), then moved
  Tensor out = empty(shape(), device, dtype());
  detail::copy_bytes(*c.storage(), detail::byte_offset(c), *out.storage(), 0, nbytes());
  if (detail::recording(*this))  // the gradient goes back to this tensor's device: an explicit, counted copy
    detail::record("kten::copyto", out, {this}, [from = storage()->device](const Tensor& g, const detail::Needs&) {
      return detail::Grads{g.to(from)};
    });
  return out;
}

Tensor Tensor::to(const Device& device) const {
  detail::check_defined(*this, "to()");
  return device == storage()->device ? *this : copyto(device);
}

void Tensor::copy_from(const Tensor& src) const {
  detail::check_defined(*this, "copy_from()");
  detail::check_defined(src, "copy_from()");
  // Copying into a leaf (a parameter, updated in place like an optimiser does) is allowed; a copy
  // that autograd would have to go back through is refused rather than silently cut from the graph.
  if (detail::grad_mode_enabled && (src.requires_grad() || !is_leaf()))
    detail::fail("copy_from()", "an in-place copy from a tensor that requires grad, or into one computed by recorded "
                 "operations, is not recorded by autograd; build a new tensor (cat, stack, where, arithmetic), or copy "
                 "src.detach() or under a NoGradGuard");
  if (src.shape() != shape() || src.dtype() != dtype())
    detail::fail<ShapeError>("copy_from()", "source ", src.shape(), " ", src.dtype(), " does not match destination ",
                             shape(), " ", dtype());
  for (int d = 0; d < ndim(); ++d)
    if (strides()[d] == 0 && shape()[d] > 1)
      detail::fail<ShapeError>("copy_from()", "the destination (shape ", shape(), ", strides ", strides(),
                               ") is expanded along axis ", d,
                               ", so its elements overlap; copy into the tensor it was expanded from, or into a "
                               ".contiguous() copy");
  if (is_contiguous()) {  // one copy of bytes, counted as a transfer when the devices differ
    const Tensor c = src.contiguous();
    detail::copy_bytes(*c.storage(), detail::byte_offset(c), *storage(), detail::byte_offset(*this), nbytes());
    return;
  }
  // A strided destination (a narrow, a select, a transpose): the source comes to this device
  // first when it lives elsewhere (a counted transfer), then one kernel scatters it through the
  // destination's strides.
  const Tensor local = src.device() == device() ? src : src.copyto(device());
  detail::strided_copy("kten::copy_from", local, *this);
}

void Tensor::set_data(const Tensor& new_data) const {
  constexpr const char* op = "set_data()";
  detail::check_defined(*this, op);
  detail::check_defined(new_data, op);
  if (impl_ == new_data.impl_) return;
  detail::TensorImpl& self = *impl_;
  const detail::TensorImpl& from = *new_data.impl_;
  if (self.autograd && !is_floating(from.dtype))
    detail::fail<DTypeError>(op, "this tensor requires grad, and only float32 and float64 tensors do, but the new data "
                             "is ", from.dtype, "; call requires_grad_(false) first, or convert with .astype(...)");
  // Everything that can throw (the gradient's move, the copies of the extents) before anything changes.
  Shape shape = from.shape, strides = from.strides;
  Tensor grad = self.autograd ? self.autograd->grad : Tensor();
  if (grad.defined() && grad.shape() == from.shape) {
    if (grad.device() != from.device || grad.dtype() != from.dtype)
      grad.set_data(grad.detach().to(from.device).astype(from.dtype));
  } else if (grad.defined()) {
    self.autograd->grad = Tensor();  // a gradient of another shape fits no more (PyTorch would refuse it)
  }
  self.storage = from.storage;
  self.device = from.device;
  self.shape = std::move(shape);
  self.strides = std::move(strides);
  self.offset = from.offset;
  self.dtype = from.dtype;
  self.numel = from.numel;
  self.contiguous = from.contiguous;
}

Tensor Tensor::pin_memory() const {
  detail::check_defined(*this, "pin_memory()");
  if (!device().is_cpu())
    detail::fail("pin_memory()", "only host tensors can be pinned; this one is on ", device());
  if (storage()->pinned && is_contiguous()) return *this;
  auto storage = detail::allocate_pinned(nbytes());
  if (!storage) return *this;  // no GPU backend and no emulated GPUs: nothing would DMA from it
  const Tensor c = contiguous();
  Tensor out(std::move(storage), shape(), dtype());
  detail::copy_bytes(*c.storage(), detail::byte_offset(c), *out.storage(), 0, nbytes());
  return out;
}

bool Tensor::is_pinned() const { return storage() && storage()->pinned; }

void synchronize(const Device& device) {
  detail::note_host_sync(device, "synchronize()", /*implicit=*/false);
  detail::fence(device);
  detail::report_index_errors(device);
}

}  // namespace kten
