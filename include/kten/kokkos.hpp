// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file kokkos.hpp
/// \brief Kokkos interop: wrap a Kokkos::View as a tensor (from_view) and see a tensor as a
/// Kokkos::View (Tensor::view). The one public header that includes Kokkos; applications that
/// only use tensors include <kten/kten.hpp> and need no Kokkos headers.

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include <Kokkos_Core.hpp>

#include <kten/tensor.hpp>

namespace kten {

/// \brief While alive, emulated-GPU memory is open to host code. With KTEN_TRAP_HOST_ACCESS=1 (a
/// test mode) an emulated GPU's memory faults outside kten's own kernels and copies, as a real
/// GPU's would on the host; an application's own Kokkos kernel on an emulated-GPU tensor's view()
/// runs on host threads, so it runs inside one of these. Nothing happens without the trap, and
/// on a real GPU. Scopes nest and may live on several threads at once.
class EmulatedGpuAccess {
 public:
  /// \brief Opens emulated-GPU memory to host code (a no-op without the trap).
  EmulatedGpuAccess();
  /// \brief Waits for the host's kernels, then closes it again once no scope is left.
  ~EmulatedGpuAccess();
  EmulatedGpuAccess(const EmulatedGpuAccess&) = delete;
  EmulatedGpuAccess& operator=(const EmulatedGpuAccess&) = delete;
};

namespace detail {
/// \brief What a View asks of a tensor: element type, rank, its memory space's name, and whether
/// it can describe strides (LayoutStride) or needs contiguous row-major elements (LayoutRight).
struct ViewRequest {
  DType dtype;
  int rank;
  const char* memory_space;  ///< \brief Kokkos' name of the View's memory space, e.g. "Host", "Cuda"
  bool strided = false;
};
/// \brief The tensor's data when `request` fits it exactly; kten::Error explains what does not.
void* checked_view_data(const Tensor& t, const ViewRequest& request);
/// \brief An owner that keeps `view` alive for a tensor's storage. Dropped after Kokkos has been
/// finalised (a tensor or model that outlives the ScopeGuard, a static one destroyed at exit), the
/// View is left to the process' end instead of freed: Kokkos aborts on a View freed after finalize.
template <class ViewType>
std::shared_ptr<void> own_view(ViewType view) {
  return std::shared_ptr<void>(new ViewType(std::move(view)), [](void* p) {
    if (Kokkos::is_initialized()) delete static_cast<ViewType*>(p);
  });
}
/// \brief device_of()'s answer for a memory space that is no kten device's: a kten::Error naming it.
[[noreturn]] void device_of_space(const char* memory_space);
/// \brief A tensor over memory a View owns (kept alive by `owner`): `span` elements from `data`,
/// seen with `shape` and `strides`, checked against `device`.
Tensor tensor_from_external(void* data, Shape shape, Shape strides, std::size_t span, const Device& device,
                            std::shared_ptr<void> owner, const ViewRequest& request);
template <class MemorySpace>
ViewRequest view_request(DType dtype, int rank, bool strided = false) {
  return {dtype, rank, MemorySpace::name(), strided};
}
template <class Default, class... Given>
struct FirstOr {
  using type = Default;
};
template <class Default, class First, class... Rest>
struct FirstOr<Default, First, Rest...> {
  using type = First;
};
/// \brief Tensor::view's optional arguments: an array layout first (LayoutRight or LayoutStride),
/// then a memory space; either may be left out.
template <class... Args>
struct ViewArgs {
  using layout = Kokkos::LayoutRight;
  using space = typename FirstOr<Kokkos::HostSpace, Args...>::type;
};
template <class First, class... Rest>
struct ViewArgs<First, Rest...> {
  static constexpr bool first_is_layout = Kokkos::is_array_layout<First>::value;
  using layout = std::conditional_t<first_is_layout, First, Kokkos::LayoutRight>;
  using space = std::conditional_t<first_is_layout, typename FirstOr<Kokkos::HostSpace, Rest...>::type, First>;
  static_assert(sizeof...(Rest) <= (first_is_layout ? 1 : 0),
                "kten::Tensor::view<DataType, [Layout,] [MemorySpace]>() takes at most a layout and a memory space");
};
}  // namespace detail

template <class DataType, class... LayoutAndMemorySpace>
auto Tensor::view() const {
  using Args = detail::ViewArgs<LayoutAndMemorySpace...>;
  using Layout = typename Args::layout;
  using Space = typename Args::space;
  static_assert(std::is_same_v<Layout, Kokkos::LayoutRight> || std::is_same_v<Layout, Kokkos::LayoutStride>,
                "kten::Tensor::view gives a LayoutRight View (contiguous tensors) or a LayoutStride one (any tensor)");
  using V = Kokkos::View<DataType, Layout, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using T = typename V::non_const_value_type;
  constexpr int rank = static_cast<int>(V::rank);
  constexpr bool strided = std::is_same_v<Layout, Kokkos::LayoutStride>;
  static_assert(rank <= 4, "kten::Tensor::view supports ranks 0 to 4");
  auto* p = static_cast<typename V::pointer_type>(
      detail::checked_view_data(*this, detail::view_request<Space>(dtype_of<T>(), rank, strided)));
  auto e = [&](int i) { return static_cast<std::size_t>(shape()[i]); };
  if constexpr (strided) {
    auto s = [&](int i) { return static_cast<std::size_t>(strides()[i]); };
    if constexpr (rank == 0) return V(p, Kokkos::LayoutStride());
    else if constexpr (rank == 1) return V(p, Kokkos::LayoutStride(e(0), s(0)));
    else if constexpr (rank == 2) return V(p, Kokkos::LayoutStride(e(0), s(0), e(1), s(1)));
    else if constexpr (rank == 3) return V(p, Kokkos::LayoutStride(e(0), s(0), e(1), s(1), e(2), s(2)));
    else return V(p, Kokkos::LayoutStride(e(0), s(0), e(1), s(1), e(2), s(2), e(3), s(3)));
  } else {
    if constexpr (rank == 0) return V(p);
    else if constexpr (rank == 1) return V(p, e(0));
    else if constexpr (rank == 2) return V(p, e(0), e(1));
    else if constexpr (rank == 3) return V(p, e(0), e(1), e(2));
    else return V(p, e(0), e(1), e(2), e(3));
  }
}

/// \brief The kten device whose memory a View lives in: cpu() for Kokkos::HostSpace, gpu(0) (the GPU
/// kten drives) for the GPU backend's device memory space (CudaSpace, HIPSpace); any other space
/// (managed, pinned, scratch) is a kten::Error naming it. A host View is cpu()'s even where GPUs
/// are emulated: say gpu(i) to from_view() to wrap it as an emulated GPU's.
template <class ViewType>
Device device_of(const ViewType&) {
  static_assert(Kokkos::is_view<ViewType>::value, "kten::device_of takes a Kokkos::View");
  using Space = typename ViewType::memory_space;
  if constexpr (std::is_same_v<Space, Kokkos::HostSpace>) return cpu();
  else if constexpr (std::is_same_v<Space, typename Kokkos::DefaultExecutionSpace::memory_space>) return gpu(0);
  else detail::device_of_space(Space::name());  // throws
}

/// \brief Wraps an existing Kokkos::View as a tensor on `device`, without copying.
///
/// Any layout: LayoutRight, LayoutLeft (the default of CUDA Views) and LayoutStride (a subview,
/// e.g. one component of a multi-component field) all wrap as they are: the tensor's shape is the
/// View's extents and its strides are the View's strides. The tensor keeps a copy of the View (and
/// so the allocation) alive. The View must hold float, double, std::int64_t or bool, have rank <= 4, and live in
/// exactly the memory space of `device` (HostSpace for cpu(), the GPU backend's device memory space,
/// e.g. CudaSpace, for a GPU); otherwise kten::Error explains what does not fit. An unmanaged View
/// whose pointer the GPU runtime places on the other side (device memory on cpu(), host memory on
/// a GPU) is a kten::DeviceMismatch.
template <class ViewType>
Tensor from_view(const ViewType& view, const Device& device) {
  static_assert(Kokkos::is_view<ViewType>::value, "kten::from_view takes a Kokkos::View");
  using T = typename ViewType::value_type;
  static_assert(!std::is_const_v<T>, "kten::from_view needs a View of non-const elements");
  constexpr int rank = static_cast<int>(ViewType::rank);
  static_assert(rank <= 4, "kten::from_view supports ranks 0 to 4");
  using Layout = typename ViewType::array_layout;
  static_assert(std::is_same_v<Layout, Kokkos::LayoutRight> || std::is_same_v<Layout, Kokkos::LayoutLeft> ||
                    std::is_same_v<Layout, Kokkos::LayoutStride>,
                "kten::from_view takes LayoutRight, LayoutLeft and LayoutStride Views");
  Shape shape(rank), strides(rank);
  for (int r = 0; r < rank; ++r) {
    shape[r] = static_cast<std::int64_t>(view.extent(r));
    strides[r] = static_cast<std::int64_t>(view.stride(r));
  }
  auto owner = detail::own_view(view);
  return detail::tensor_from_external(
      view.data(), std::move(shape), std::move(strides), view.span(), device, std::move(owner),
      detail::view_request<typename ViewType::memory_space>(dtype_of<T>(), rank));
}

/// \brief from_view(view, device_of(view)): the device the View's memory space names.
template <class ViewType>
Tensor from_view(const ViewType& view) {
  return from_view(view, device_of(view));
}

/// \brief Makes kten enqueue its kernels and copies on the application's Kokkos execution-space
/// instance, from this thread, for as long as the guard lives: in a CUDA build a
/// `Kokkos::Cuda(cudaStream_t)` (work on GPUs), in a host build an instance of the host space
/// (cpu() and emulated GPUs). kten's kernels then order with the application's own on that
/// instance without a fence, as PyTorch's CUDAStreamGuard.
///
/// Guards nest (the innermost wins). Destroy them in reverse order, on the thread that made them:
/// anything else aborts the program with a message (a guard is a scope, like std::lock_guard).
/// Making one waits for the work kten queued on the instance it replaces, and destroying it waits
/// for the work kten queued on its own, so that memory kten frees and reuses passes safely from
/// one instance to the other; in between nothing waits, so keep one guard alive around a whole
/// simulation loop rather than one per step. kten's memory cache serves one instance per device
/// at a time: while a guard is alive, other threads that use kten on the same device must be under
/// a guard of the same instance too.
class StreamGuard {
 public:
  /// \brief kten enqueues on `space` from this thread until the guard is destroyed.
  explicit StreamGuard(const Kokkos::DefaultExecutionSpace& space);
  /// \brief Waits for kten's work on the instance, then restores the one before.
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;
  /// \brief The instance kten enqueues on.
  const Kokkos::DefaultExecutionSpace& space() const { return space_; }

 private:
  Kokkos::DefaultExecutionSpace space_;
  std::size_t depth_;  // how many guards this thread had before this one
};

/// \brief An instance of Kokkos' default execution space on a stream (queue) of its own, for an
/// application that wants its kernels and kten's ordered on a queue of its own (StreamGuard)
/// without writing vendor code: in a CUDA or HIP build a new cudaStream_t / hipStream_t, which the
/// last copy of the returned pointer fences and destroys after the instance (copies of the
/// instance itself must not outlive the pointer); in a host build the default host instance.
/// Throws kten::Error when the GPU runtime cannot make a stream.
std::shared_ptr<const Kokkos::DefaultExecutionSpace> new_stream_instance();

}  // namespace kten
