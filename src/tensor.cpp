// The Tensor value type (shape, dtype, storage), reshape, and Kokkos::View interop.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include <kten/kokkos.hpp>
#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "checked.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "storage.hpp"

namespace kten {
namespace detail {


std::int64_t checked_numel(const Shape& shape, const char* op) {
  std::int64_t n = 1;
  for (auto e : shape) {
    if (e < 0)
      fail<ShapeError>(op, "negative extent in shape ", shape);
    const auto product = checked_mul(n, e);
    if (!product)
      fail<ShapeError>(op, "shape ", shape, " has more elements than fit in 64 bits");
    n = *product;
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

namespace {
// A View fits a tensor only in exactly the memory space of the tensor's device: a space that is
// merely reachable (UVM, pinned, anonymous) would let host code dereference device memory.
void check_view_space(const Device& device, const ViewRequest& r, const char* op) {
  const char* wanted = with_backend(device, [](auto backend) { return decltype(backend)::memory_space::name(); });
  if (std::strcmp(r.memory_space, wanted) != 0)
    fail(op, "a View in memory space ", r.memory_space, " does not fit a tensor on ", device,
         ", whose memory space is ", wanted, "; deep_copy between the spaces, or use the matching device");
}
}  // namespace

void* checked_view_data(const Tensor& t, const ViewRequest& r) {
  check_defined(t, "view()");
  if (r.dtype != t.dtype())
    fail<DTypeError>("view()", "the View holds ", r.dtype, " but the tensor is ", t.dtype());
  if (r.rank != t.ndim())
    fail<ShapeError>("view()", "the View has rank ", r.rank, " but the tensor has shape ", t.shape());
  check_view_space(t.device(), r, "view()");
  return t.data();
}

Tensor tensor_from_external(void* data, Shape shape, const Device& device, std::shared_ptr<void> owner,
                            const ViewRequest& r) {
  check_view_space(device, r, "from_view()");
  const std::int64_t n = checked_numel(shape, "from_view()");
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->bytes = checked_nbytes(n, r.dtype, device, "from_view()");
  storage->device = device;
  storage->owner = std::move(owner);
  return Tensor(std::move(storage), std::move(shape), r.dtype);
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

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), dtype_(dtype),
      numel_(storage_ ? detail::checked_numel(shape_, "Tensor") : 0) {}

Device Tensor::device() const {
  detail::check_defined(*this, "device()");
  return storage_->device;
}

std::int64_t Tensor::numel() const { return numel_; }

std::size_t Tensor::nbytes() const {
  return defined() ? detail::checked_nbytes(numel(), dtype_, storage_->device, "nbytes()") : 0;
}

std::int64_t Tensor::size(int axis) const {
  detail::check_defined(*this, "size()");
  return shape_[detail::normalize_axis("size()", *this, axis)];
}

void* Tensor::data() const {
  detail::check_defined(*this, "data()");
  if (storage_->pinned) detail::wait_for_pending_reader(*storage_);  // the caller may write it
  return storage_->data;
}

Tensor Tensor::reshape(Shape shape) const {
  detail::check_defined(*this, "reshape()");
  if (std::count(shape.begin(), shape.end(), -1) > 1)
    detail::fail<ShapeError>("reshape()", "at most one extent may be -1, got ", shape);
  // The product of the given extents, with -1 counting as 1: ShapeError for a negative extent or
  // a product past 64 bits.
  const auto inferred = std::find(shape.begin(), shape.end(), -1);
  Shape given = shape;
  if (inferred != shape.end()) given[inferred - shape.begin()] = 1;
  const std::int64_t known = detail::checked_numel(given, "reshape()"), n = numel();
  if (inferred != shape.end()) {
    if (known == 0 || n % known != 0)
      detail::fail<ShapeError>("reshape()", "cannot infer the -1 extent of ", shape, " for ", n, " elements (shape ",
                               shape_, ")");
    *inferred = n / known;
  } else if (known != n) {
    detail::fail<ShapeError>("reshape()", "cannot view ", n, " elements (shape ", shape_, ") as shape ", shape, " (",
                             known, " elements)");
  }
  return Tensor(storage_, std::move(shape), dtype_);
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return storage_ && storage_ == other.storage_;
}

Tensor Tensor::exp() const { return kten::exp(*this); }
Tensor Tensor::log() const { return kten::log(*this); }
Tensor Tensor::sqrt() const { return kten::sqrt(*this); }
Tensor Tensor::abs() const { return kten::abs(*this); }
Tensor Tensor::relu() const { return kten::relu(*this); }
Tensor Tensor::sigmoid() const { return kten::sigmoid(*this); }
Tensor Tensor::tanh() const { return kten::tanh(*this); }
Tensor Tensor::sum() const { return kten::sum(*this); }
Tensor Tensor::sum(int axis) const { return kten::sum(*this, axis); }
Tensor Tensor::mean() const { return kten::mean(*this); }
Tensor Tensor::mean(int axis) const { return kten::mean(*this, axis); }
Tensor Tensor::max() const { return kten::max(*this); }
Tensor Tensor::max(int axis) const { return kten::max(*this, axis); }
Tensor Tensor::norm() const { return kten::norm(*this); }
Tensor Tensor::norm(int axis) const { return kten::norm(*this, axis); }
Tensor Tensor::transpose() const { return kten::transpose(*this); }

}  // namespace kten
