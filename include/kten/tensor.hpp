// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file tensor.hpp
/// \brief kten::Tensor: a view of an allocation in one device's memory (storage + offset + shape +
/// strides), with dtype and device; view operations, creation functions and transfers. Needs no Kokkos header: Kokkos::View interop (view<>(),
/// from_view) is in <kten/kokkos.hpp>.

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/errors.hpp>

namespace kten {

/// \brief Extents of a tensor, outermost first; also its strides (in elements).
using Shape = std::vector<std::int64_t>;

/// \brief "2x3" for {2, 3}, "scalar" for {}.
std::string shape_str(const Shape& shape);

class Tensor;

namespace detail {
struct Storage;
struct AutogradMeta;
struct AutogradAccess;
void read_to_host(const Tensor& t, void* dst, DType expected, const char* what);
/// \brief read_to_host of a one-element tensor's value; ShapeError for any other.
void read_item(const Tensor& t, void* dst, DType expected);

/// \brief What a Tensor handle points at (at::TensorImpl's role): one allocation holding the
/// storage, the view's geometry, the dtype and the autograd slot. Copies of a handle share it, so
/// each sees what set_data() and requires_grad_() do through another; a view, detach() and every
/// operation make a new one.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Device device;            // storage's, kept here: every operation asks, and this saves a hop
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;  // in elements, from storage->data
  DType dtype = DType::float32;
  std::int64_t numel = 0;   // the product of shape, checked once: numel() is on every kernel's path
  bool contiguous = true;   // computed once, like numel: every kernel entry asks
  // Null unless the tensor requires grad: a leaf's gradient, or the recorded operation that
  // computed it. Nothing else is paid for autograd by tensors that do not require it.
  std::shared_ptr<AutogradMeta> autograd;
};

/// \brief Throws kten::Error: `op` was called on an undefined tensor.
[[noreturn]] void undefined_tensor(const char* op);
/// \brief The shape (and strides) of an undefined tensor: empty.
const Shape& no_shape();
/// \brief The storage of an undefined tensor: null.
const std::shared_ptr<Storage>& no_storage();
}  // namespace detail

/// \brief An array of float32, float64, int64 or boolean elements living on one Device: storage +
/// offset + shape + strides.
///
/// A Tensor is a handle (like torch::Tensor): copying one is cheap, and the copies share one
/// implementation (storage, shape, strides, dtype, autograd state), so set_data() or
/// requires_grad_() through one handle is seen through every copy. View operations (transpose,
/// permute, narrow, select, unsqueeze, squeeze, expand, reshape when the strides allow it) share
/// the storage and never copy; every operation accepts such strided tensors and returns
/// contiguous (row-major) ones. Operations run on the
/// tensor's device, enqueue without fencing, and return tensors on that device. Nothing is
/// copied between devices implicitly: use to(), copyto() or as_in_context().
class Tensor {
 public:
  /// \brief An undefined tensor (no storage); most calls on it throw kten::Error.
  Tensor() = default;

  /// \brief False for a default-constructed tensor.
  bool defined() const { return static_cast<bool>(impl_); }
  /// \brief The device whose memory holds the data.
  Device device() const {
    if (!impl_) detail::undefined_tensor("device()");
    return impl_->device;
  }
  /// \brief Extents, outermost first.
  const Shape& shape() const { return impl_ ? impl_->shape : detail::no_shape(); }
  /// \brief Number of dimensions (0 for a scalar).
  int ndim() const { return static_cast<int>(shape().size()); }
  /// \brief Extent of one axis (negative counts from the end).
  std::int64_t size(int axis) const;
  /// \brief Number of elements (0 for an undefined tensor).
  std::int64_t numel() const { return impl_ ? impl_->numel : 0; }
  /// \brief Element type (float32 for an undefined tensor).
  DType dtype() const { return impl_ ? impl_->dtype : DType::float32; }
  /// \brief Bytes of element data (0 for an undefined tensor).
  std::size_t nbytes() const;

