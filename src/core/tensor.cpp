// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The Tensor handle (storage + offset + shape + strides, dtype): construction, sizes, data() and
// Kokkos::View interop. What launches kernels or records on the tape (views, transfers, set_data,
// factories) is in src/ops/ (views.cpp, transfer.cpp, factories.cpp).
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include <kten/kokkos.hpp>
#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "checked.hpp"
#include "pool.hpp"
#include "checks.hpp"
#include "backends.hpp"
#include "storage.hpp"
#include "backend_glue.hpp"
#include "emulated_memory.hpp"

namespace kten {
namespace detail {


std::int64_t checked_numel(const Shape& shape, const char* op) {
  std::int64_t n = 1, span = 1;  // span: the product with 0 taken as 1, the largest contiguous stride
  for (auto e : shape) {
    if (e < 0)
      fail<ShapeError>(op, "negative extent in shape ", shape);
    const auto product = checked_mul(n, e), spanned = checked_mul(span, e == 0 ? 1 : e);
    if (!product || !spanned)
      fail<ShapeError>(op, "shape ", shape, !product ? " has more elements than fit in 64 bits"
                                                     : " has strides past 64 bits (its extents other than 0 multiply past them)");
    n = *product;
    span = *spanned;
  }
  return n;
}

std::size_t checked_nbytes(std::int64_t numel, DType dtype, const Device& device, const char* op) {
  const auto bytes = checked_mul(static_cast<std::size_t>(numel), dtype_size(dtype));
  if (!bytes)
    fail<OutOfMemory>("", "out of memory on ", device, ": ", op, " needs ", numel, " ", dtype, " elements of ",
                      dtype_size(dtype), " bytes (",
                      human_bytes(static_cast<double>(numel) * static_cast<double>(dtype_size(dtype))),
                      "), more than a 64-bit byte count can hold");
  return *bytes;
}

void undefined_tensor(const char* op) { fail(op, "the tensor is undefined (default-constructed)"); }

const Shape& no_shape() {
  static const Shape none;
  return none;
}

const std::shared_ptr<Storage>& no_storage() {
  static const std::shared_ptr<Storage> none;
  return none;
}

namespace {
// A View fits a tensor only in exactly the memory space of the tensor's device: a space that is
// merely reachable (UVM, pinned, anonymous) would let host code dereference device memory.
void check_view_space(const Device& device, const ViewRequest& r, const char* op) {
  const char* wanted = with_backend(device, [](auto backend) { return decltype(backend)::memory_space::name(); });
  if (std::strcmp(r.memory_space, wanted) != 0)
    fail(op, "a View in memory space ", r.memory_space, " does not fit a tensor on ", device,
         ", whose memory space is ", wanted, "; deep_copy between the spaces, or use the matching device");
}

// The memory itself, where the runtime can tell (an unmanaged View, or a C or Fortran array, has
// the right space in its type whatever its pointer): device memory wrapped on cpu(), or host
// memory on a GPU, would be read from the wrong side by the first kernel. Emulated GPUs may wrap
// host memory (kokkos.hpp's device_of); only their trapped arena is known to be theirs.
void check_memory_home(const void* data, const Device& device) {
  const MemoryHome home = in_emulated_memory(data) ? MemoryHome::gpu : gpu_memory_home(data);
  if (home == MemoryHome::unknown || (home == MemoryHome::gpu) == device.is_gpu()) return;
  fail<DeviceMismatch>("from_view()", "the memory at ", data, " is ", home == MemoryHome::gpu ? "GPU" : "host",
                       " memory, so it cannot be wrapped as a tensor on ", device,
                       "; wrap it on the device that holds it and copy with .to(), or pass memory of ", device);
}
}  // namespace

std::size_t byte_offset(const Tensor& t) { return static_cast<std::size_t>(t.offset()) * dtype_size(t.dtype()); }

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d] == 0 ? 1 : shape[d];  // checked_numel checked this product for every shape made
  }
  return strides;
}

namespace {
bool strides_are_contiguous(const Shape& shape, const Shape& strides, std::int64_t numel) {
  if (numel == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}
}  // namespace

void* checked_view_data(const Tensor& t, const ViewRequest& r) {
  check_defined(t, "view()");
  if (!r.strided && !t.is_contiguous())
    fail("view()", "the tensor is a strided view (shape ", t.shape(), ", strides ", t.strides(),
         "), which a LayoutRight View cannot describe; ask for view<DataType, Kokkos::LayoutStride>() or call "
         ".contiguous() first");
  if (r.dtype != t.dtype())
    fail<DTypeError>("view()", "the View holds ", r.dtype, " but the tensor is ", t.dtype());
  if (r.rank != t.ndim())
    fail<ShapeError>("view()", "the View has rank ", r.rank, " but the tensor has shape ", t.shape());
  check_view_space(t.device(), r, "view()");
  return t.data();
}

void device_of_space(const char* memory_space) {
  fail("device_of", "a View in Kokkos' ", memory_space, " memory space is on no kten device: kten's devices hold "
       "HostSpace (cpu()) and the GPU backend's device memory (gpu(0)); deep_copy the View into one of those first");
}

Tensor tensor_from_external(void* data, Shape shape, Shape strides, std::size_t span, const Device& device,
                            std::shared_ptr<void> owner, const ViewRequest& r) {
  check_view_space(device, r, "from_view()");
  const std::int64_t n = checked_numel(shape, "from_view()");
  if (n > 0) check_memory_home(data, device);
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->bytes = checked_nbytes(n == 0 ? 0 : static_cast<std::int64_t>(span), r.dtype, device, "from_view()");
  storage->device = device;
  storage->owner = std::move(owner);
  storage->external = true;
  return Tensor(std::move(storage), std::move(shape), std::move(strides), 0, r.dtype);
}

}  // namespace detail

