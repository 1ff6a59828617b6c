// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file io.hpp
/// \brief Files shared with PyTorch: state dicts in the safetensors format.

#include <map>
#include <string>

#include <kten/device.hpp>
#include <kten/nn/module.hpp>

namespace kten::io {

/// \brief Writes `tensors` to `path` in the safetensors format (the file of Hugging Face's
/// safetensors library, which safetensors.torch.load_file reads): an 8-byte little-endian header
/// length, a JSON header {name: {dtype, shape, data_offsets}} (with `metadata` as "__metadata__")
/// padded with spaces to a multiple of 8 bytes, then each tensor's row-major little-endian
/// elements, in the dict's order. float32, float64, int64 and boolean are F32, F64, I64 and BOOL;
/// views are written as their elements. The write is atomic, as Module::save(). Throws kten::Error
/// for an undefined tensor, a name given twice or "__metadata__", a name or metadata string that
/// is not UTF-8, or a path that cannot be written (the old file stays intact).
void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// \brief Reads a safetensors file's tensors onto `device`, in the order of their data in the
/// file (kten writes the dict's order; the safetensors library writes the widest dtypes first,
/// then by name): one counted host-to-device copy per tensor, and the file is never held twice in
/// host memory. F32, F64, I64 and BOOL are read; any other dtype, invalid JSON, a header over
/// 100 MB, missing or unknown fields, a name given twice, offsets that overlap, leave gaps or
/// pass the end, a size that does not match shape and dtype, a boolean byte other than 0 or 1,
/// or bytes after the last tensor throw kten::FormatError saying what and where.
nn::StateDict load_safetensors(const std::string& path, const Device& device = cpu());

/// \brief The "__metadata__" strings of a safetensors file (empty when it has none), after the
/// same checks as load_safetensors(); reads the header only.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

}  // namespace kten::io
