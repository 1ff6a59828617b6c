// Tensor storage, creation from host values, transfers between devices, and View interop.
#include <limits>
#include <string>

#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "runtime_internal.hpp"
#include "storage.hpp"
#include "../backends/backend_info.hpp"

namespace kten {
namespace detail {


std::int64_t checked_numel(const Shape& shape, const char* op) {
  std::int64_t n = 1;
  for (auto e : shape) {
    if (e < 0)
      throw ShapeError("kten: " + op_name(op) + ": negative extent in shape " + shape_str(shape));
    if (e != 0 && n > std::numeric_limits<std::int64_t>::max() / e)
      throw ShapeError("kten: " + op_name(op) + ": shape " + shape_str(shape) +
                       " has more elements than fit in 64 bits");
    n *= e;
  }
  return n;
}

/// \brief Copies `bytes` from one storage to another, on the right execution-space instance, and
/// counts it. Host reads are fenced; host-to-device copies are queued on the device.
void copy_bytes(const Storage& src, const Storage& dst, std::size_t bytes) {
  note_transfer(src.device, dst.device, bytes);
  if (bytes == 0) return;
  with_backend(src.device, [&](auto from) {
    with_backend(dst.device, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      RawView<From, char> s(static_cast<char*>(src.data), bytes);
      RawView<To, char> d(static_cast<char*>(dst.data), bytes);
      if constexpr (From::is_host && To::is_host) {
        Kokkos::deep_copy(to.space, d, s);  // one in-order host instance: no fence needed
      } else if constexpr (From::is_host) {
        from.space.fence();  // the host producers of `src` have finished
        Kokkos::deep_copy(to.space, d, s);
      } else {
        Kokkos::deep_copy(from.space, d, s);  // ordered after the kernels that produced `src`
        if constexpr (To::is_host) from.space.fence();  // host code reads `dst` next
      }
    });
  });
}

void read_to_host(const Tensor& t, void* dst, DType expected, const char* what) {
  check_defined(t, what);
  if (t.dtype() != expected)
    throw DTypeError(std::string("kten: ") + what + " asked for " + dtype_name(expected) +
                     " values from a " + dtype_name(t.dtype()) + " tensor; use the matching type (" +
                     (t.dtype() == DType::float32 ? "float" : "double") + ") or .astype(...) first");
  const Device device = t.device();
  note_host_sync(device, what, /*implicit=*/true);
  Storage host{dst, t.nbytes(), cpu(), nullptr};
  Storage src{t.data(), t.nbytes(), device, nullptr};
  copy_bytes(src, host, t.nbytes());
  with_backend(device, [](auto backend) { backend.space.fence(); });
}

Tensor from_host(const void* values, const Shape& shape, DType dtype, const Device& device) {
  Tensor out = empty(shape, device, dtype);
  Storage host{const_cast<void*>(values), out.nbytes(), cpu(), nullptr};
  copy_bytes(host, *out.storage(), out.nbytes());
  // The host buffer may die when we return: wait for a queued host-to-device copy to read it.
  if (!host_can_read(device)) with_backend(device, [](auto backend) { backend.space.fence(); });
  return out;
}

namespace {
// Which memory a tensor on `device` needs, and whether the requested/provided View space fits.
void check_view_space(const Device& device, const ViewRequest& r, const char* op) {
  require_available(device);
  const bool host_memory = host_can_read(device);
  const bool fits = host_memory ? r.host_accessible : r.device_accessible;
  if (!fits)
    throw Error("kten: " + op_name(op) + ": a View in " + r.memory_space +
                " does not fit a tensor on " + device.str() + ", which uses " +
                (host_memory ? "host memory (HostSpace)" : "GPU memory (CudaSpace)") +
                "; deep_copy between the spaces, or use the matching device");
}
}  // namespace

void* checked_view_data(const Tensor& t, const ViewRequest& r) {
  check_defined(t, "view()");
  if (r.dtype != t.dtype())
    throw DTypeError(std::string("kten: view(): the View holds ") + dtype_name(r.dtype) +
                     " but the tensor is " + dtype_name(t.dtype()));
  if (r.rank != t.ndim())
    throw ShapeError("kten: view(): the View has rank " + std::to_string(r.rank) +
                     " but the tensor has shape " + shape_str(t.shape()));
  check_view_space(t.device(), r, "view()");
  return t.data();
}

Tensor tensor_from_external(void* data, Shape shape, const Device& device, std::shared_ptr<void> owner,
                            const ViewRequest& r) {
  check_view_space(device, r, "from_view()");
  const std::int64_t n = checked_numel(shape, "from_view()");
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->bytes = static_cast<std::size_t>(n) * dtype_size(r.dtype);
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
    : storage_(std::move(storage)), shape_(std::move(shape)), dtype_(dtype) {}

Device Tensor::device() const {
  detail::check_defined(*this, "device()");
  return storage_->device;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto e : shape_) n *= e;
  return n;
}

std::int64_t Tensor::size(int axis) const {
  return shape_[detail::normalize_axis("size()", *this, axis)];
}

void* Tensor::data() const {
  detail::check_defined(*this, "data()");
  return storage_->data;
}

Tensor Tensor::reshape(Shape shape) const {
  detail::check_defined(*this, "reshape()");
  int inferred = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) throw ShapeError("kten: reshape(): at most one extent may be -1, got " + shape_str(shape));
      inferred = static_cast<int>(i);
    } else {
      if (shape[i] < 0) throw ShapeError("kten: reshape(): negative extent in " + shape_str(shape));
      known *= shape[i];
    }
  }
  if (inferred >= 0 && known != 0 && numel() % known == 0) shape[inferred] = numel() / known;
  if (inferred >= 0 && shape[inferred] == -1)
    throw ShapeError("kten: reshape(): cannot infer the -1 extent of " + shape_str(shape) + " for " +
                     std::to_string(numel()) + " elements (shape " + shape_str(shape_) + ")");
  if (detail::checked_numel(shape, "reshape()") != numel())
    throw ShapeError("kten: reshape(): cannot view " + std::to_string(numel()) + " elements (shape " +
                     shape_str(shape_) + ") as shape " + shape_str(shape) + " (" +
                     std::to_string(detail::checked_numel(shape, "reshape()")) + " elements)");
  return Tensor(storage_, std::move(shape), dtype_);
}