  /// \brief Strides in elements, one per axis (row-major for a contiguous tensor; 0 along an
  /// expanded axis).
  const Shape& strides() const { return impl_ ? impl_->strides : detail::no_shape(); }
  /// \brief Offset of the first element from the start of the storage, in elements.
  std::int64_t offset() const { return impl_ ? impl_->offset : 0; }
  /// \brief True when the elements lie row-major without gaps (axes of extent 1 may have any stride).
  bool is_contiguous() const { return !impl_ || impl_->contiguous; }
  /// \brief This tensor when contiguous, else a contiguous copy on the same device (counted in
  /// stats().contiguous_copies, not as a transfer).
  Tensor contiguous() const;

  /// \brief Another shape of the same elements (one extent may be -1): a view sharing storage when
  /// the strides allow it, else a contiguous copy (as PyTorch); ShapeError when the counts differ.
  Tensor reshape(Shape shape) const;
  /// \brief Another shape of the same elements (one extent may be -1), always a view sharing
  /// storage (PyTorch's view): a ShapeError where the strides cannot express it and reshape() would
  /// copy, so that writes through either are seen by the other (an application's wrapped field).
  Tensor view(Shape shape) const;
  /// \brief View with axes d0 and d1 swapped (negative counts from the end).
  Tensor transpose(int d0, int d1) const;
  /// \brief View with the axes reordered: result axis i is this tensor's axis dims[i].
  Tensor permute(const std::vector<int>& dims) const;
  /// \brief View of `length` indices from `start` along `dim`.
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  /// \brief View at `index` along `dim`, which is removed (negative index counts from the end).
  Tensor select(int dim, std::int64_t index) const;
  /// \brief View with a new axis of extent 1 at `dim` (in [-ndim-1, ndim]).
  Tensor unsqueeze(int dim) const;
  /// \brief View without axis `dim` when its extent is 1; this tensor unchanged otherwise (as PyTorch).
  Tensor squeeze(int dim) const;
  /// \brief View without every axis of extent 1.
  Tensor squeeze() const;
  /// \brief View broadcast to `shape` (stride 0 along expanded axes; -1 keeps an extent; new
  /// leading axes allowed); ShapeError when an extent other than 1 would change. Read-only in
  /// effect: copy_from() into a tensor with an expanded axis throws ShapeError.
  Tensor expand(const Shape& shape) const;
  /// \brief A new buffer on `device` holding a copy, even when `device` is this tensor's device.
  Tensor copyto(const Device& device) const;
  /// \brief This tensor itself (shared storage) when already on `device`, else copyto(device).
  Tensor to(const Device& device) const;
  /// \brief Alias of to() (MXNet's name).
  Tensor as_in_context(const Device& device) const { return to(device); }
  /// \brief A converted copy with another dtype, on the same device (this tensor if already `dtype`).
  /// Between any two dtypes: float -> int64 truncates toward zero and saturates (NaN -> 0, values
  /// past the int64 range -> its ends), float or int64 -> boolean is x != 0 (NaN -> true, as
  /// PyTorch), boolean -> numbers gives 0 and 1.
  Tensor astype(DType dtype) const;
  /// \brief Copies `src` (same shape and dtype, any device) into this tensor's elements, in place:
  /// an explicit, counted transfer when the devices differ. Writing into a view (narrow, select,
  /// a transpose) reaches its base; a destination with an expanded (stride 0) axis throws ShapeError.
  void copy_from(const Tensor& src) const;
  /// \brief A cpu() copy in page-locked (pinned) host memory, so to(gpu) runs at full DMA speed;
  /// this tensor itself when already pinned, or when this process has no GPU, real or emulated (nothing to pin
  /// for). Throws kten::Error for a tensor that is not on cpu().
  Tensor pin_memory() const;
  /// \brief True for host tensors in pinned memory.
  bool is_pinned() const;
  /// \brief True when both tensors view the same allocation.
  bool shares_storage_with(const Tensor& other) const;

