// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file runtime.hpp
/// \brief Visible cost: transfer and synchronisation counters, and the sync debug mode.

#include <cstddef>
#include <cstdint>

namespace kten {

/// \brief Counters since start (or the last reset_stats()). Emulated GPUs count like real ones.
struct Stats {
  std::uint64_t host_to_device = 0;        ///< \brief copies from cpu() to a GPU
  std::uint64_t device_to_host = 0;        ///< \brief copies from a GPU to the host (cpu() tensors, item, to_vector, printing)
  std::uint64_t device_to_device = 0;      ///< \brief copies between two GPUs
  std::uint64_t bytes_host_to_device = 0;  ///< \brief bytes moved host -> GPU
  std::uint64_t bytes_device_to_host = 0;  ///< \brief bytes moved GPU -> host
  std::uint64_t bytes_device_to_device = 0;///< \brief bytes moved GPU -> GPU
  std::uint64_t host_syncs = 0;            ///< \brief times the host waited for a device (item, to_vector, printing, synchronize)
  /// \brief copies of a non-contiguous tensor into contiguous memory on its own device
  /// (contiguous(), reshape() of a view the strides cannot express, reductions and transfers of
  /// views); never counted as transfers
  std::uint64_t contiguous_copies = 0;
  std::uint64_t bytes_contiguous_copies = 0;  ///< \brief bytes written by those copies

  /// \brief All copies between different devices.
  std::uint64_t transfers() const { return host_to_device + device_to_host + device_to_device; }
  /// \brief All bytes moved between different devices.
  std::uint64_t bytes_transferred() const {
    return bytes_host_to_device + bytes_device_to_host + bytes_device_to_device;
  }
};

/// \brief A snapshot of the counters (thread-safe).
Stats stats();
/// \brief Sets every counter to zero.
void reset_stats();

/// \brief Frees the device blocks kten keeps for reuse. Tensors release their memory into a
/// per-device cache (as PyTorch's caching allocator does) so that the next tensor of that size
/// costs neither page faults nor cudaMalloc; an allocation that fails empties the cache and retries.
void empty_cache();
/// \brief Bytes currently held in that cache, over all devices.
std::size_t cached_bytes();

/// \brief What to do at an implicit host synchronisation (item, to_vector, printing).
enum class SyncDebug {
  Off,   ///< \brief say nothing (default)
  Warn,  ///< \brief print one line to stderr naming the operation and the device
  Error  ///< \brief throw kten::SyncError instead of synchronising
};

/// \brief Sets the sync debug mode for the whole process; returns the previous mode.
SyncDebug set_sync_debug_mode(SyncDebug mode);
/// \brief The current sync debug mode.
SyncDebug sync_debug_mode();

/// \brief Turns on (or off) the check of saved wrapped memory for the whole process; returns the
/// previous setting. While on, every tensor over memory kten did not allocate (from_view(),
/// kten_tensor_wrap()) that autograd saves for a backward pass is copied when it is saved and
/// compared when backward() uses it: a write in between (a solver that updated the field one step
/// too early) is a kten::Error naming the op and the tensor instead of a wrong gradient. A debug
/// mode: it costs a copy of each such tensor and a host synchronisation per check. The environment
/// variable KTEN_CHECK_SAVED=1 turns it on at start.
bool set_check_saved(bool on);
/// \brief True while the check of saved wrapped memory is on (set_check_saved()).
bool check_saved_enabled();

}  // namespace kten
