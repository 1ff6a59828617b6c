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

namespace onnx {
class ModelProto;
}

namespace kten::onnx::detail {

/// \brief One attribute of a node, parsed (the kinds ONNX has that kten's ops read).
struct Attribute {
  enum Kind { integer, real, text, integers, reals, tensor } kind = integer;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  Tensor t;  // on cpu()
};

struct Node;

/// \brief What one call of an operator sees: its inputs (undefined where an optional one is
/// absent), for each the host copy when the planner knows its values on the host (a constant, or
/// shape arithmetic), and the node's attributes.
struct Call {
  const Node& node;
  std::vector<Tensor> in;
  std::vector<Tensor> host;  // per input: a cpu() tensor when known on the host, else undefined
  bool training = false;
  Device device;             // where new tensors go: the model's device, or cpu() for a host node
  std::uint64_t* dropout_calls = nullptr;  // the model's dropout counter (masks differ call to call)
  std::uint64_t seed = 0;

  /// \brief Input i, which must be present.
  const Tensor& at(std::size_t i) const;
  /// \brief True when input i is given.
  bool has(std::size_t i) const { return i < in.size() && in[i].defined(); }
  /// \brief Input i's values as integers, read on the host (a device value is read back).
  std::vector<std::int64_t> ints(std::size_t i) const;
  /// \brief Input i's one value as a double, read on the host.
  double real(std::size_t i) const;
  /// \brief Attribute `name`, or null.
  const Attribute* attr(const std::string& name) const;
  /// \brief Integer attribute, or `fallback` when absent.
  std::int64_t attr_int(const std::string& name, std::int64_t fallback) const;
  /// \brief Real attribute, or `fallback` when absent.
  double attr_real(const std::string& name, double fallback) const;
  /// \brief Integer list attribute, or `fallback` when absent.
  std::vector<std::int64_t> attr_ints(const std::string& name, std::vector<std::int64_t> fallback = {}) const;
  /// \brief The default domain's opset the node was written for (an operator's form can change).
  int opset() const;
  /// \brief "node 'n' (Op)", for messages.
  std::string where() const;
};

/// \brief The default domain's opsets load() reads: 11 to 23 (onnx 1.18). Most operators start at
/// 13 (PyTorch 1.8's exporter), where their forms settled; each row of the table says.
constexpr int kFirstOpset = 11, kLastOpset = 23;

/// \brief One operator kten runs: the opsets it supports, how many inputs and outputs it takes,
/// and its implementation over kten's ops. `check` validates attributes at load (null: none).
struct OpImpl {
  const char* name;
  int first_opset, last_opset;
  int min_inputs, max_inputs;
  int max_outputs;
  bool deterministic;  // may be folded at load when its inputs are constants
  std::vector<Tensor> (*run)(Call& call);
  void (*check)(const Node& node);
  std::uint32_t host_inputs = 0;  // bit i: input i is read on the host (a shape, axes): never copied to the device
};

/// \brief The operator table (op_table.cpp), by ONNX name.
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

/// \brief One node of the plan.
struct Node {
  std::string name;     // the file's name, or "<op>_<index>" when it has none
  std::string op_type;
  int opset = 0;        // the default domain's opset it was written for (a function's own, inlined)
  const OpImpl* impl = nullptr;
  std::vector<int> inputs;   // value indices; -1 for an absent optional input
  std::vector<int> outputs;  // value indices; -1 for an output nobody asked for
  std::map<std::string, Attribute> attributes;
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
