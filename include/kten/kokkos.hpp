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

namespace detail {
/// \brief What a View asks of a tensor: element type, rank, and its memory space's name.
struct ViewRequest {
  DType dtype;
  int rank;
  const char* memory_space;  ///< \brief Kokkos' name of the View's memory space, e.g. "Host", "Cuda"
};
/// \brief The tensor's data when `request` fits it exactly; kten::Error explains what does not.
void* checked_view_data(const Tensor& t, const ViewRequest& request);
/// \brief A tensor over memory a View owns (kept alive by `owner`), checked against `device`.
Tensor tensor_from_external(void* data, Shape shape, const Device& device, std::shared_ptr<void> owner,
                            const ViewRequest& request);
template <class MemorySpace>
ViewRequest view_request(DType dtype, int rank) {
  return {dtype, rank, MemorySpace::name()};
}
template <class Default, class... Given>
struct FirstOr {
  using type = Default;
};
template <class Default, class First, class... Rest>
struct FirstOr<Default, First, Rest...> {
  using type = First;
};
}  // namespace detail

template <class DataType, class... MemorySpace>
auto Tensor::view() const {
  static_assert(sizeof...(MemorySpace) <= 1, "kten::Tensor::view<DataType, MemorySpace>() takes one memory space");
  using Space = typename detail::FirstOr<Kokkos::HostSpace, MemorySpace...>::type;
  using V = Kokkos::View<DataType, Kokkos::LayoutRight, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using T = typename V::non_const_value_type;
  constexpr int rank = static_cast<int>(V::rank);
  static_assert(rank <= 4, "kten::Tensor::view supports ranks 0 to 4");
  auto* p = static_cast<typename V::pointer_type>(
      detail::checked_view_data(*this, detail::view_request<Space>(dtype_of<T>(), rank)));
  auto e = [&](int i) { return static_cast<std::size_t>(shape()[i]); };
  if constexpr (rank == 0) return V(p);
  else if constexpr (rank == 1) return V(p, e(0));
  else if constexpr (rank == 2) return V(p, e(0), e(1));
  else if constexpr (rank == 3) return V(p, e(0), e(1), e(2));
  else return V(p, e(0), e(1), e(2), e(3));
}

/// \brief Wraps an existing Kokkos::View as a tensor on `device`, without copying.
///
/// The tensor keeps a copy of the View (and so the allocation) alive. The View must hold float or
/// double, be contiguous and row-major (LayoutRight, or rank <= 1), have rank <= 4, and live in
/// exactly the memory space of `device` (HostSpace for cpu(), the GPU backend's device memory space,
/// e.g. CudaSpace, for a GPU); otherwise kten::Error explains what does not fit.
template <class ViewType>
Tensor from_view(const ViewType& view, const Device& device = cpu()) {
  static_assert(Kokkos::is_view<ViewType>::value, "kten::from_view takes a Kokkos::View");
  using T = typename ViewType::value_type;
  static_assert(!std::is_const_v<T>, "kten::from_view needs a View of non-const elements");
  constexpr int rank = static_cast<int>(ViewType::rank);
  static_assert(rank <= 4, "kten::from_view supports ranks 0 to 4");
  static_assert(rank <= 1 || std::is_same_v<typename ViewType::array_layout, Kokkos::LayoutRight>,
                "kten::from_view needs a row-major (LayoutRight) View for rank >= 2");
  if (!view.span_is_contiguous())
    throw Error("kten::from_view: the View '" + view.label() +
                "' is not contiguous (a strided subview?); pass a contiguous View or copy it first");
  Shape shape(rank);
  for (int r = 0; r < rank; ++r) shape[r] = static_cast<std::int64_t>(view.extent(r));
  auto owner = std::make_shared<ViewType>(view);
  return detail::tensor_from_external(
      view.data(), std::move(shape), device, std::move(owner),
      detail::view_request<typename ViewType::memory_space>(dtype_of<T>(), rank));
}

}  // namespace kten
