// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the checksum of save_checkpoint()'s files, shared with the checkpoint fuzz target
// (which writes files whose checksum is right, so that the fuzzer reaches the checks behind it).

#include <map>
#include <string>

#include <kten/nn/module.hpp>

namespace kten::detail {

/// \brief The metadata entry that holds the checksum.
inline constexpr const char* kCheckpointChecksumKey = "checksum";

/// \brief FNV-1a (64 bits, 16 lowercase hex digits) of a checkpoint's contents: each metadata entry
/// but the checksum's, in key order (key, NUL, value, NUL), then each tensor in the given order
/// (the file's data order): name, NUL, the dtype's name (kten::dtype_name), NUL, the rank as one
/// byte, the extents as 8-byte little-endian integers, the elements' little-endian bytes.
std::string checkpoint_checksum(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace kten::detail