std::string shape_str(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  // Piece by piece: `"x" + std::string&&` trips GCC 12's false -Wrestrict in C++20 (Kokkos 4.7+).
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

namespace {
// The impl of a tensor over `storage` (null: an undefined tensor); `strides` null for contiguous ones.
std::shared_ptr<detail::TensorImpl> new_impl(std::shared_ptr<detail::Storage> storage, Shape shape, Shape* strides,
                                             std::int64_t offset, DType dtype) {
  if (!storage) return nullptr;
  auto impl = detail::make_pooled<detail::TensorImpl>();
  impl->numel = detail::checked_numel(shape, "Tensor");
  if (strides) {
    impl->contiguous = detail::strides_are_contiguous(shape, *strides, impl->numel);
    impl->strides = std::move(*strides);
  } else {
    impl->strides = detail::contiguous_strides(shape);
  }
  impl->shape = std::move(shape);
  impl->offset = offset;
  impl->device = storage->device;
  impl->storage = std::move(storage);
  impl->dtype = dtype;
  return impl;
}
}  // namespace

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, DType dtype)
    : impl_(new_impl(std::move(storage), std::move(shape), nullptr, 0, dtype)) {}

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, Shape strides, std::int64_t offset, DType dtype)
    : impl_(new_impl(std::move(storage), std::move(shape), &strides, offset, dtype)) {}

std::size_t Tensor::nbytes() const {
  return defined() ? detail::checked_nbytes(numel(), dtype(), storage()->device, "nbytes()") : 0;
}

std::int64_t Tensor::size(int axis) const {
  detail::check_defined(*this, "size()");
  return shape()[detail::normalize_axis("size()", *this, axis)];
}

void* Tensor::data() const {
  detail::check_defined(*this, "data()");
  if (storage()->pinned) detail::wait_for_pending_reader(*storage());  // the caller may write it
  return static_cast<char*>(storage()->data) + detail::byte_offset(*this);
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return storage() && storage() == other.storage();
}

Tensor Tensor::exp() const { return kten::exp(*this); }
Tensor Tensor::log() const { return kten::log(*this); }
Tensor Tensor::sqrt() const { return kten::sqrt(*this); }
Tensor Tensor::abs() const { return kten::abs(*this); }
Tensor Tensor::relu() const { return kten::relu(*this); }
Tensor Tensor::sigmoid() const { return kten::sigmoid(*this); }
Tensor Tensor::tanh() const { return kten::tanh(*this); }
Tensor Tensor::pow(double exponent) const { return kten::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return kten::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return kten::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return kten::minimum(*this, other); }
Tensor Tensor::clamp(double lo, double hi) const { return kten::clamp(*this, lo, hi); }
Tensor Tensor::sin() const { return kten::sin(*this); }
Tensor Tensor::cos() const { return kten::cos(*this); }
Tensor Tensor::log1p() const { return kten::log1p(*this); }
Tensor Tensor::expm1() const { return kten::expm1(*this); }
Tensor Tensor::erf() const { return kten::erf(*this); }
Tensor Tensor::sum() const { return kten::sum(*this); }
Tensor Tensor::sum(int axis) const { return kten::sum(*this, axis); }
Tensor Tensor::mean() const { return kten::mean(*this); }
Tensor Tensor::mean(int axis) const { return kten::mean(*this, axis); }
Tensor Tensor::max() const { return kten::max(*this); }
Tensor Tensor::max(int axis) const { return kten::max(*this, axis); }
Tensor Tensor::min() const { return kten::min(*this); }
Tensor Tensor::min(int axis) const { return kten::min(*this, axis); }
Tensor Tensor::norm() const { return kten::norm(*this); }
Tensor Tensor::norm(int axis) const { return kten::norm(*this, axis); }
Tensor Tensor::var() const { return kten::var(*this); }
Tensor Tensor::var(int axis) const { return kten::var(*this, axis); }
Tensor Tensor::transpose() const { return kten::transpose(*this); }

}  // namespace kten