  /// \brief Copies the elements to a host vector; synchronises with the device. T must match
  /// dtype(): float, double, std::int64_t or bool (a std::vector<bool>, unpacked from one byte per
  /// element).
  template <class T>
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {
      const std::unique_ptr<bool[]> bytes(new bool[static_cast<std::size_t>(numel())]);
      detail::read_to_host(*this, bytes.get(), DType::boolean, "to_vector()");
      return std::vector<bool>(bytes.get(), bytes.get() + numel());
    } else {
      std::vector<T> out(static_cast<std::size_t>(numel()));
      detail::read_to_host(*this, out.data(), dtype_of<T>(), "to_vector()");
      return out;
    }
  }
  /// \brief The value of a one-element tensor as T (float, double, std::int64_t or bool), converted
  /// from any dtype as libtorch's item<T>() does (to int64 toward zero, to bool != 0); a value T
  /// cannot hold (NaN or out of range to int64, a finite float64 past float32) is a DTypeError.
  /// Synchronises with the device.
  template <class T>
  T item() const {
    T value{};
    detail::read_item(*this, &value, dtype_of<T>());
    return value;
  }

  /// \brief Elementwise e^x.
  Tensor exp() const;
  /// \brief Elementwise natural logarithm.
  Tensor log() const;
  /// \brief Elementwise square root.
  Tensor sqrt() const;
  /// \brief Elementwise absolute value.
  Tensor abs() const;
  /// \brief Elementwise max(x, 0).
  Tensor relu() const;
  /// \brief Elementwise 1 / (1 + e^-x).
  Tensor sigmoid() const;
  /// \brief Elementwise hyperbolic tangent.
  Tensor tanh() const;
  /// \brief kten::pow(*this, exponent).
  Tensor pow(double exponent) const;
  /// \brief kten::pow(*this, exponent), broadcasting.
  Tensor pow(const Tensor& exponent) const;
  /// \brief kten::maximum(*this, other).
  Tensor maximum(const Tensor& other) const;
  /// \brief kten::minimum(*this, other).
  Tensor minimum(const Tensor& other) const;
  /// \brief kten::clamp(*this, lo, hi).
  Tensor clamp(double lo, double hi) const;
  /// \brief Elementwise sine.
  Tensor sin() const;
  /// \brief Elementwise cosine.
  Tensor cos() const;
  /// \brief Elementwise log(1 + x).
  Tensor log1p() const;
  /// \brief Elementwise e^x - 1.
  Tensor expm1() const;
  /// \brief Elementwise error function.
  Tensor erf() const;
  /// \brief Sum of all elements, a 0-d tensor on this device.
  Tensor sum() const;
  /// \brief Sum along `axis` (negative counts from the end); the axis is removed.
  Tensor sum(int axis) const;
  /// \brief Mean of all elements, a 0-d tensor on this device.
  Tensor mean() const;
  /// \brief Mean along `axis`.
  Tensor mean(int axis) const;
  /// \brief Largest element, a 0-d tensor on this device (ShapeError when empty).
  Tensor max() const;
  /// \brief Largest element along `axis`.
  Tensor max(int axis) const;
  /// \brief Smallest element, a 0-d tensor on this device (ShapeError when empty).
  Tensor min() const;
  /// \brief Smallest element along `axis`.
  Tensor min(int axis) const;
  /// \brief Frobenius (L2) norm, a 0-d tensor on this device.
  Tensor norm() const;
  /// \brief L2 norm along `axis`.
  Tensor norm(int axis) const;
  /// \brief Unbiased variance (torch.var), a 0-d tensor on this device.
  Tensor var() const;
  /// \brief Unbiased variance along `axis`.
  Tensor var(int axis) const;
  /// \brief The transposed view of a 2-D tensor (transpose(0, 1); no copy).
  Tensor transpose() const;

  /// \brief Marks this tensor (a leaf: created, not computed by a recorded operation) as one whose
  /// gradient backward() computes; returns this tensor. As libtorch's, the flag belongs to the
  /// tensor, so every copy of this handle sees it (`Tensor b = a; b.requires_grad_();` marks a);
  /// detach() gives a handle of its own. requires_grad_(false) on a computed tensor throws
  /// kten::Error (use detach()).
  Tensor& requires_grad_(bool requires_grad = true);
  /// \brief True for a leaf marked by requires_grad_() and for a result of an operation recorded
  /// on the tape (some input required grad, and no NoGradGuard was alive).
  bool requires_grad() const { return impl_ && impl_->autograd; }
  /// \brief True unless this tensor was computed by a recorded operation.
  bool is_leaf() const;
  /// \brief The gradient accumulated into this leaf by backward(): same shape, dtype and device;
  /// undefined before the first backward() reaching it, and for computed tensors (as PyTorch).
  Tensor grad() const;
  /// \brief Sets (or, with an undefined tensor, clears) the gradient of this leaf; it must match
  /// the shape, dtype and device.
  void set_grad(const Tensor& grad) const;
  /// \brief The name of the recorded operation that computed this tensor ("kten::mul"), or
  /// nullptr for a leaf.
  const char* grad_fn() const;
  /// \brief Reverse-mode differentiation from this tensor: accumulates d(this)/d(leaf), weighted
  /// by `gradient` (same shape; may be omitted for a one-element tensor, meaning 1), into the grad()
  /// of every leaf that requires grad. The graph's saved tensors are freed afterwards unless
  /// `retain_graph`; going back through a freed graph throws kten::Error. Runs on the device
  /// without a host synchronisation.
  void backward(const Tensor& gradient, bool retain_graph = false) const;
  /// \brief backward() of a one-element tensor with the implied gradient 1.
  void backward() const;
  /// \brief The same storage and view without history, in a handle of its own: requires_grad()
  /// is false.
  Tensor detach() const;
  /// \brief Makes this tensor, and every copy of its handle, refer to `new_data`'s storage, shape,
  /// strides, offset and dtype (libtorch's set_data, Python's `t.data = new_data`): how a module
  /// moves, casts and loads its parameters and buffers in place, so that the handles its forward()
  /// holds see it. Views taken before keep the old data. requires_grad() and the recorded history
  /// stay; a gradient follows to new_data's device and dtype (moved and cast, as PyTorch's
  /// module.to() does with .grad), and is dropped when the shape changes. kten::Error for an
  /// undefined tensor on either side, DTypeError for integer or boolean data under a tensor that
  /// requires grad.
  void set_data(const Tensor& new_data) const;

  /// \brief Raw pointer to the first element (storage + offset), in the device's memory; the
  /// elements are where strides() say.
  void* data() const;

  /// \brief The data as an unmanaged Kokkos::View (no copy), e.g. `t.view<float**>()`,
  /// `t.view<float*, Kokkos::CudaSpace>()` or `t.view<float**, Kokkos::LayoutStride>()`; defined in
  /// <kten/kokkos.hpp>. Without a layout the View is LayoutRight and the tensor must be contiguous
  /// (kten::Error otherwise); with Kokkos::LayoutStride it works for any tensor, strides included.
  /// DataType's value type must match dtype(), its rank ndim(), and the memory space (default
  /// Kokkos::HostSpace) must be exactly the memory space of this tensor's device. The View does not
  /// keep the storage alive.
  template <class DataType, class... LayoutAndMemorySpace>
  auto view() const;

  /// \brief Internal: a contiguous tensor over existing storage.
  Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, DType dtype);
  /// \brief Internal: a strided view of existing storage (the caller checked it stays inside).
  Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, Shape strides, std::int64_t offset, DType dtype);
  /// \brief Internal: the shared storage (null for an undefined tensor).
  const std::shared_ptr<detail::Storage>& storage() const { return impl_ ? impl_->storage : detail::no_storage(); }
  /// \brief Internal: the implementation this handle shares with its copies (null when undefined).
  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
  friend struct detail::AutogradAccess;
};

