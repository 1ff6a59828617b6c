// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What the ONNX test files share: a scratch folder of the process's own, a model written node by
// node with the ONNX project's protobuf classes, and the check that load() refuses a file with a
// FormatError saying what is wrong.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <onnx/onnx_pb.h>

#include <kten/onnx.hpp>

#include "support.hpp"

namespace kten::test {

// A folder of this process's own under the temporary directory: the cpu and emulated runs of a
// case may run at once (ctest -j).
inline std::filesystem::path scratch() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("kten-onnx-tests-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Appends field `number` to a message as protobuf wire bytes: length-delimited `bytes`, or a varint.
// The same file results whether the linked onnx classes know the field (1.18 and later know IR 9 to
// 11's) or keep it as an unknown one (1.12), and neither needs protobuf's reflection (1.18 and later
// are built for protobuf-lite).
inline std::string wire_varint(std::uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
template <class Proto>
void add_bytes_field(Proto* m, int number, const std::string& bytes) {
  REQUIRE(m->MergeFromString(wire_varint(static_cast<std::uint64_t>(number) << 3 | 2) + wire_varint(bytes.size()) + bytes));
}
template <class Proto>
void add_varint_field(Proto* m, int number, std::uint64_t v) {
  REQUIRE(m->MergeFromString(wire_varint(static_cast<std::uint64_t>(number) << 3) + wire_varint(v)));
}

// A model of one graph, written node by node.
struct Builder {
  ::onnx::ModelProto model;
  ::onnx::GraphProto* graph;

  explicit Builder(int opset = 17) {
    model.set_ir_version(8);
    model.set_producer_name("kten-tests");
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    graph = model.mutable_graph();
    graph->set_name("test");
  }
  // A float input or output; -1 extents are the symbolic "N".
  static void declare(::onnx::ValueInfoProto* v, const std::string& name, const Shape& shape, int type = 1) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (std::int64_t d : shape) {
      if (d < 0) t->mutable_shape()->add_dim()->set_dim_param("N");
      else t->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  void input(const std::string& name, const Shape& shape, int type = 1) { declare(graph->add_input(), name, shape, type); }
  void output(const std::string& name, const Shape& shape, int type = 1) { declare(graph->add_output(), name, shape, type); }
  ::onnx::TensorProto* floats(const std::string& name, const std::vector<float>& v, const Shape& shape) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (std::int64_t d : shape) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    return t;
  }
  void ints(const std::string& name, const std::vector<std::int64_t>& v) {
    auto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (std::int64_t x : v) t->add_int64_data(x);
  }
  ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                          const std::string& name = "") {
    auto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + out.at(0) : name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_INTS);
    for (std::int64_t x : v) a->add_ints(x);
  }
  static void attr_s(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_STRING);
    a->set_s(v);
  }
  static void attr_f(::onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
    a->set_f(v);
  }
  std::string bytes() const { return model.SerializeAsString(); }
  std::string write(const std::string& file) const {
    const std::string path = (scratch() / file).string();
    test::write_bytes(path, bytes());
    return path;
  }
};

/// \brief load() on the device under test refuses `path` with a FormatError holding every part.
inline void require_load_fails(const std::string& path, const std::vector<std::string>& parts) {
  try {
    (void)kten::onnx::load(path, test::device());
    FAIL("load() accepted " << path);
  } catch (const FormatError& e) {
    for (const auto& part : parts) REQUIRE_THAT(e.what(), Catch::Matchers::ContainsSubstring(part));
  }
}

}  // namespace kten::test
