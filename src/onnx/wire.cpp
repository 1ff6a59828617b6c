// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// ONNX's messages as kten reads them (onnx.proto of Debian 12's onnx 1.12, then what IR 9 to 11
// added), and a walk over protobuf's wire format that checks a file against them. Bounded: every
// length is checked against what is left, and nesting stops at protobuf's own limit of 100.
#include "wire.hpp"

#include <cstdint>
#include <iterator>

namespace kten::onnx::detail {
namespace {

// A field kten knows from onnx 1.12, one added since that it reads or ignores (metadata, a
// function's overload and attribute defaults, type annotations), or one it refuses by name.
enum class Support : std::uint8_t { known, newer, refused };

enum class Msg : std::uint8_t {
  Attribute, Function, Graph, Model, Node, OperatorSetId, SparseTensor, StringStringEntry, TensorAnnotation,
  Tensor, TensorSegment, TensorShape, TensorShapeDimension, TrainingInfo, Type, TypeMap, TypeOptional,
  TypeSequence, TypeSparseTensor, TypeTensor, ValueInfo, scalar  // scalar: not a message
};

struct FieldSpec {
  int number;
  const char* name;
  Msg message;  // the submessage's type, or Msg::scalar
  bool repeated;
  Support support = Support::known;
};

constexpr bool R = true, S = false;  // repeated, singular
constexpr Msg kScalar = Msg::scalar;

constexpr FieldSpec kAttribute[] = {
    {1, "name", kScalar, S}, {2, "f", kScalar, S}, {3, "i", kScalar, S}, {4, "s", kScalar, S},
    {5, "t", Msg::Tensor, S}, {6, "g", Msg::Graph, S}, {7, "floats", kScalar, R}, {8, "ints", kScalar, R},
    {9, "strings", kScalar, R}, {10, "tensors", Msg::Tensor, R}, {11, "graphs", Msg::Graph, R},
    {13, "doc_string", kScalar, S}, {14, "tp", Msg::Type, S}, {15, "type_protos", Msg::Type, R},
    {20, "type", kScalar, S}, {21, "ref_attr_name", kScalar, S}, {22, "sparse_tensor", Msg::SparseTensor, S},
    {23, "sparse_tensors", Msg::SparseTensor, R}};
constexpr FieldSpec kFunction[] = {
    {1, "name", kScalar, S}, {4, "input", kScalar, R}, {5, "output", kScalar, R}, {6, "attribute", kScalar, R},
    {7, "node", Msg::Node, R}, {8, "doc_string", kScalar, S}, {9, "opset_import", Msg::OperatorSetId, R},
    {10, "domain", kScalar, S}, {11, "attribute_proto", Msg::Attribute, R, Support::newer},
    {12, "value_info", Msg::ValueInfo, R, Support::newer}, {13, "overload", kScalar, S, Support::newer},
    {14, "metadata_props", Msg::StringStringEntry, R, Support::newer}};
constexpr FieldSpec kGraph[] = {
    {1, "node", Msg::Node, R}, {2, "name", kScalar, S}, {5, "initializer", Msg::Tensor, R},
    {10, "doc_string", kScalar, S}, {11, "input", Msg::ValueInfo, R}, {12, "output", Msg::ValueInfo, R},
    {13, "value_info", Msg::ValueInfo, R}, {14, "quantization_annotation", Msg::TensorAnnotation, R},
    {15, "sparse_initializer", Msg::SparseTensor, R},
    {16, "metadata_props", Msg::StringStringEntry, R, Support::newer}};
constexpr FieldSpec kModel[] = {
    {1, "ir_version", kScalar, S}, {2, "producer_name", kScalar, S}, {3, "producer_version", kScalar, S},
    {4, "domain", kScalar, S}, {5, "model_version", kScalar, S}, {6, "doc_string", kScalar, S},
    {7, "graph", Msg::Graph, S}, {8, "opset_import", Msg::OperatorSetId, R},
    {14, "metadata_props", Msg::StringStringEntry, R}, {20, "training_info", Msg::TrainingInfo, R},
    {25, "functions", Msg::Function, R}, {26, "configuration", kScalar, R, Support::refused}};
constexpr FieldSpec kNode[] = {
    {1, "input", kScalar, R}, {2, "output", kScalar, R}, {3, "name", kScalar, S}, {4, "op_type", kScalar, S},
    {5, "attribute", Msg::Attribute, R}, {6, "doc_string", kScalar, S}, {7, "domain", kScalar, S},
    {8, "overload", kScalar, S, Support::newer}, {9, "metadata_props", Msg::StringStringEntry, R, Support::newer},
    {10, "device_configurations", kScalar, R, Support::refused}};
constexpr FieldSpec kOperatorSetId[] = {{1, "domain", kScalar, S}, {2, "version", kScalar, S}};
constexpr FieldSpec kSparseTensor[] = {{1, "values", Msg::Tensor, S}, {2, "indices", Msg::Tensor, S}, {3, "dims", kScalar, R}};
constexpr FieldSpec kStringStringEntry[] = {{1, "key", kScalar, S}, {2, "value", kScalar, S}};
constexpr FieldSpec kTensorAnnotation[] = {{1, "tensor_name", kScalar, S},
                                           {2, "quant_parameter_tensor_names", Msg::StringStringEntry, R}};
constexpr FieldSpec kTensor[] = {
    {1, "dims", kScalar, R}, {2, "data_type", kScalar, S}, {3, "segment", Msg::TensorSegment, S},
    {4, "float_data", kScalar, R}, {5, "int32_data", kScalar, R}, {6, "string_data", kScalar, R},
    {7, "int64_data", kScalar, R}, {8, "name", kScalar, S}, {9, "raw_data", kScalar, S},
    {10, "double_data", kScalar, R}, {11, "uint64_data", kScalar, R}, {12, "doc_string", kScalar, S},
    {13, "external_data", Msg::StringStringEntry, R}, {14, "data_location", kScalar, S},
    {16, "metadata_props", Msg::StringStringEntry, R, Support::newer}};
constexpr FieldSpec kTensorSegment[] = {{1, "begin", kScalar, S}, {2, "end", kScalar, S}};
constexpr FieldSpec kTensorShape[] = {{1, "dim", Msg::TensorShapeDimension, R}};
constexpr FieldSpec kTensorShapeDimension[] = {{1, "dim_value", kScalar, S}, {2, "dim_param", kScalar, S},
                                               {3, "denotation", kScalar, S}};
constexpr FieldSpec kTrainingInfo[] = {
    {1, "initialization", Msg::Graph, S}, {2, "algorithm", Msg::Graph, S},
    {3, "initialization_binding", Msg::StringStringEntry, R}, {4, "update_binding", Msg::StringStringEntry, R}};
constexpr FieldSpec kType[] = {
    {1, "tensor_type", Msg::TypeTensor, S}, {4, "sequence_type", Msg::TypeSequence, S}, {5, "map_type", Msg::TypeMap, S},
    {6, "denotation", kScalar, S}, {8, "sparse_tensor_type", Msg::TypeSparseTensor, S},
    {9, "optional_type", Msg::TypeOptional, S}};
constexpr FieldSpec kTypeMap[] = {{1, "key_type", kScalar, S}, {2, "value_type", Msg::Type, S}};
constexpr FieldSpec kTypeOptional[] = {{1, "elem_type", Msg::Type, S}};
constexpr FieldSpec kTypeSequence[] = {{1, "elem_type", Msg::Type, S}};
constexpr FieldSpec kTypeSparseTensor[] = {{1, "elem_type", kScalar, S}, {2, "shape", Msg::TensorShape, S}};
constexpr FieldSpec kTypeTensor[] = {{1, "elem_type", kScalar, S}, {2, "shape", Msg::TensorShape, S}};
constexpr FieldSpec kValueInfo[] = {{1, "name", kScalar, S}, {2, "type", Msg::Type, S}, {3, "doc_string", kScalar, S},
                                    {4, "metadata_props", Msg::StringStringEntry, R, Support::newer}};

struct MessageSpec {
  const char* name;
  const FieldSpec* begin;
  const FieldSpec* end;
};
template <std::size_t N>
constexpr MessageSpec spec(const char* name, const FieldSpec (&fields)[N]) {
  return {name, fields, fields + N};
}
// In Msg's order.
constexpr MessageSpec kMessages[] = {
    spec("AttributeProto", kAttribute), spec("FunctionProto", kFunction), spec("GraphProto", kGraph),
    spec("ModelProto", kModel), spec("NodeProto", kNode), spec("OperatorSetIdProto", kOperatorSetId),
    spec("SparseTensorProto", kSparseTensor), spec("StringStringEntryProto", kStringStringEntry),
    spec("TensorAnnotation", kTensorAnnotation), spec("TensorProto", kTensor), spec("TensorProto.Segment", kTensorSegment),
    spec("TensorShapeProto", kTensorShape), spec("TensorShapeProto.Dimension", kTensorShapeDimension),
    spec("TrainingInfoProto", kTrainingInfo), spec("TypeProto", kType), spec("TypeProto.Map", kTypeMap),
    spec("TypeProto.Optional", kTypeOptional), spec("TypeProto.Sequence", kTypeSequence),
    spec("TypeProto.SparseTensor", kTypeSparseTensor), spec("TypeProto.Tensor", kTypeTensor),
    spec("ValueInfoProto", kValueInfo)};
static_assert(std::size(kMessages) == static_cast<std::size_t>(Msg::scalar), "one spec per message, in Msg's order");

constexpr int kLengthDelimited = 2;

// One field of a message: its number, wire type and, when length-delimited, its bytes.
struct Field {
  std::uint64_t number;
  int wire;
  std::string_view bytes;
};

// Reads the fields of one message's bytes in order; false at the end, or at malformed bytes
// (then `malformed` is set).
struct Fields {
  std::string_view rest;
  bool malformed = false;

  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && !rest.empty(); shift += 7) {
      const auto byte = static_cast<unsigned char>(rest.front());
      rest.remove_prefix(1);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  bool skip(std::uint64_t n) {
    if (n > rest.size()) return false;
    rest.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }
  bool next(Field& f) {
    if (rest.empty()) return false;
    std::uint64_t key = 0, value = 0;
    malformed = true;
    if (!varint(key)) return false;
    f.number = key >> 3;
    f.wire = static_cast<int>(key & 7);
    f.bytes = {};
    if (f.number == 0) return false;
    switch (f.wire) {
      case 0: if (!varint(value)) return false; break;
      case 1: if (!skip(8)) return false; break;
      case 5: if (!skip(4)) return false; break;
      case kLengthDelimited:
        if (!varint(value) || value > rest.size()) return false;
        f.bytes = rest.substr(0, static_cast<std::size_t>(value));
        rest.remove_prefix(static_cast<std::size_t>(value));
        break;
      default: return false;  // groups (3, 4), which ONNX never uses, and invalid types
    }
    malformed = false;
    return true;
  }
};

std::string unreadable(std::string_view bytes, Msg type, const std::string& path, int depth) {
  const MessageSpec& m = kMessages[static_cast<int>(type)];
  if (depth > 100) return path + " nests messages over 100 deep (protobuf's limit)";
  std::vector<int> seen(static_cast<std::size_t>(m.end - m.begin), 0);  // occurrences, for the index
  Fields fields{bytes};
  Field f{};
  while (fields.next(f)) {
    const FieldSpec* s = m.begin;
    while (s != m.end && static_cast<std::uint64_t>(s->number) != f.number) ++s;
    if (s == m.end)
      return path + " holds field " + std::to_string(f.number) + " of onnx." + m.name +
             ", which kten does not know (a newer ONNX IR than 13?)";
    if (s->support == Support::refused)
      return path + " sets " + m.name + "." + s->name + " (IR 11), which kten does not support";
    const int index = seen[static_cast<std::size_t>(s - m.begin)]++;
    if (s->message == Msg::scalar) continue;
    const std::string at = path + "." + s->name + (s->repeated ? "[" + std::to_string(index) + "]" : "");
    if (f.wire != kLengthDelimited) return at + " is not a message (protobuf wire type " + std::to_string(f.wire) + ")";
    std::string why = unreadable(f.bytes, s->message, at, depth + 1);
    if (!why.empty()) return why;
  }
  if (fields.malformed) return path + " is not a well-formed protobuf message";
  return {};
}

}  // namespace

std::string unreadable_field(std::string_view model_bytes, const std::string& path) {
  return unreadable(model_bytes, Msg::Model, path, 0);
}

std::vector<std::string> length_delimited_fields(std::string_view message_bytes, int number) {
  std::vector<std::string> out;
  Fields fields{message_bytes};
  Field f{};
  while (fields.next(f))
    if (f.number == static_cast<std::uint64_t>(number) && f.wire == kLengthDelimited) out.emplace_back(f.bytes);
  return out;
}

}  // namespace kten::onnx::detail