/// \brief While alive, operations on this thread record nothing on the autograd tape and keep no
/// activations for backward (inference, optimiser updates), as torch::NoGradGuard. Nests.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// \brief False while a NoGradGuard is alive on this thread.
bool is_grad_enabled();

/// \brief Prints the values (NumPy-style elision when large), then a trailer such as
/// `<Tensor 2x3 float32 @gpu(0)>`. Synchronises with the device and copies to the host.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// \brief An uninitialised tensor on `device`. Every factory below takes every dtype, except
/// arange (not boolean); a `value` is converted to the dtype as astype() does, and one that an
/// int64 cannot hold (NaN, infinite, past 2^63) throws DTypeError.
Tensor empty(Shape shape, const Device& device = cpu(), DType dtype = DType::float32);
/// \brief A tensor of zeros on `device`.
Tensor zeros(const Shape& shape, const Device& device = cpu(), DType dtype = DType::float32);
/// \brief A tensor of ones on `device`.
Tensor ones(const Shape& shape, const Device& device = cpu(), DType dtype = DType::float32);
/// \brief Zeros of t's shape and dtype on t's device (PyTorch's zeros_like).
Tensor zeros_like(const Tensor& t);
/// \brief Ones of t's shape and dtype on t's device (PyTorch's ones_like).
Tensor ones_like(const Tensor& t);
/// \brief A tensor filled with `value` on `device`.
Tensor full(const Shape& shape, double value, const Device& device = cpu(),
            DType dtype = DType::float32);
