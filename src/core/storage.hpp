// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the allocation behind a tensor.

#include <atomic>
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
  std::shared_ptr<void> owner;  // what owns the memory: kten's block, a user's View, pinned memory
  /// \brief For a block from the device's cache: its size, the key it goes back under when the
  /// storage dies (0: the owner frees the memory). Kept here rather than in a deleter of `owner`,
  /// which would cost every small operation one more heap allocation.
  std::size_t cache_block = 0;
  bool pinned = false;          // page-locked host memory a GPU copies from asynchronously
  bool external = false;        // memory kten did not allocate (a wrapped View): others may write it
  /// \brief For pinned storage: the GPU whose queued copy may still be reading it (-1: none).
  /// Host writes into the buffer and its release wait for that GPU first.
  mutable std::atomic<int> pending_reader{-1};

  ~Storage();
};

/// \brief "1.50 GiB": a byte count for messages.
std::string human_bytes(double bytes);

/// \brief Allocates `bytes` (uninitialised) on `device`; OutOfMemory names the device and size.
std::shared_ptr<Storage> allocate(const Device& device, std::size_t bytes, const char* what);

/// \brief Bytes of the blocks that live storages from allocate() hold now, over every device (the
/// cache's free blocks, pinned and wrapped memory not counted): what a model and its tensors cost.
std::size_t live_block_bytes();
/// \brief Returns a dying storage's block (cache_block != 0) to the device's cache.
void return_to_cache(Storage& storage);

/// \brief `bytes` of uninitialised host memory, owned by the returned pointer, labelled for Kokkos Tools.
std::shared_ptr<void> allocate_host(std::size_t bytes, const char* label, void** data);

/// \brief Page-locked host memory (cpu()) a GPU copies from asynchronously; nullptr when there is
/// nothing to pin for (a host-only build without emulated GPUs).
std::shared_ptr<Storage> allocate_pinned(std::size_t bytes);

/// \brief Offset of a tensor's first element from its storage's start, in bytes.
std::size_t byte_offset(const Tensor& t);
/// \brief Waits until no queued copy still reads pinned `storage` (before the host writes it).
void wait_for_pending_reader(const Storage& storage);

}  // namespace kten::detail
