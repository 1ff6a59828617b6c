// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// An op's ONNX forms, declared in its registry entry (registry.hpp) beside its forward and its
// gradient: the ONNX operators load() maps onto the op (OnnxImport: the operator's name, its opset
// range, its attributes checked at load and read at run) and the nodes save() writes where the
// op's forward recorded itself on the tape (OnnxExport). No protobuf type appears here: src/onnx
// reads and writes the files, plans the graph and drives these forms; its own table holds only the
// operators of the graph language that no registered op computes (Constant, Shape, Dropout, ...).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/tensor.hpp>

#include "autograd/op_attrs.hpp"

namespace kten::ops {

/// \brief The default domain's last opset kten reads and writes (onnx 1.18's).
constexpr int kOnnxLastOpset = 23;

/// \brief One attribute of an ONNX node, parsed (the kinds ONNX has that kten's ops read).
struct OnnxAttribute {
  enum Kind { integer, real, text, integers, reals, tensor } kind = integer;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  Tensor t;  // on cpu()
};

/// \brief What an operator's load-time check sees of its node.
struct OnnxNode {
  std::string name;  // the file's name, or "<op>_<index>" when it has none
  std::string op_type;
  int opset = 0;  // the default domain's opset it was written for (a function's own, inlined)
  std::map<std::string, OnnxAttribute> attributes;
  std::vector<int> outputs;  // value indices; -1 for an output nobody asked for
};

/// \brief What one call of an operator sees: its inputs (undefined where an optional one is
/// absent), for each the host copy when the planner knows its values on the host (a constant, or
/// shape arithmetic), and the node's attributes.
struct OnnxCall {
  const OnnxNode& node;
  std::vector<Tensor> in;
  std::vector<Tensor> host;  // per input: a cpu() tensor when known on the host, else undefined
  bool training = false;
  Device device;  // where new tensors go: the model's device, or cpu() for a host node
  std::uint64_t* dropout_calls = nullptr;  // the model's dropout counter (masks differ call to call)
  std::uint64_t seed = 0;

  /// \brief Input i, which must be present.
  const Tensor& at(std::size_t i) const;
  /// \brief True when input i is given.
  bool has(std::size_t i) const { return i < in.size() && in[i].defined(); }
  /// \brief True when input i's values are known on the host (a constant or shape arithmetic).
  bool on_host(std::size_t i) const { return i < host.size() && host[i].defined(); }
  /// \brief Input i's values as integers, read on the host (a device value is read back).
  std::vector<std::int64_t> ints(std::size_t i) const;
  /// \brief Input i's one integer (Trilu's k, CumSum's axis, TopK's K), read on the host; a
  /// ShapeError naming it as `what` when it holds another count of values.
  std::int64_t one_int(std::size_t i, const char* what) const;
  /// \brief Input i's one value as a double, read on the host.
  double real(std::size_t i) const;
  /// \brief Input i's values as doubles, read on the host.
  std::vector<double> reals(std::size_t i) const;
  /// \brief Attribute `name`, or null.
  const OnnxAttribute* attr(const std::string& name) const;
  /// \brief Integer attribute, or `fallback` when absent.
  std::int64_t attr_int(const std::string& name, std::int64_t fallback) const;
  /// \brief Real attribute, or `fallback` when absent.
  double attr_real(const std::string& name, double fallback) const;
  /// \brief Integer list attribute, or `fallback` when absent.
  std::vector<std::int64_t> attr_ints(const std::string& name, std::vector<std::int64_t> fallback = {}) const;
  /// \brief String attribute, or `fallback` when absent.
  std::string attr_text(const std::string& name, const std::string& fallback) const;
  /// \brief The default domain's opset the node was written for (an operator's form can change).
  int opset() const { return node.opset; }
  /// \brief "node 'n' (Op)", for messages.
  std::string where() const;
};

/// \brief An ONNX operator load() maps onto a registered op: its opsets, how many inputs and
/// outputs it takes, and its implementation over kten's ops. `check` validates attributes at load
/// (null: none).
struct OnnxImport {
  const char* op_type;
  int first_opset, last_opset;
  int min_inputs, max_inputs;
  int max_outputs;
  bool deterministic;  // may be folded at load when its inputs are constants
  std::vector<Tensor> (*run)(OnnxCall& call);
  void (*check)(const OnnxNode& node) = nullptr;
  std::uint32_t host_inputs =
      0;  // bit i: input i is read on the host (a shape, axes): never copied to the device
};

/// \brief An attribute of a node save() writes.
struct OnnxAttr {
  enum Kind { integer, integers, real, text } kind;
  std::string name;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
};
/// \brief An integer attribute.
OnnxAttr attr_i(std::string name, std::int64_t v);
/// \brief An integer list attribute.
OnnxAttr attr_is(std::string name, std::vector<std::int64_t> v);
/// \brief A float attribute.
OnnxAttr attr_f(std::string name, double v);
/// \brief A string attribute.
OnnxAttr attr_s(std::string name, std::string v);

/// \brief The graph save() is writing: nodes with names of their own, constants.
class OnnxWriter {
 public:
  virtual ~OnnxWriter() = default;
  /// \brief A node of type `op` over `inputs` ("" for an absent optional one) with `outputs`
  /// outputs; the first output's name (the others, which nothing reads, are "<it>_<i>").
  virtual std::string node(const char* op, const std::vector<std::string>& inputs,
                           const std::vector<OnnxAttr>& attrs, int outputs) = 0;
  /// \brief `value` as a Constant node (a float one stays a constant at load, never a parameter).
  virtual std::string constant(const Tensor& value) = 0;
  /// \brief A 1-D int64 constant (shapes, axes, pads).
  std::string ints(const std::vector<std::int64_t>& v);
  /// \brief A 0-d constant of `dtype`.
  std::string scalar(double v, DType dtype);
};

/// \brief One op the tape recorded during save()'s traced call. The handles keep every tensor
/// alive until the graph is written, so no TensorImpl address is reused for another tensor.
struct TracedOp {
  std::string name;  // "kten::conv2d"
  Tensor out;
  std::vector<Tensor> in;
  OpAttrs attrs;
};

/// \brief What one op's export form sees: the traced op, its inputs' value names ("" for an
/// undefined tensor), the writer and the file's opset.
struct OnnxEmit {
  OnnxWriter& w;
  const TracedOp& op;
  std::vector<std::string> in;
  int opset;  // a few forms changed (a reduction's axes are an input from 18, Gelu is an op from 20)

