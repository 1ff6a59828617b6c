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

/// \brief While alive, emulated-GPU memory is readable (see emulated_memory.hpp): opened only
/// around the kernels and copies of an emulated GPU; a no-op unless host access to it is trapped.
class EmulatedAccess {
 public:
  EmulatedAccess();
  ~EmulatedAccess();
  EmulatedAccess(const EmulatedAccess&) = delete;
  EmulatedAccess& operator=(const EmulatedAccess&) = delete;
};

/// \brief EmulatedAccess for an emulated GPU's kernel; nothing for other backends.
template <class Backend>
struct KernelAccess {
  std::conditional_t<std::is_same_v<Backend, EmulatedGpuBackend>, EmulatedAccess, char> open{};
};

/// \brief Calls f(backend) for the backend that serves `device`; throws DeviceUnavailable when
/// the device cannot be used in this process.
template <class F>
decltype(auto) with_backend(const Device& device, F&& f) {
  require_available(device);
  if (device.is_gpu()) {
    if (gpus_are_emulated()) return f(EmulatedGpuBackend{});
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

/// \brief The only place kten calls Kokkos::parallel_for: on the backend's policy, with an
/// emulated GPU's memory open while the kernel runs.
template <class Backend, class Policy, class Functor>
void run(const char* label, const Backend&, const Policy& policy, const Functor& functor) {
  KernelAccess<Backend> access;
  Kokkos::parallel_for(label, policy, functor);
}

/// \brief The only place kten calls Kokkos::parallel_reduce (result in `reducer`'s View).
template <class Backend, class Policy, class Functor, class Reducer>
void run_reduce(const char* label, const Backend&, const Policy& policy, const Functor& functor,
                const Reducer& reducer) {
  KernelAccess<Backend> access;
  Kokkos::parallel_reduce(label, policy, functor, reducer);
}

/// \brief Runs functor(i) for i in [0, n) on the backend, asynchronously.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& be, std::int64_t n, const Functor& functor) {
  run(label, be, RangePolicy<Backend>(be.space, 0, n), functor);
}

/// \brief `league` teams on the backend, of `team_size` threads (0: the backend picks, Kokkos::AUTO)
/// with `vector_length` lanes each on a GPU. An emulated GPU gets teams of two host threads where
/// the host has them, so the kernels' cross-thread combining and barriers run (Kokkos' OpenMP
/// backend would pick teams of one), and no vector lanes.
template <class Backend>
TeamPolicy<Backend> team_policy(const Backend& be, int league, int team_size = 0, int vector_length = 1) {
  if constexpr (std::is_same_v<Backend, EmulatedGpuBackend>)
    return TeamPolicy<Backend>(be.space, league, be.space.concurrency() >= 2 ? 2 : 1);
  else if (team_size > 0)
    return TeamPolicy<Backend>(be.space, league, team_size, vector_length);
  else
    return TeamPolicy<Backend>(be.space, league, Kokkos::AUTO, vector_length);
}

/// \brief Inside a GPU kernel, the same team-scratch pointer addressed as shared memory: Kokkos
/// hands out generic pointers, through which nvcc emits generic loads (LD.E) instead of LDS.128.
template <class T>
KOKKOS_INLINE_FUNCTION T* as_shared(T* p) {
#if defined(__CUDA_ARCH__)
  extern __shared__ __align__(16) char kten_shared[];
  const auto base = static_cast<unsigned>(__cvta_generic_to_shared(kten_shared));
  return reinterpret_cast<T*>(kten_shared + (static_cast<unsigned>(__cvta_generic_to_shared(p)) - base));
#else
  return p;
#endif
}

/// \brief The typed pointer to a tensor's first element (libtorch's data_ptr<T>()); a pinned
/// buffer that a queued copy may still read is waited for first, since the kernel may write it.
template <class T>
T* data_ptr(const Tensor& t) {
  const Storage& storage = *t.storage();
  if (storage.pinned) wait_for_pending_reader(storage);
  return static_cast<T*>(storage.data);
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

/// \brief Blocks until all work queued on `device` has finished.
void fence(const Device& device);

/// \brief An unmanaged 1-D View over raw memory of a backend.
template <class Backend, class T>
using RawView = Kokkos::View<T*, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace kten::detail
