// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: an imported ONNX graph as kten runs it. import.cpp builds it from the file (checks,
// then plans: topological order, constants folded, where each value lives and when it is freed);
// graph.cpp runs it; op_table.cpp maps each ONNX operator onto kten's registered ops. No protobuf
// type appears here but the file's model, kept opaque for re-export.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <kten/onnx.hpp>

#include "ops/onnx_forms.hpp"

namespace onnx {
class ModelProto;
}

namespace kten::onnx::detail {

// An ONNX node's attributes and a call of its operator, as the registry's ONNX forms see them
// (src/ops/onnx_forms.hpp).
using Attribute = ops::OnnxAttribute;
using Call = ops::OnnxCall;
using OpImpl = ops::OnnxImport;
using ops::OnnxAttribute;
using ops::OnnxCall;
using ops::OnnxNode;

/// \brief The default domain's opsets a model may import: 1 to 23 (onnx 1.18). Each operator is
/// read within its own range (most start at 13, PyTorch 1.8's exporter, where their forms
/// settled; a few unchanged ones earlier): each row of the table says.
constexpr int kFirstOpset = 1, kLastOpset = ops::kOnnxLastOpset;

/// \brief The operator table (op_table.cpp): the registry's import forms and the graph language's,
/// by ONNX name.
const std::vector<OpImpl>& op_table();
/// \brief The operator named `op_type`, or null.
const OpImpl* find_impl(const std::string& op_type);

/// \brief Where a value comes from, which decides where it lives.
enum class Source {
  input,     // a graph input
  parameter, // a float initializer (a registered parameter)
  constant,  // known at load: an integer initializer, a Constant, a folded node
  host,      // computed per call on the host from constants and tensor metadata (Shape)
  device,    // computed per call on the model's device
};

/// \brief One named value of the graph.
struct Value {
  std::string name;
  Source source = Source::device;
  Tensor constant{};       // Source::constant: the value on cpu()
  Tensor on_device{};      // Source::constant: its copy on the model's device
  Tensor parameter{};      // Source::parameter: the registered tensor (the module's handle)
  bool buffer = false;     // Source::parameter read as running statistics: registered as a buffer
  int last_use = -1;       // the last node (plan order) that reads it; -1: none, or a graph output
  bool output = false;     // a graph output: never freed
};

/// \brief One node of the plan: what its operator's forms see (OnnxNode), and the plan's own.
struct Node : OnnxNode {
  const OpImpl* impl = nullptr;
  std::vector<int> inputs;   // value indices; -1 for an absent optional input
  bool on_host = false;      // every input is a constant or a host value: runs on cpu()
  std::vector<int> frees;    // values last used here (or never), released once it has run
};

/// \brief A declared graph input: its value, dtype and shape (-1 for a symbolic extent).
struct Input {
  int value;
  DType dtype;
  Shape shape;
};

/// \brief The planned graph.
struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // in execution order; folded nodes removed
  std::vector<Input> inputs;
  std::vector<int> outputs;
  int opset = 0;
  Device device = cpu();
  bool trained_export = false;      // a node asks for training mode
  std::uint64_t dropout_calls = 0;  // masks drawn so far
  std::uint64_t seed = 0;           // of the dropout masks
  std::shared_ptr<::onnx::ModelProto> proto;  // the file's model, for save()
  std::string path;                            // for messages
};

/// \brief Runs `graph` on `inputs` (checked by the caller against graph.inputs).
std::vector<Tensor> run_graph(Graph& graph, const std::vector<Tensor>& inputs, bool training);

/// \brief ONNX's element type code for a kten dtype (1 float, 11 double, 7 int64, 9 bool).
int onnx_dtype(DType dtype);
/// \brief kten's dtype for an ONNX element type code; false when kten has none.
bool kten_dtype(int code, DType& dtype);
/// \brief True when Debian 12's onnx 1.12 checker can judge `model`: IR 8 and opset 17 at most,
/// no model-local functions (it refuses anything newer, whatever its merit).
bool checker_judges(const ::onnx::ModelProto& model);
/// \brief ONNX's name of an element type code ("FLOAT8E4M3FN"), the ones newer than onnx 1.12 included.
std::string onnx_type_name(int code);

}  // namespace kten::onnx::detail
