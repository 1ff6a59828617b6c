// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: bookkeeping for kten::stats() and the sync debug mode.

#include <cstddef>
#include <cstdint>

#include <kten/device.hpp>

namespace kten::detail {

/// \brief Counts a copy of `bytes` from one device to another (nothing when from == to).
void note_transfer(const Device& from, const Device& to, std::size_t bytes);
/// \brief Counts a device-local copy of a non-contiguous tensor into contiguous memory.
void note_contiguous_copy(std::size_t bytes);
/// \brief Counts a host wait for `device`; an implicit one on a GPU is reported per SyncDebug
/// (Error throws SyncError before anything waits).
void note_host_sync(const Device& device, const char* cause, bool implicit);
/// \brief How many times kten has fenced a GPU (real or emulated) since start: white-box tests
/// check that transfers fence exactly where they must.
std::uint64_t gpu_fence_count();

}  // namespace kten::detail
