#pragma once
// Internal: the allocation behind a tensor.

#include <cstddef>
#include <memory>
#include <string>

#include <kten/device.hpp>
#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief One allocation in one device's memory; tensors share it through shared_ptr.
struct Storage {
  void* data = nullptr;
  std::size_t bytes = 0;
  Device device;
  std::shared_ptr<void> owner;  // the Kokkos::View (kten's or the user's) that owns the memory
  bool pinned = false;          // page-locked host memory (CudaHostPinnedSpace)
};

/// \brief "1.50 GiB": a byte count for messages.
std::string human_bytes(double bytes);

/// \brief Allocates `bytes` (uninitialised) on `device`; OutOfMemory names the device and size.
std::shared_ptr<Storage> allocate(const Device& device, std::size_t bytes, const char* what);

/// \brief Copies `bytes` between storages (any devices), counting transfers; fenced when the
/// destination is read by the host next.
void copy_bytes(const Storage& src, const Storage& dst, std::size_t bytes);

/// \brief A new tensor on `device` filled from host memory (row-major, `dtype` elements).
Tensor from_host(const void* values, const Shape& shape, DType dtype, const Device& device);

}  // namespace kten::detail