  /// \brief A node (OnnxWriter::node).
  std::string node(const char* type, const std::vector<std::string>& inputs,
                   const std::vector<OnnxAttr>& attrs = {}, int outputs = 1) {
    return w.node(type, inputs, attrs, outputs);
  }
  /// \brief Traced input i.
  const Tensor& t(std::size_t i) const { return op.in.at(i); }
  /// \brief The recorded integer attribute k.
  std::int64_t i(std::size_t k) const { return op.attrs.ints.at(k); }
  /// \brief The recorded real attribute k.
  double r(std::size_t k) const { return op.attrs.reals.at(k); }
  /// \brief A 0-d constant of the first input's dtype (the scalar operand of x + s).
  std::string scalar(double v) { return w.scalar(v, t(0).dtype()); }
  /// \brief The recorded integers [first, first + n).
  std::vector<std::int64_t> ints(std::size_t first, std::size_t n) const;
  /// \brief A kten::Error saying why this op has no ONNX form (save() adds the op and the module).
  [[noreturn]] void refuse(const std::string& why) const;
};

/// \brief What save() writes where the tape recorded `traced` ("kten::relu"): the output's name.
struct OnnxExport {
  const char* traced;
  std::function<std::string(OnnxEmit&)> write;
};

// --- helpers the forms share -------------------------------------------------------------------

/// \brief An axis of a rank-`rank` tensor, negative counting from the end; ShapeError outside.
int onnx_axis(const OnnxCall& c, std::int64_t axis, int rank);
/// \brief ONNX: an axis named twice (-1 and rank - 1 included) is a ShapeError.
void refuse_repeated_axes(const OnnxCall& c, const std::vector<int>& sorted);
/// \brief Runs the registered op `name` (a table built once: find_op searches).
Tensor registered(std::string_view name, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {});
/// \brief Runs `f` in float64 when the inputs are int64 (ONNX's integer arithmetic on shapes),
/// converting the result back (float -> int64 truncates toward zero, as ONNX's integer Div).
Tensor onnx_numeric(const std::vector<Tensor>& inputs,
                    const std::function<Tensor(const std::vector<Tensor>&)>& f);
/// \brief An attribute's string at load (before any call exists), or `fallback`.
std::string node_text(const OnnxNode& n, const std::string& name, const std::string& fallback);
/// \brief An attribute's integer at load, or `fallback`.
std::int64_t node_int(const OnnxNode& n, const std::string& name, std::int64_t fallback);
/// \brief At load: the integer attribute `name` (`fallback` when absent) is 0 or 1, else a
/// FormatError naming it and its value.
void check_flag(const OnnxNode& n, const char* name, std::int64_t fallback);
/// \brief FormatError: "node 'n' (Op): <what> is not supported".
[[noreturn]] void onnx_refuse(const OnnxNode& n, const std::string& what);
/// \brief FormatError: "node 'n' (Op): <what>".
[[noreturn]] void onnx_invalid(const OnnxNode& n, const std::string& what);
/// \brief An import form of one input and output that runs the registered op `Name` (elementwise;
/// int64 shape arithmetic through float64).
template <const char* Name>
std::vector<Tensor> onnx_unary(OnnxCall& c) {
  return {onnx_numeric({c.at(0)}, [](const std::vector<Tensor>& x) { return registered(Name, x, {}); })};
}
/// \brief The same for two inputs.
template <const char* Name>
std::vector<Tensor> onnx_binary(OnnxCall& c) {
  return {
      onnx_numeric({c.at(0), c.at(1)}, [](const std::vector<Tensor>& x) { return registered(Name, x, {}); })};
}
/// \brief An export form writing one node of `type` over the op's inputs.
OnnxExport onnx_node_of(const char* traced, const char* type);
/// \brief An export form writing `x op s` (or with `left`, `s op x`) for a recorded scalar s.
OnnxExport onnx_with_scalar(const char* traced, const char* type, bool left = false);

// --- element types (ONNX's TensorProto codes, the ones kten holds) ---

/// \brief kten's dtype for an ONNX element type code (1 float, 11 double, 7 int64, 9 bool); false
/// when kten has none.
bool onnx_element_dtype(int code, DType& dtype);
/// \brief ONNX's element type code for a kten dtype.
int onnx_element_code(DType dtype);

// --- grids: the window attributes of convolutions and pooling ---

/// \brief The largest value of a window attribute: far past any real kernel, stride or pad, and
/// small enough that the window arithmetic on an int64 extent cannot overflow.
constexpr std::int64_t kMaxWindow = (std::int64_t{1} << 31) - 1;
/// \brief Checks a convolution's or pooling node's window attributes at load (check_window's
/// comment in onnx_forms.cpp says what); `same_allowed`: auto_pad SAME_UPPER / SAME_LOWER are
/// taken (pads computed from the input by window_of), else refused.
void check_window(const OnnxNode& n, bool same_allowed);
/// \brief The window attributes of a convolution or pooling node over its spatial axes: one value
/// per spatial axis (pads: the begins, then the ends).
struct Window {
  Shape kernel, stride, dilation, begin, end;
  bool symmetric() const { return begin == end; }
  /// \brief Padding kten's pools take themselves: even, and at most half the kernel (PyTorch's
  /// rule); other pads are padded explicitly first.
  bool pool_pads() const {
    for (std::size_t i = 0; i < begin.size(); ++i)
      if (begin[i] != end[i] || 2 * begin[i] > kernel[i]) return false;
    return true;
  }
};
/// \brief The node's window over the spatial axes of `x` (its rank checked by spatial_axes),
/// `kernel` when it names no kernel_shape; auto_pad SAME_UPPER / SAME_LOWER give the pads that
/// make ceil(extent / stride) outputs.
Window window_of(const OnnxCall& c, const Tensor& x, const Shape& kernel);
/// \brief The spatial axes of a channels-first input: 1 to 3, as kten's grid ops take.
int spatial_axes(const OnnxCall& c, const Tensor& x);
/// \brief kten::pad's order, (before, after) pairs from the last axis backwards.
Shape torch_pads(const Shape& begin, const Shape& end);
/// \brief ONNX's pads (every begin, then every end) from per-axis begins and ends.
std::vector<std::int64_t> onnx_pads(const std::vector<std::int64_t>& begin,
                                    const std::vector<std::int64_t>& end);
/// \brief The spatial axes of a traced grid op's (N, C, ...) input, checked to be `spatial`.
int spatial_of(const OnnxEmit& e, int spatial);
/// \brief The precision LayerNormalization, GroupNormalization (21) and RMSNormalization compute
/// in: float (1, the default) or double (11); kten computes in the input's own.
void check_stash_type(const OnnxNode& n);
/// \brief The reductions' import form (reduce.cpp), which the extrema's and logsumexp's rows share.
std::vector<Tensor> onnx_reduce(OnnxCall& c);
/// \brief A reduction's export form (reduce.cpp): `type` over the recorded axes, an attribute
/// before opset 18, an input from it.
OnnxExport onnx_reduction_of(const char* traced, const char* type);

}  // namespace kten::ops
