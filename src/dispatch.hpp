#pragma once
// Internal: the one place where a runtime Device becomes a Kokkos backend (execution space
// instance + memory space) and a runtime DType becomes an element type, and the one way to launch
// a kernel over tensors: launch() checks the operands, picks the backend and element type, and
// hands the kernel typed pointers; for_each_index() runs a functor over a 64-bit index range.

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/tensor.hpp>

#include "checks.hpp"
#include "storage.hpp"

namespace kten::detail {

/// \brief True when this build's Kokkos has a device execution space (CUDA, HIP, SYCL, ...).
inline constexpr bool has_gpu_backend =
    !std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>;

/// \brief cpu(): the default host execution space over host memory, host algorithms.
struct HostBackend {
  using execution_space = Kokkos::DefaultHostExecutionSpace;
  using memory_space = Kokkos::HostSpace;
  /// \brief Host algorithms, and host code may touch the memory directly.
  static constexpr bool is_host = true;
  execution_space space;
};

/// \brief An emulated GPU (KTEN_EMULATE_GPUS): the host executes, over host memory, but every
/// "host or device" branch takes the device one, so tests run the code a GPU runs.
struct EmulatedGpuBackend {
  using execution_space = Kokkos::DefaultHostExecutionSpace;
  using memory_space = Kokkos::HostSpace;
  static constexpr bool is_host = false;
  execution_space space;
};

/// \brief A real GPU: Kokkos' default (device) execution space and its memory space. Nothing
/// here names a vendor; backends/<vendor>/ holds what Kokkos does not give.
struct GpuBackend {
  using execution_space = Kokkos::DefaultExecutionSpace;
  using memory_space = typename execution_space::memory_space;
  static constexpr bool is_host = false;
  execution_space space;
};

/// \brief While alive, kten's kernels and copies may touch emulated-GPU memory (see
/// emulated_memory.hpp); a no-op unless host access to it is trapped.
class EmulatedAccess {
 public:
  EmulatedAccess();
  ~EmulatedAccess();
  EmulatedAccess(const EmulatedAccess&) = delete;
  EmulatedAccess& operator=(const EmulatedAccess&) = delete;
};

/// \brief Calls f(backend) for the backend that serves `device`; throws DeviceUnavailable when
/// the device cannot be used in this process.
template <class F>
decltype(auto) with_backend(const Device& device, F&& f) {
  require_available(device);
  if (device.is_gpu()) {
    if (gpus_are_emulated()) {
      EmulatedAccess open;
      return f(EmulatedGpuBackend{});
    }
    if constexpr (has_gpu_backend) return f(GpuBackend{});
  }
  return f(HostBackend{});
}

/// \brief Calls f(T{}) with T = float for float32 and double for float64.
template <class F>
decltype(auto) with_dtype(DType dtype, F&& f) {
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

/// \brief A 1-D range policy on the backend's instance with a 64-bit index: Kokkos' default index
/// on CUDA is 32-bit, which would wrap on tensors of 2^32 elements or more.
template <class Backend>
using RangePolicy = Kokkos::RangePolicy<typename Backend::execution_space, Kokkos::IndexType<std::int64_t>>;
static_assert(std::is_same_v<RangePolicy<GpuBackend>::index_type, std::int64_t>,
              "kernels over tensors index with 64 bits on every backend");

/// \brief A team policy on the backend's instance (league and team indices fit 32 bits).
template <class Backend>
using TeamPolicy = Kokkos::TeamPolicy<typename Backend::execution_space>;

/// \brief Runs functor(i) for i in [0, n) on the backend, asynchronously.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& be, std::int64_t n, const Functor& functor) {
  Kokkos::parallel_for(label, RangePolicy<Backend>(be.space, 0, n), functor);
}

/// \brief The typed pointer to a tensor's first element (libtorch's data_ptr<T>()).
template <class T>
T* data_ptr(const Tensor& t) {
  return static_cast<T*>(t.storage()->data);
}

/// \brief A Kokkos profiling region for its lifetime (Kokkos 3.4 has no ScopedRegion): profilers
/// and Kokkos Tools show kten's operations, module calls and epochs by their kten:: names.
class Region {
 public:
  explicit Region(const char* name) { Kokkos::Profiling::pushRegion(name); }
  explicit Region(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~Region() { Kokkos::Profiling::popRegion(); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

/// \brief The one way to run a kernel over tensors: checks that every operand is defined and that
/// all live on one device with one dtype, then calls kernel(backend, T* first, T* rest...).
template <class Kernel, class... Tensors>
void launch(const char* op, Kernel&& kernel, const Tensor& first, const Tensors&... rest) {
  (check_compatible(op, first, rest), ...);
  check_defined(first, op);
  Region region(op);
  const auto operands = std::forward_as_tuple(first, rest...);  // nvcc cannot capture a pack
  with_backend(first.device(), [&](auto be) {
    with_dtype(first.dtype(), [&](auto zero) {
      using T = decltype(zero);
      std::apply([&](const auto&... t) { kernel(be, data_ptr<T>(t)...); }, operands);
    });
  });
}

/// \brief True when host code can read `device`'s memory directly (cpu() only: emulated GPUs
/// model device memory).
inline bool host_can_read(const Device& device) {
  return with_backend(device, [](auto backend) { return decltype(backend)::is_host; });
}

/// \brief Blocks until all work queued on `device` has finished.
void fence(const Device& device);

/// \brief An unmanaged 1-D View over raw memory of a backend.
template <class Backend, class T>
using RawView = Kokkos::View<T*, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace kten::detail
