#pragma once
// Internal: the one place where a runtime Device becomes a Kokkos backend (execution space
// instance + memory space) and a runtime DType becomes an element type. Kernels are templates
// over the backend and element type; everything that runs them goes through with_backend().

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>
#include <kten/dtype.hpp>

namespace kten::detail {

/// \brief cpu() and emulated GPUs: the default host execution space over host memory.
struct HostBackend {
  using execution_space = Kokkos::DefaultHostExecutionSpace;
  using memory_space = Kokkos::HostSpace;
  static constexpr bool is_host = true;
  execution_space space;
};

#ifdef KOKKOS_ENABLE_CUDA
/// \brief A real GPU: the CUDA execution space instance over CudaSpace.
struct CudaBackend {
  using execution_space = Kokkos::Cuda;
  using memory_space = Kokkos::CudaSpace;
  static constexpr bool is_host = false;
  execution_space space;
};
#endif

/// \brief Calls f(backend) for the backend that serves `device`; throws DeviceUnavailable when
/// the device cannot be used in this process.
template <class F>
decltype(auto) with_backend(const Device& device, F&& f) {
  require_available(device);
#ifdef KOKKOS_ENABLE_CUDA
  if (device.is_gpu() && !gpus_are_emulated()) return f(CudaBackend{});
#endif
  return f(HostBackend{});
}

/// \brief Calls f(T{}) with T = float for float32 and double for float64.
template <class F>
decltype(auto) with_dtype(DType dtype, F&& f) {
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

/// \brief True when host code can read `device`'s memory directly (cpu() and emulated GPUs).
inline bool host_can_read(const Device& device) {
  return with_backend(device, [](auto backend) { return decltype(backend)::is_host; });
}

/// \brief An unmanaged 1-D View over raw memory of a backend.
template <class Backend, class T>
using RawView = Kokkos::View<T*, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace kten::detail
