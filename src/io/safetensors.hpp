// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: a safetensors file's tensors and metadata read in one pass over one open file (the
// public load_safetensors and load_safetensors_metadata each give one half), for the formats built
// on safetensors (checkpoints).

#include <map>
#include <string>

#include <kten/device.hpp>
#include <kten/nn/module.hpp>

namespace kten::detail {

/// \brief A safetensors file's contents.
struct SafetensorsContents {
  nn::StateDict tensors;                        ///< \brief in the order of their data in the file
  std::map<std::string, std::string> metadata;  ///< \brief "__metadata__", empty when absent
};

/// \brief Reads `path` as io::load_safetensors does (its checks, one counted copy per tensor to
/// `device`), with its metadata; every failure is a FormatError from `op`.
SafetensorsContents read_safetensors(const std::string& path, const Device& device, const std::string& op);

}  // namespace kten::detail
