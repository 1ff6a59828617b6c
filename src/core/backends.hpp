// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the one place where a runtime Device becomes a Kokkos backend, an execution-space
// instance plus a memory space (kokkos-fft keeps its backend selection alone the same way).

#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>

#include "core/kokkos_lifetime.hpp"

namespace kten::detail {

/// \brief True when this build's Kokkos has a device execution space (CUDA, HIP, SYCL, ...).
inline constexpr bool has_gpu_backend =
    !std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>;

/// \brief A host execution space over host memory: cpu(), or an emulated GPU. Space is the default
/// host space, or Kokkos::Serial for threads that cannot use the OpenMP pool (docs/semantics.md,
/// "Thread model").
template <class Space, bool Emulated>
struct HostMemoryBackend {
  using execution_space = Space;
  using memory_space = Kokkos::HostSpace;
  /// \brief Host algorithms, and host code may touch the memory directly (cpu()).
  static constexpr bool is_host = !Emulated;
  /// \brief An emulated GPU (KTEN_EMULATE_GPUS): host threads execute, over host memory, but every
  /// "host or device" branch takes the device one, so tests run the code a GPU runs.
  static constexpr bool emulated = Emulated;
  execution_space space;
};

/// \brief cpu() on Space.
template <class Space>
using HostOn = HostMemoryBackend<Space, false>;
/// \brief An emulated GPU on Space.
template <class Space>
using EmulatedGpuOn = HostMemoryBackend<Space, true>;

using HostBackend = HostOn<Kokkos::DefaultHostExecutionSpace>;
using EmulatedGpuBackend = EmulatedGpuOn<Kokkos::DefaultHostExecutionSpace>;

/// \brief A real GPU: Kokkos' default (device) execution space and its memory space. Nothing
/// here names a vendor; backends/<vendor>/ holds what Kokkos does not give.
struct GpuBackend {
  using execution_space = Kokkos::DefaultExecutionSpace;
  using memory_space = typename execution_space::memory_space;
  static constexpr bool is_host = false;
  static constexpr bool emulated = false;
  execution_space space;
};

/// \brief The execution-space instance of the innermost kten::StreamGuard alive on this thread, or
/// nullptr when there is none (kten then uses Kokkos' default instance).
const Kokkos::DefaultExecutionSpace* guarded_instance();

/// \brief The instance of Space that kten enqueues on from this thread: a StreamGuard's (it names
/// Kokkos' default execution space), else Space's default instance.
template <class Space>
Space current_instance() {
  if constexpr (std::is_same_v<Space, Kokkos::DefaultExecutionSpace>) {
    if (const Kokkos::DefaultExecutionSpace* guarded = guarded_instance()) return *guarded;
  }
  return Space();
}

/// \brief Kokkos 3.4's OpenMP backend serves only the thread that initialised Kokkos, outside
/// parallel regions; other threads get host work run on Kokkos::Serial (ThreadError without it).
bool host_pool_usable_here();

/// \brief Calls f(backend) for the backend that serves `device` (starting Kokkos when nobody has);
/// throws DeviceUnavailable when the device cannot be used in this process, kten::Error after
/// Kokkos::finalize.
/// A GPU build's gpu() is its GPU: emulated GPUs exist in host-only builds alone (device.cpp refuses
/// KTEN_EMULATE_GPUS in a GPU build), so a GPU build compiles no kernel for them (they were a fifth
/// of a CUDA kernel file's compile time, and no test ran them there).
template <class F>
decltype(auto) with_backend(const Device& device, F&& f) {
  ensure_kokkos();
  require_available(device);
  if constexpr (has_gpu_backend) {
    if (device.is_gpu()) return f(GpuBackend{current_instance<Kokkos::DefaultExecutionSpace>()});
  }
#if defined(KOKKOS_ENABLE_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
  if constexpr (std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>) {
    if (!host_pool_usable_here()) {
      if constexpr (!has_gpu_backend) {
        if (device.is_gpu()) return f(EmulatedGpuOn<Kokkos::Serial>{});
      }
      return f(HostOn<Kokkos::Serial>{});
    }
  }
#endif
  const auto host = current_instance<Kokkos::DefaultHostExecutionSpace>();
  if constexpr (!has_gpu_backend) {
    if (device.is_gpu()) return f(EmulatedGpuBackend{host});
  }
  return f(HostBackend{host});
}

/// \brief Blocks until all work queued on `device` has finished.
void fence(const Device& device);

/// \brief An unmanaged 1-D View over raw memory of a backend.
template <class Backend, class T>
using RawView = Kokkos::View<T*, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace kten::detail
