// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the fields an ONNX file holds, read from protobuf's wire format rather than through the
// ONNX project's classes, so that kten judges a file the same whichever onnx library it is built
// with: Debian 12's 1.12 (full protobuf runtime; it keeps IR 9-11's fields as unknown ones) or
// 1.18 and later (built for protobuf-lite, without reflection, and knowing those fields).

#include <string>
#include <string_view>
#include <vector>

namespace kten::onnx::detail {

/// \brief Why a serialized ModelProto cannot be read as kten reads it, or empty: a field kten does
/// not know (newer than IR 13), one it refuses by name (IR 11's device configurations), or a
/// message field with another wire type. `path` names the model ("the model"); the reason names
/// the place, e.g. "the model.graph.node[0] holds field 99 of onnx.NodeProto, ...".
std::string unreadable_field(std::string_view model_bytes, const std::string& path);

/// \brief Every length-delimited occurrence of field `number` at the top level of a serialized
/// message, in order (a string, bytes or submessage field, known to the classes or not).
std::vector<std::string> length_delimited_fields(std::string_view message_bytes, int number);

}  // namespace kten::onnx::detail