Tensor Tensor::copyto(const Device& device) const {
  detail::check_defined(*this, "copyto()");
  Tensor out = empty(shape_, device, dtype_);
  detail::copy_bytes(*storage_, *out.storage_, nbytes());
  return out;
}

Tensor Tensor::to(const Device& device) const {
  detail::check_defined(*this, "to()");
  return device == storage_->device ? *this : copyto(device);
}

void Tensor::copy_from(const Tensor& src) const {
  detail::check_defined(*this, "copy_from()");
  detail::check_defined(src, "copy_from()");
  if (src.shape() != shape_ || src.dtype() != dtype_)
    throw ShapeError("kten: copy_from(): source " + shape_str(src.shape()) + " " + dtype_name(src.dtype()) +
                     " does not match destination " + shape_str(shape_) + " " + dtype_name(dtype_));
  detail::copy_bytes(*src.storage(), *storage_, nbytes());
}

Tensor Tensor::pin_memory() const {
  detail::check_defined(*this, "pin_memory()");
  if (!device().is_cpu())
    throw Error("kten: pin_memory(): only host tensors can be pinned; this one is on " + device().str());
  if (storage_->pinned) return *this;
  auto storage = std::make_shared<detail::Storage>();
  try {
    storage->owner = detail::allocate_pinned_host(nbytes(), &storage->data);
  } catch (const std::exception& e) {
    throw OutOfMemory("kten: out of pinned host memory: could not allocate " + std::to_string(nbytes()) +
                      " bytes (Kokkos: " + e.what() + ")");
  }
  if (!storage->owner) return *this;  // no GPU backend: nothing would DMA from it
  storage->bytes = nbytes();
  storage->device = cpu();
  storage->pinned = true;
  Tensor out(std::move(storage), shape_, dtype_);
  detail::copy_bytes(*storage_, *out.storage_, nbytes());
  return out;
}

bool Tensor::is_pinned() const { return storage_ && storage_->pinned; }

bool Tensor::shares_storage_with(const Tensor& other) const {
  return storage_ && storage_ == other.storage_;
}

Tensor empty(const Shape& shape, const Device& device, DType dtype) {
  const auto n = detail::checked_numel(shape, "empty()");
  return Tensor(detail::allocate(device, static_cast<std::size_t>(n) * dtype_size(dtype), "tensor"), shape,
                dtype);
}

namespace {
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, const Device& device) {
  const auto n = detail::checked_numel(shape, "tensor()");
  if (static_cast<std::int64_t>(values.size()) != n)
    throw ShapeError("kten: tensor(): " + std::to_string(values.size()) + " values do not fill shape " +
                     shape_str(shape) + " (" + std::to_string(n) + " elements)");
  return detail::from_host(values.data(), shape, dtype_of<T>(), device);
}

template <class T>
Tensor from_rows(std::initializer_list<std::initializer_list<T>> rows, const Device& device) {
  const std::size_t cols = rows.size() ? rows.begin()->size() : 0;
  std::vector<T> values;
  values.reserve(rows.size() * cols);
  std::size_t r = 0;
  for (const auto& row : rows) {
    if (row.size() != cols)
      throw ShapeError("kten: tensor(): ragged rows: row 0 has " + std::to_string(cols) + " values, row " +
                       std::to_string(r) + " has " + std::to_string(row.size()));
    values.insert(values.end(), row.begin(), row.end());
    ++r;
  }
  return from_values(values, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols)},
                     device);
}
}  // namespace

Tensor tensor(const std::vector<float>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<double>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<float>& v, const Device& d) {
  return from_values(v, {static_cast<std::int64_t>(v.size())}, d);
}
Tensor tensor(const std::vector<double>& v, const Device& d) {
  return from_values(v, {static_cast<std::int64_t>(v.size())}, d);
}
Tensor detail::tensor_from_rows(std::initializer_list<std::initializer_list<float>> rows, const Device& d) {
  return from_rows(rows, d);
}
Tensor detail::tensor_from_rows(std::initializer_list<std::initializer_list<double>> rows, const Device& d) {
  return from_rows(rows, d);
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