/// \brief 0, 1, ..., stop-1 on `device`.
Tensor arange(std::int64_t stop, const Device& device = cpu(), DType dtype = DType::float32);
/// \brief start, start+step, ... (< stop for step > 0, > stop for step < 0) on `device`.
Tensor arange(double start, double stop, double step, const Device& device = cpu(),
              DType dtype = DType::float32);

/// \brief A new contiguous tensor joining `tensors` (one device, one dtype, shapes equal except
/// along `dim`) along the existing axis `dim`.
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
/// \brief A new contiguous tensor stacking `tensors` (one device, one dtype, one shape) along a new
/// axis `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);

/// \brief A float32 tensor of the given shape from host values (row-major), placed on `device`.
Tensor tensor(const std::vector<float>& values, const Shape& shape, const Device& device = cpu());
/// \brief A float64 tensor of the given shape from host values (row-major), placed on `device`.
Tensor tensor(const std::vector<double>& values, const Shape& shape, const Device& device = cpu());
/// \brief A 1-D float32 tensor from host values.
Tensor tensor(const std::vector<float>& values, const Device& device = cpu());
/// \brief A 1-D float64 tensor from host values.
Tensor tensor(const std::vector<double>& values, const Device& device = cpu());
/// \brief An int64 tensor of the given shape from host values (row-major), placed on `device`.
Tensor tensor(const std::vector<std::int64_t>& values, const Shape& shape, const Device& device = cpu());
/// \brief A 1-D int64 tensor from host values: tensor(std::vector<std::int64_t>{0, 2, 1}, d).
Tensor tensor(const std::vector<std::int64_t>& values, const Device& device = cpu());
/// \brief A boolean tensor of the given shape from host values (row-major), placed on `device`.
Tensor tensor(const std::vector<bool>& values, const Shape& shape, const Device& device = cpu());
/// \brief A 1-D boolean tensor from host values.
Tensor tensor(const std::vector<bool>& values, const Device& device = cpu());

namespace detail {
template <class T>
inline constexpr bool is_element_type = std::is_same_v<T, float> || std::is_same_v<T, double>;
Tensor tensor_from_rows(std::initializer_list<std::initializer_list<float>> rows, const Device& device);
Tensor tensor_from_rows(std::initializer_list<std::initializer_list<double>> rows, const Device& device);
}  // namespace detail

// The braced-list forms are templates deducing T from the literals, not float/double overload
// pairs: clang rejects the nested-list pair as ambiguous, and as templates a one-row list such as
// {{1.f}} picks the 2-D form (the more specialised one) instead of being ambiguous.

/// \brief A 1-D tensor from braced values, float32 for float literals and float64 for double
/// ones: tensor({1.f, 2.f, 3.f}), tensor({1.0, 2.0}).
template <class T, std::enable_if_t<detail::is_element_type<T>, int> = 0>
Tensor tensor(std::initializer_list<T> values, const Device& device = cpu()) {
  return tensor(std::vector<T>(values), device);
}
/// \brief A 2-D tensor from nested rows, float32 or float64 like the literals:
/// tensor({{1.f, 2.f}, {3.f, 4.f}}); ragged rows throw ShapeError.
template <class T, std::enable_if_t<detail::is_element_type<T>, int> = 0>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows, const Device& device = cpu()) {
  return detail::tensor_from_rows(rows, device);
}

}  // namespace kten
