// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::onnx::save: writes a module as an ONNX model (opset 17, or 18 to 23 on request). An imported Model is its own
// graph with the current parameters, in the mode the model is in. Any other module is traced, as
// torch.onnx.export traces: one forward call on a copy of the example input runs with a tracer on the autograd tape
// (autograd.hpp), which records each op, its inputs, output and attributes; the ops the output
// depends on become ONNX nodes, through a table of one small emitter per kten op. The input is the
// graph input "input", state_dict() tensors are initializers under their own names, any other
// tensor an op reads (computed without the input or the parameters) is a Constant node, so load()
// makes no parameter of it.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <kten/info.hpp>
#include <kten/onnx.hpp>
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/fail.hpp"
#include "graph.hpp"
#include "io/files.hpp"

namespace kten::onnx {

using kten::detail::fail;
using namespace detail;

namespace {

// A tensor's elements as an initializer's raw (little-endian) data.
void fill(::onnx::TensorProto& t, const std::string& name, const Tensor& value) {
  const Tensor host = value.detach().to(cpu()).contiguous();
  t.set_name(name);
  t.set_data_type(onnx_dtype(host.dtype()));
  t.clear_dims();
  for (std::int64_t d : host.shape()) t.add_dims(d);
  t.clear_external_data();
  t.clear_data_location();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int64_data();
  t.clear_int32_data();
  std::string raw;
  switch (host.dtype()) {
    case DType::float32: { auto v = host.to_vector<float>(); raw.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4); break; }
    case DType::float64: { auto v = host.to_vector<double>(); raw.assign(reinterpret_cast<const char*>(v.data()), v.size() * 8); break; }
    case DType::int64: { auto v = host.to_vector<std::int64_t>(); raw.assign(reinterpret_cast<const char*>(v.data()), v.size() * 8); break; }
    case DType::boolean: { auto v = host.to_vector<bool>(); for (bool b : v) raw.push_back(b ? 1 : 0); break; }
  }
  kten::detail::swap_little_endian(raw.data(), static_cast<std::size_t>(host.numel()), host.numel() ? raw.size() / static_cast<std::size_t>(host.numel()) : 1);
  t.set_raw_data(raw);
}

// --- the trace -------------------------------------------------------------------------------------

// One op the tape recorded during the traced call. The handles keep every tensor alive until the
// graph is written, so no TensorImpl address is reused for another tensor meanwhile.
struct TracedOp {
  std::string name;  // "kten::conv2d"
  Tensor out;
  std::vector<Tensor> in;
  ops::OpAttrs attrs;
};

class Trace final : public kten::detail::Tracer {
 public:
  void op(const char* name, const Tensor& out, const std::vector<const Tensor*>& inputs, const ops::OpAttrs& attrs) override {
    TracedOp t{name, out, {}, attrs};
    for (const Tensor* i : inputs) t.in.push_back(*i);
    ops.push_back(std::move(t));
  }
  std::vector<TracedOp> ops;
};

// Grad mode on for the traced call (a caller's NoGradGuard would record nothing), restored after.
struct GradModeOn {
  bool previous = kten::detail::grad_mode_enabled;
  GradModeOn() { kten::detail::grad_mode_enabled = true; }
  ~GradModeOn() { kten::detail::grad_mode_enabled = previous; }
  GradModeOn(const GradModeOn&) = delete;
  GradModeOn& operator=(const GradModeOn&) = delete;
};

// The module's buffers as they were before the traced call, put back after it (also when it
// throws): a call in training mode updates BatchNorm's running statistics, which save() must not.
class KeepBuffers {
 public:
  explicit KeepBuffers(nn::Module& module) {
    NoGradGuard no_grad;
    for (const auto& [name, b] : module.named_buffers())
      if (b.defined()) kept_.emplace_back(b, b.copyto(b.device()));
  }
  ~KeepBuffers() {
    NoGradGuard no_grad;
    for (auto& [buffer, copy] : kept_) {
      try {
        buffer.copy_from(copy);
      } catch (...) {  // a destructor must not throw; the buffers are the module's and were copyable
      }
    }
  }
  KeepBuffers(const KeepBuffers&) = delete;
  KeepBuffers& operator=(const KeepBuffers&) = delete;

 private:
  std::vector<std::pair<Tensor, Tensor>> kept_;
};

// --- writing nodes ---------------------------------------------------------------------------------

// A node attribute: I (integer), Is (integers), F (float), S (string).
struct Attr {
  std::string name;
  ::onnx::AttributeProto_AttributeType type;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
};
Attr I(std::string name, std::int64_t v) { return {std::move(name), ::onnx::AttributeProto_AttributeType_INT, v, 0, "", {}}; }
Attr Is(std::string name, std::vector<std::int64_t> v) {
  return {std::move(name), ::onnx::AttributeProto_AttributeType_INTS, 0, 0, "", std::move(v)};
}
Attr F(std::string name, double v) { return {std::move(name), ::onnx::AttributeProto_AttributeType_FLOAT, 0, v, "", {}}; }
Attr S(std::string name, std::string v) { return {std::move(name), ::onnx::AttributeProto_AttributeType_STRING, 0, 0, std::move(v), {}}; }

// The graph being written: nodes with names of their own, constants.
class GraphWriter {
 public:
  explicit GraphWriter(::onnx::GraphProto& graph) : graph_(graph) {}

  // A node of type `op` over `inputs` ("" for an absent optional one) with `outputs` outputs; the
  // first output's name (the others, which nothing reads, are "<it>_<i>").
  std::string node(const char* op, const std::vector<std::string>& inputs, const std::vector<Attr>& attrs = {},
                   int outputs = 1) {
    ::onnx::NodeProto* n = graph_.add_node();
    const std::string name = "/" + std::string(op) + "_" + std::to_string(count_++);
    n->set_name(name);
    n->set_op_type(op);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(name + "_output");
    for (int i = 1; i < outputs; ++i) n->add_output(name + "_output_" + std::to_string(i));
    for (const Attr& a : attrs) {
      auto* p = n->add_attribute();
      p->set_name(a.name);
      p->set_type(a.type);
      switch (a.type) {
        case ::onnx::AttributeProto_AttributeType_INT: p->set_i(a.i); break;
        case ::onnx::AttributeProto_AttributeType_INTS: for (std::int64_t v : a.ints) p->add_ints(v); break;
        case ::onnx::AttributeProto_AttributeType_FLOAT: p->set_f(static_cast<float>(a.f)); break;
        default: p->set_s(a.s); break;
      }
    }
    return name + "_output";
  }

  // `value` as a Constant node (a float one stays a constant at load, never a parameter).
  std::string constant(const Tensor& value) {
    ::onnx::NodeProto* n = graph_.add_node();
    const std::string name = "/Constant_" + std::to_string(count_++);
    n->set_name(name);
    n->set_op_type("Constant");
    n->add_output(name + "_output");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto_AttributeType_TENSOR);
    fill(*a->mutable_t(), "value", value);
    return name + "_output";
  }
  // A 1-D int64 constant (shapes, axes, pads).
  std::string ints(const std::vector<std::int64_t>& v) { return constant(tensor(v, cpu())); }
  // A 0-d constant of `dtype`.
  std::string scalar(double v, DType dtype) { return constant(full({}, v, cpu(), dtype)); }

  ::onnx::GraphProto& graph() { return graph_; }

 private:
  ::onnx::GraphProto& graph_;
  int count_ = 0;
};

// What one op's emitter sees: the op, its inputs' value names ("" for an undefined tensor), the
// writer.
struct Emit {
  GraphWriter& w;
  const TracedOp& op;
  std::vector<std::string> in;
  int opset;  // the file's: a few forms changed (a reduction's axes are an input from 18, Gelu is an op from 20)

  std::string node(const char* type, const std::vector<std::string>& inputs, const std::vector<Attr>& attrs = {},
                   int outputs = 1) {
    return w.node(type, inputs, attrs, outputs);
  }
  const Tensor& t(std::size_t i) const { return op.in.at(i); }
  std::int64_t i(std::size_t k) const { return op.attrs.ints.at(k); }
  double r(std::size_t k) const { return op.attrs.reals.at(k); }
  // A 0-d constant of the first input's dtype (the scalar operand of x + s).
  std::string scalar(double v) { return w.scalar(v, t(0).dtype()); }
  // attrs.ints[first, first + n)
  std::vector<std::int64_t> ints(std::size_t first, std::size_t n) const {
    if (first + n > op.attrs.ints.size()) throw std::out_of_range("attributes");
    return std::vector<std::int64_t>(op.attrs.ints.begin() + static_cast<std::ptrdiff_t>(first),
                                     op.attrs.ints.begin() + static_cast<std::ptrdiff_t>(first + n));
  }
  // A kten::Error saying why this op has no ONNX form (save() adds the op and the module).
  [[noreturn]] void refuse(const std::string& why) const { fail("", why); }
};

using Row = std::function<std::string(Emit&)>;

Row unary(const char* type) {
  return [type](Emit& e) { return e.node(type, {e.in[0]}); };
}
Row binary(const char* type) {
  return [type](Emit& e) { return e.node(type, {e.in[0], e.in[1]}); };
}
// x op s, or with `left` s op x.
Row with_scalar(const char* type, bool left = false) {
  return [type, left](Emit& e) {
    const std::string s = e.scalar(e.r(0));
    return left ? e.node(type, {s, e.in[0]}) : e.node(type, {e.in[0], s});
  };
}

// ONNX's pads (every begin, then every end) from per-axis begins and ends.
std::vector<std::int64_t> onnx_pads(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& end) {
  std::vector<std::int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  return pads;
}

// The spatial axes of a grid op's (N, C, ...) input; 1 to 3.
int spatial_of(const Emit& e, int spatial) {
  if (e.t(0).ndim() != spatial + 2)
    e.refuse("an unbatched input (shape " + shape_str(e.t(0).shape()) + ") has no ONNX form: give it a batch axis");
  return spatial;
}

// Conv and ConvTranspose: attributes as the registry orders them (conv.cpp).
Row convolution(int dims, bool transposed) {
  return [dims, transposed](Emit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const Shape& w = e.t(1).shape();
    const std::vector<std::int64_t> stride = e.ints(0, n), pad = e.ints(n, n);
    std::vector<Attr> attrs{Is("kernel_shape", Shape(w.begin() + 2, w.end())), Is("strides", stride), Is("pads", onnx_pads(pad, pad))};
    if (transposed) {
      attrs.push_back(Is("output_padding", e.ints(2 * n, n)));
      attrs.push_back(I("group", e.i(3 * n)));
      attrs.push_back(Is("dilations", e.ints(3 * n + 1, n)));
    } else {
      attrs.push_back(Is("dilations", e.ints(2 * n, n)));
      attrs.push_back(I("group", e.i(3 * n)));
    }
    std::vector<std::string> inputs{e.in[0], e.in[1]};
    if (e.in.size() > 2) inputs.push_back(e.in[2]);
    return e.node(transposed ? "ConvTranspose" : "Conv", inputs, attrs);
  };
}

// MaxPool and AveragePool: kernel, stride, padding, then ceil_mode (and count_include_pad).
Row pooling(int dims, bool average) {
  return [dims, average](Emit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const std::vector<std::int64_t> pad = e.ints(2 * n, n);
    std::vector<Attr> attrs{Is("kernel_shape", e.ints(0, n)), Is("strides", e.ints(n, n)), Is("pads", onnx_pads(pad, pad)),
                            I("ceil_mode", e.i(3 * n))};
    if (average) attrs.push_back(I("count_include_pad", e.i(3 * n + 1)));
    return e.node(average ? "AveragePool" : "MaxPool", {e.in[0]}, attrs);
  };
}

// Adaptive average pooling: GlobalAveragePool to one value, else an AveragePool where the output
// divides the input (the bins are then equal windows); other sizes have no ONNX form.
Row adaptive_pooling(int dims) {
  return [dims](Emit& e) {
    spatial_of(e, dims);
    const Shape& x = e.t(0).shape();
    const std::vector<std::int64_t> out = e.ints(0, static_cast<std::size_t>(dims));
    bool global = true, even = true;
    std::vector<std::int64_t> kernel;
    for (int a = 0; a < dims; ++a) {
      const std::int64_t in = x[static_cast<std::size_t>(a) + 2];
      global = global && out[a] == 1;
      even = even && in % out[a] == 0;
      kernel.push_back(in / out[a]);
    }
    if (global) return e.node("GlobalAveragePool", {e.in[0]});
    if (!even)
      e.refuse("output size " + shape_str(out) + " does not divide the input " + shape_str(x) +
               " (ONNX has no adaptive pooling; an AveragePool needs equal windows)");
    return e.node("AveragePool", {e.in[0]}, {Is("kernel_shape", kernel), Is("strides", kernel),
                                             Is("pads", std::vector<std::int64_t>(2 * static_cast<std::size_t>(dims), 0))});
  };
}

// interpolate as Resize: by its scales when it was given them (PyTorch's coordinates follow the
// scales), else to its sizes, with the batch and channel extents taken from the input at run time.
Row resize(int dims) {
  return [dims](Emit& e) {
    spatial_of(e, dims);
    const auto n = static_cast<std::size_t>(dims);
    const std::vector<std::int64_t> sizes = e.ints(0, n);
    const auto mode = static_cast<nn::InterpolateMode>(e.i(n));
    const bool corners = e.i(n + 1) != 0;
    std::vector<Attr> attrs;
    if (mode == nn::InterpolateMode::nearest) {
      attrs = {S("mode", "nearest"), S("coordinate_transformation_mode", "asymmetric"), S("nearest_mode", "floor")};
    } else {
      attrs = {S("mode", "linear"), S("coordinate_transformation_mode", corners ? "align_corners" : "half_pixel")};
    }
    // Scales are float in ONNX: used only when the float scale gives the same extents.
    bool by_scale = e.op.attrs.reals.size() == n;
    std::vector<float> scales{1.f, 1.f};
    for (std::size_t a = 0; by_scale && a < n; ++a) {
      scales.push_back(static_cast<float>(e.r(a)));
      by_scale = std::floor(static_cast<double>(e.t(0).shape()[a + 2]) * static_cast<double>(scales.back())) == static_cast<double>(sizes[a]);
    }
    if (by_scale) return e.node("Resize", {e.in[0], "", e.w.constant(tensor(scales, cpu()))}, attrs);
    const std::string batch_channels = e.node("Shape", {e.in[0]}, {I("start", 0), I("end", 2)});
    const std::string shape = e.node("Concat", {batch_channels, e.w.ints(sizes)}, {I("axis", 0)});
    return e.node("Resize", {e.in[0], "", "", shape}, attrs);
  };
}

// pad: constant, reflect and edge as Pad; circular (which ONNX 17 has not) as each padded axis'
// wrapped ends cut by Slice and joined by Concat.
std::string pad_row(Emit& e) {
  const int rank = e.t(0).ndim();
  const std::vector<std::int64_t>& pads = e.op.attrs.ints;
  const auto mode = static_cast<nn::PaddingMode>(static_cast<int>(e.r(0)));
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0), end(static_cast<std::size_t>(rank), 0);
  for (std::size_t k = 0; 2 * k + 1 < pads.size(); ++k) {  // kten's pairs run from the last axis back
    begin[static_cast<std::size_t>(rank) - 1 - k] = pads[2 * k];
    end[static_cast<std::size_t>(rank) - 1 - k] = pads[2 * k + 1];
  }
  if (mode != nn::PaddingMode::circular) {
    const char* onnx_mode = mode == nn::PaddingMode::reflect ? "reflect" : mode == nn::PaddingMode::replicate ? "edge" : "constant";
    std::vector<std::string> inputs{e.in[0], e.w.ints(onnx_pads(begin, end))};
    if (mode == nn::PaddingMode::zeros) inputs.push_back(e.scalar(e.r(1)));
    return e.node("Pad", inputs, {S("mode", onnx_mode)});
  }
  std::string y = e.in[0];
  for (int a = 0; a < rank; ++a) {
    const auto b = begin[static_cast<std::size_t>(a)], f = end[static_cast<std::size_t>(a)];
    if (b == 0 && f == 0) continue;
    std::vector<std::string> parts;
    const std::string axis = e.w.ints({a});
    if (b > 0) parts.push_back(e.node("Slice", {y, e.w.ints({-b}), e.w.ints({std::numeric_limits<std::int64_t>::max()}), axis}));
    parts.push_back(y);
    if (f > 0) parts.push_back(e.node("Slice", {y, e.w.ints({0}), e.w.ints({f}), axis}));
    y = e.node("Concat", parts, {I("axis", a)});
  }
  return y;
}

// A reshape's target, the batch axis (0) written so that another batch size works: 0 (copy the
// input's) where it kept its extent, -1 (what the other extents leave) where it did not.
std::string reshape_row(Emit& e) {
  const Shape& in = e.t(0).shape();
  std::vector<std::int64_t> shape = e.op.out.shape();
  if (!shape.empty() && !in.empty()) shape[0] = shape[0] == in[0] ? 0 : -1;
  return e.node("Reshape", {e.in[0], e.w.ints(shape)});
}

// expand as Expand, whose broadcast is two-way: 1 keeps the input's extent (the batch's among them).
std::string expand_row(Emit& e) {
  const Shape& in = e.t(0).shape();
  std::vector<std::int64_t> shape = e.op.out.shape();
  const std::size_t lead = shape.size() - in.size();
  for (std::size_t d = lead; d < shape.size(); ++d)
    if (in[d - lead] == shape[d]) shape[d] = 1;
  return e.node("Expand", {e.in[0], e.w.ints(shape)});
}

// batch_norm as BatchNormalization: the running statistics are inputs (buffers at load), the mode
// the call's (training mode has the updated statistics as outputs too, as ONNX requires, which
// nothing reads: load() updates the buffers in place). ONNX's momentum weighs the running value,
// kten's (PyTorch's) the batch's.
std::string batch_norm_row(Emit& e) {
  const Tensor& x = e.t(0);
  if (!e.t(1).defined() || !e.t(2).defined())
    e.refuse("batch statistics without running ones (track_running_stats = false) have no ONNX form");
  const std::int64_t channels = x.shape().at(1);
  const std::string scale = e.t(3).defined() ? e.in[3] : e.w.constant(ones({channels}, cpu(), x.dtype()));
  const std::string shift = e.t(4).defined() ? e.in[4] : e.w.constant(zeros({channels}, cpu(), x.dtype()));
  return e.node("BatchNormalization", {e.in[0], scale, shift, e.in[1], e.in[2]},
                {F("epsilon", e.r(1)), F("momentum", 1.0 - e.r(0)), I("training_mode", e.i(0))}, e.i(0) != 0 ? 3 : 1);
}

// group_norm as PyTorch exports it: InstanceNormalization over (N, G, rest), then the per-channel
// weight and bias.
std::string group_norm_row(Emit& e) {
  const Tensor& x = e.t(0);
  const std::int64_t groups = e.i(0), channels = x.shape().at(1);
  const std::string grouped = e.node("Reshape", {e.in[0], e.w.ints({0, groups, -1})});
  const std::string normal =
      e.node("InstanceNormalization", {grouped, e.w.constant(ones({groups}, cpu(), x.dtype())), e.w.constant(zeros({groups}, cpu(), x.dtype()))},
             {F("epsilon", e.r(0))});
  const std::string y = e.node("Reshape", {normal, e.node("Shape", {e.in[0]})});
  std::vector<std::int64_t> per_channel(static_cast<std::size_t>(x.ndim()) - 1, 1);
  per_channel[0] = channels;
  const std::string per = e.w.ints(per_channel);
  return e.node("Add", {e.node("Mul", {y, e.node("Reshape", {e.in[1], per})}), e.node("Reshape", {e.in[2], per})});
}

// clamp(x, lo, hi) = lo + relu(x - lo) - relu(x - hi): the importer has no Clip, Max or Min.
std::string clamp_row(Emit& e) {
  const double lo = e.r(0), hi = e.r(1);
  std::string y = e.in[0];
  if (std::isfinite(hi)) y = e.node("Sub", {y, e.node("Relu", {e.node("Sub", {e.in[0], e.scalar(hi)})})});
  if (std::isfinite(lo)) y = e.node("Add", {y, e.node("Relu", {e.node("Sub", {e.scalar(lo), e.in[0]})})});
  return std::isfinite(lo) || std::isfinite(hi) ? y : e.node("Identity", {y});
}

// The table: every kten op with an ONNX form, by the name it records.
const std::unordered_map<std::string_view, Row>& rows() {
  static const std::unordered_map<std::string_view, Row> table = [] {
    std::unordered_map<std::string_view, Row> t;
    // Elementwise.
    for (const auto& [name, type] : std::vector<std::pair<const char*, const char*>>{
             {"kten::add", "Add"}, {"kten::sub", "Sub"}, {"kten::mul", "Mul"}, {"kten::div", "Div"}, {"kten::pow", "Pow"},
             {"kten::matmul", "MatMul"}})
      t.emplace(name, binary(type));
    for (const auto& [name, type] : std::vector<std::pair<const char*, const char*>>{
             {"kten::neg", "Neg"}, {"kten::exp", "Exp"}, {"kten::log", "Log"}, {"kten::sqrt", "Sqrt"}, {"kten::abs", "Abs"},
             {"kten::sin", "Sin"}, {"kten::cos", "Cos"}, {"kten::erf", "Erf"}, {"kten::relu", "Relu"},
             {"kten::sigmoid", "Sigmoid"}, {"kten::tanh", "Tanh"}, {"kten::contiguous", "Identity"}, {"kten::copyto", "Identity"}})
      t.emplace(name, unary(type));
    t.emplace("kten::add_scalar", with_scalar("Add"));
    t.emplace("kten::sub_scalar", with_scalar("Sub"));
    t.emplace("kten::rsub_scalar", with_scalar("Sub", true));
    t.emplace("kten::mul_scalar", with_scalar("Mul"));
    t.emplace("kten::div_scalar", with_scalar("Div"));
    t.emplace("kten::rdiv_scalar", with_scalar("Div", true));
    t.emplace("kten::pow_scalar", with_scalar("Pow"));
    t.emplace("kten::fma", [](Emit& e) { return e.node("Add", {e.node("Mul", {e.in[0], e.in[1]}), e.in[2]}); });
    t.emplace("kten::log1p", [](Emit& e) { return e.node("Log", {e.node("Add", {e.in[0], e.scalar(1)})}); });
    t.emplace("kten::expm1", [](Emit& e) { return e.node("Sub", {e.node("Exp", {e.in[0]}), e.scalar(1)}); });
    t.emplace("kten::astype", [](Emit& e) { return e.node("Cast", {e.in[0]}, {I("to", onnx_dtype(e.op.out.dtype()))}); });
    t.emplace("kten::where", [](Emit& e) { return e.node("Where", {e.in.at(2), e.in[0], e.in[1]}); });
    t.emplace("kten::eq", binary("Equal"));
    t.emplace("kten::eq_scalar", with_scalar("Equal"));
    // Activations (before opset 20 no Gelu: x/2 (1 + erf(x / sqrt 2)), as PyTorch exports it).
    t.emplace("kten::gelu", [](Emit& e) {
      if (e.opset >= 20) return e.node("Gelu", {e.in[0]});
      const std::string erf = e.node("Erf", {e.node("Div", {e.in[0], e.scalar(std::sqrt(2.0))})});
      return e.node("Mul", {e.node("Mul", {e.in[0], e.node("Add", {erf, e.scalar(1)})}), e.scalar(0.5)});
    });
    t.emplace("kten::silu", [](Emit& e) { return e.node("Mul", {e.in[0], e.node("Sigmoid", {e.in[0]})}); });
    t.emplace("kten::softplus", [](Emit& e) {  // ONNX's Softplus has beta 1 (and PyTorch's threshold 20 at load)
      if (e.r(0) == 1) return e.node("Softplus", {e.in[0]});
      const std::string beta = e.scalar(e.r(0));
      return e.node("Div", {e.node("Softplus", {e.node("Mul", {e.in[0], beta})}), beta});
    });
    t.emplace("kten::leaky_relu", [](Emit& e) { return e.node("LeakyRelu", {e.in[0]}, {F("alpha", e.r(0))}); });
    t.emplace("kten::clamp", clamp_row);
    t.emplace("kten::dropout", [](Emit& e) {  // recorded only in training mode
      return e.node("Dropout", {e.in[0], e.scalar(e.r(0)), e.w.constant(full({}, 1, cpu(), boolean))});
    });
    // Rows and reductions.
    t.emplace("kten::softmax", [](Emit& e) { return e.node("Softmax", {e.in[0]}, {I("axis", e.i(0))}); });
    t.emplace("kten::log_softmax", [](Emit& e) { return e.node("LogSoftmax", {e.in[0]}, {I("axis", e.i(0))}); });
    t.emplace("kten::sum", [](Emit& e) {
      return e.node("ReduceSum", {e.in[0], e.w.ints(e.op.attrs.ints)}, {I("keepdims", e.op.attrs.keepdim ? 1 : 0)});
    });
    for (const auto& [name, type] : std::vector<std::pair<const char*, const char*>>{{"kten::mean", "ReduceMean"}, {"kten::max", "ReduceMax"}})
      t.emplace(name, [type = type](Emit& e) {
        const Attr keep = I("keepdims", e.op.attrs.keepdim ? 1 : 0);
        if (e.opset >= 18) return e.node(type, {e.in[0], e.w.ints(e.op.attrs.ints)}, {keep});
        return e.node(type, {e.in[0]}, {Is("axes", e.op.attrs.ints), keep});
      });
    t.emplace("kten::layer_norm", [](Emit& e) {
      return e.node("LayerNormalization", {e.in[0], e.in[1], e.in[2]}, {I("axis", -1), F("epsilon", e.r(0))});
    });
    t.emplace("kten::linear", [](Emit& e) {  // x W^T + b: Gemm for a matrix
      const bool bias = e.in.size() > 2;
      if (e.t(0).ndim() == 2) {
        std::vector<std::string> inputs{e.in[0], e.in[1]};
        if (bias) inputs.push_back(e.in[2]);
        return e.node("Gemm", inputs, {I("transB", 1)});
      }
      const std::string y = e.node("MatMul", {e.in[0], e.node("Transpose", {e.in[1]})});
      return bias ? e.node("Add", {y, e.in[2]}) : y;
    });
    // Shapes and views.
    t.emplace("kten::reshape", reshape_row);
    t.emplace("kten::expand", expand_row);
    t.emplace("kten::transpose", [](Emit& e) {
      std::vector<std::int64_t> perm;
      for (int d = 0; d < e.t(0).ndim(); ++d) perm.push_back(d);
      std::swap(perm.at(static_cast<std::size_t>(e.i(0))), perm.at(static_cast<std::size_t>(e.i(1))));
      return e.node("Transpose", {e.in[0]}, {Is("perm", perm)});
    });
    t.emplace("kten::permute", [](Emit& e) { return e.node("Transpose", {e.in[0]}, {Is("perm", e.op.attrs.ints)}); });
    t.emplace("kten::narrow", [](Emit& e) {
      return e.node("Slice", {e.in[0], e.w.ints({e.i(1)}), e.w.ints({e.i(1) + e.i(2)}), e.w.ints({e.i(0)})});
    });
    t.emplace("kten::select", [](Emit& e) {
      return e.node("Gather", {e.in[0], e.w.constant(full({}, static_cast<double>(e.i(1)), cpu(), int64))}, {I("axis", e.i(0))});
    });
    t.emplace("kten::unsqueeze", [](Emit& e) { return e.node("Unsqueeze", {e.in[0], e.w.ints({e.i(0)})}); });
    t.emplace("kten::squeeze", [](Emit& e) { return e.node("Squeeze", {e.in[0], e.w.ints(e.op.attrs.ints)}); });
    t.emplace("kten::cat", [](Emit& e) { return e.node("Concat", e.in, {I("axis", e.i(0))}); });
    // Indexing (the index follows the tensors autograd tracks).
    t.emplace("kten::embedding", [](Emit& e) { return e.node("Gather", {e.in[0], e.in.at(1)}, {I("axis", 0)}); });
    t.emplace("kten::index_select", [](Emit& e) { return e.node("Gather", {e.in[0], e.in.at(1)}, {I("axis", e.i(0))}); });
    t.emplace("kten::gather", [](Emit& e) { return e.node("GatherElements", {e.in[0], e.in.at(1)}, {I("axis", e.i(0))}); });
    for (const char* name : {"kten::scatter_add", "kten::index_add", "kten::scatter_reduce"})
      t.emplace(name, [](Emit& e) {
        if (e.i(1) != 0 || e.i(2) != 1) e.refuse("only the sum including x (scatter_add) has an ONNX form (ScatterElements)");
        return e.node("ScatterElements", {e.in[0], e.in.at(2), e.in[1]}, {I("axis", e.i(0)), S("reduction", "add")});
      });
    // Grids.
    const char* const conv_names[3] = {"kten::conv1d", "kten::conv2d", "kten::conv3d"};
    const char* const conv_t_names[3] = {"kten::conv_transpose1d", "kten::conv_transpose2d", "kten::conv_transpose3d"};
    const char* const max_names[3] = {"kten::max_pool1d", "kten::max_pool2d", "kten::max_pool3d"};
    const char* const avg_names[3] = {"kten::avg_pool1d", "kten::avg_pool2d", "kten::avg_pool3d"};
    const char* const adaptive_names[3] = {"kten::adaptive_avg_pool1d", "kten::adaptive_avg_pool2d", "kten::adaptive_avg_pool3d"};
    for (int d = 1; d <= 3; ++d) {
      t.emplace(conv_names[d - 1], convolution(d, false));
      t.emplace(conv_t_names[d - 1], convolution(d, true));
      t.emplace(max_names[d - 1], pooling(d, false));
      t.emplace(avg_names[d - 1], pooling(d, true));
      t.emplace(adaptive_names[d - 1], adaptive_pooling(d));
    }
    t.emplace("kten::interpolate_linear", resize(1));
    t.emplace("kten::interpolate_bilinear", resize(2));
    t.emplace("kten::interpolate_trilinear", resize(3));
    t.emplace("kten::interpolate_nearest", [](Emit& e) { return resize(e.t(0).ndim() - 2)(e); });
    t.emplace("kten::pad", pad_row);
    t.emplace("kten::batch_norm", batch_norm_row);
    t.emplace("kten::group_norm", group_norm_row);
    t.emplace("kten::instance_norm", [](Emit& e) {
      return e.node("InstanceNormalization", {e.in[0], e.in[1], e.in[2]}, {F("epsilon", e.r(0))});
    });
    return t;
  }();
  return table;
}

// A graph input or output of `dtype` and `shape`, axis 0 the dynamic "batch".
void declare(::onnx::ValueInfoProto& v, const std::string& name, DType dtype, const Shape& shape) {
  v.set_name(name);
  auto* type = v.mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx_dtype(dtype));
  auto* dims = type->mutable_shape();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i == 0) dims->add_dim()->set_dim_param("batch");
    else dims->add_dim()->set_dim_value(shape[i]);
  }
}

// The graph of one traced call of `module` on `example`.
class Exporter {
 public:
  Exporter(const std::string& op, nn::Module& module, ::onnx::GraphProto& graph, int opset)
      : op_(op), module_(module), w_(graph), opset_(opset) {}

  void write(const Tensor& example) {
    Tensor x = example.detach();  // a handle of its own: its identity names the graph input
    if (is_floating(x.dtype())) x.requires_grad_();  // every op on it records
    Trace trace;
    Tensor y;
    {
      const KeepBuffers keep(module_);
      const GradModeOn grad_mode;
      const kten::detail::TraceScope scope(&trace);
      y = module_(x);
    }
    names_[x.impl().get()] = "input";
    input_ = x;
    for (const auto& [name, t] : module_.state_dict())
      if (t.defined()) state_.emplace_back(name, t);

    // Which op produced each input (as of that op: an impl written twice is two values), then
    // the ops the output depends on, the only ones written.
    const std::vector<TracedOp>& ops = trace.ops;
    std::unordered_map<const void*, int> producer;
    std::vector<std::vector<int>> sources(ops.size());
    for (std::size_t k = 0; k < ops.size(); ++k) {
      for (const Tensor& t : ops[k].in) {
        const auto it = t.defined() ? producer.find(t.impl().get()) : producer.end();
        sources[k].push_back(it == producer.end() ? -1 : it->second);
      }
      producer[ops[k].out.impl().get()] = static_cast<int>(k);
    }
    const auto last = producer.find(y.impl().get());
    std::vector<bool> needed(ops.size(), false);
    std::vector<int> stack;
    if (last != producer.end()) stack.push_back(last->second);
    while (!stack.empty()) {
      const int k = stack.back();
      stack.pop_back();
      if (needed[static_cast<std::size_t>(k)]) continue;
      needed[static_cast<std::size_t>(k)] = true;
      for (int s : sources[static_cast<std::size_t>(k)])
        if (s >= 0) stack.push_back(s);
    }

    std::vector<std::string> outputs(ops.size());
    bool reads_input = false;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (!needed[k]) continue;
      const TracedOp& o = ops[k];
      const auto row = rows().find(o.name);
      if (row == rows().end()) fail(op_, o.name, " (in module '", module_.name(), "') has no ONNX form");
      Emit e{w_, o, {}, opset_};
      for (std::size_t i = 0; i < o.in.size(); ++i) {
        const int s = sources[k][i];
        e.in.push_back(s >= 0 ? outputs[static_cast<std::size_t>(s)] : external(o.in[i]));
        reads_input = reads_input || e.in.back() == "input";
      }
      try {
        outputs[k] = row->second(e);
      } catch (const std::out_of_range&) {
        fail(op_, o.name, " (in module '", module_.name(), "') was recorded without the attributes its ONNX form needs (a bug in kten)");
      } catch (const Error& err) {
        kten::detail::fail_within(op_ + ": " + o.name + " (in module '" + module_.name() + "')", err);
      }
    }
    const bool same = y.impl() == x.impl();
    if (last == producer.end() && !same)
      fail(op_, "the output of ", module_.name(), " was not computed from its input or parameters by recorded ops ",
           "(under a NoGradGuard, or detached): there is no graph to write");
    if (!same && !reads_input)
      fail(op_, "the output of ", module_.name(), " does not depend on its input as traced (arithmetic on an integer ",
           "input is not recorded, and would be frozen into constants)");

    ::onnx::GraphProto& graph = w_.graph();
    graph.set_name(module_.name());
    declare(*graph.add_input(), "input", x.dtype(), x.shape());
    // The output has a name of its own: an Identity, also when the module returned its input.
    ::onnx::NodeProto* out = graph.add_node();
    out->set_name("/output_identity");
    out->set_op_type("Identity");
    out->add_input(same ? "input" : outputs[static_cast<std::size_t>(last->second)]);
    out->add_output("output");
    declare(*graph.add_output(), "output", y.dtype(), y.shape());
  }

 private:
  // The name of a tensor no traced op produced: the input, a state_dict() tensor (an initializer
  // under its name; a handle of its own over the same elements counts), else a Constant node.
  std::string external(const Tensor& t) {
    if (!t.defined()) return "";
    const void* key = t.impl().get();
    if (const auto it = names_.find(key); it != names_.end()) return it->second;
    for (const auto& [name, s] : state_)
      if (s.impl() == t.impl() || (s.storage() == t.storage() && s.shape() == t.shape() && s.strides() == t.strides() &&
                                   s.offset() == t.offset() && s.dtype() == t.dtype())) {
        if (written_.insert(name).second) fill(*w_.graph().add_initializer(), name, s);
        return names_[key] = name;
      }
    // A view of the input the tape did not record (an integer input's reshape: integer ops are not
    // recorded) would be frozen into a constant of the example's values: refused.
    if (t.storage() && t.storage() == input_.storage())
      fail(op_, "an op reads a view of the input (shape ", t.shape(), ") that was not traced: views and arithmetic on an ",
           input_.dtype(), " input are not recorded and would be frozen into constants; index with the input as it is");
    return names_[key] = w_.constant(t);
  }

  std::string op_;
  nn::Module& module_;
  GraphWriter w_;
  int opset_;
  Tensor input_;  // the traced copy of the example input
  std::unordered_map<const void*, std::string> names_;
  std::vector<std::pair<std::string, Tensor>> state_;
  std::unordered_set<std::string> written_;
};

// An imported graph written in the mode its module is in, not the file's: a model exported in
// training mode and switched to eval() must deploy with running statistics and no dropout (ONNX
// Runtime runs the file's mode). BatchNormalization: training_mode from opset 14; at opset 13 the
// mode is its outputs (training: the running and saved statistics, inference: Y alone), so an
// inference node gets four new outputs in training and a training node loses its four in
// inference (refused where another node or the graph reads them). Dropout: its training_mode
// input, a bool initializer of kten's.
void write_mode(::onnx::GraphProto& g, int opset, bool training, const std::string& op) {
  std::unordered_set<std::string> read, names;
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) read.insert(in);
    for (const auto& out : n.output()) names.insert(out);
  }
  for (const auto& out : g.output()) read.insert(out.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& in : g.input()) names.insert(in.name());
  // A name no value of the graph has: `base`, else base_1, base_2, ...
  const auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  std::string mode_name;  // the Dropout's training_mode initializer, made at its first use
  for (int k = 0; k < g.node_size(); ++k) {
    ::onnx::NodeProto& n = *g.mutable_node(k);
    const std::string where = "node '" + (n.name().empty() ? n.op_type() + "_" + std::to_string(k) : n.name()) + "'";
    if (n.op_type() == "BatchNormalization" && opset >= 14) {
      ::onnx::AttributeProto* mode = nullptr;
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "training_mode") mode = &a;
      if (!mode) mode = n.add_attribute();
      mode->set_name("training_mode");
      mode->set_type(::onnx::AttributeProto_AttributeType_INT);
      mode->set_i(training ? 1 : 0);
      if (!training)
        while (n.output_size() > 1 && !read.count(n.output(n.output_size() - 1))) n.mutable_output()->RemoveLast();
      if (!training && n.output_size() > 1)
        fail(op, where, " (BatchNormalization): its running statistics' outputs are read, which inference mode does not give");
    } else if (n.op_type() == "BatchNormalization") {
      if (training && n.output_size() == 1)
        for (const char* out : {"running_mean", "running_var", "saved_mean", "saved_var"}) n.add_output(fresh(n.output(0) + "_" + out));
      if (!training) {
        for (int i = 1; i < n.output_size(); ++i)
          if (read.count(n.output(i)))
            fail(op, where, " (BatchNormalization, opset 13): its statistics' outputs are read, which inference mode does not give");
        while (n.output_size() > 1) n.mutable_output()->RemoveLast();
      }
    } else if (n.op_type() == "Dropout") {
      if (mode_name.empty()) {
        mode_name = fresh(training ? "kten_training_mode_true" : "kten_training_mode_false");
        auto* t = g.add_initializer();
        t->set_name(mode_name);
        t->set_data_type(::onnx::TensorProto_DataType_BOOL);
        t->set_raw_data(std::string(1, training ? '\1' : '\0'));
      }
      while (n.input_size() < 2) n.add_input("");  // the ratio: absent, its default 0.5
      if (n.input_size() < 3) n.add_input(mode_name);
      else n.set_input(2, mode_name);
    }
  }
}

}  // namespace

void save(const std::string& path, nn::Module& module, const std::vector<Tensor>& example_inputs) {
  save(path, module, example_inputs, 0);
}

void save(const std::string& path, nn::Module& module, const std::vector<Tensor>& example_inputs, int opset) {
  const std::string op = "onnx::save('" + path + "')";
  ::onnx::ModelProto proto;
  if (auto* model = dynamic_cast<Model*>(&module)) {
    if (opset != 0 && opset != model->opset())
      fail(op, "a loaded model is written at its own opset, ", model->opset(), ", not ", opset, " (kten does not convert between opsets)");
    // The loaded graph as it was, its parameters' current values inline.
    proto = *model->graph()->proto;
    const Graph& graph = *model->graph();
    // Parameters take their current values; constants the file kept as external data come inline,
    // since the new file's folder need not hold the old one's data files.
    for (auto& t : *proto.mutable_graph()->mutable_initializer())
      for (const Value& v : graph.values)
        if (v.name == t.name()) {
          if (v.source == Source::parameter) fill(t, t.name(), v.parameter);
          else if (t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL && v.constant.defined()) fill(t, t.name(), v.constant);
        }
    write_mode(*proto.mutable_graph(), graph.opset, model->is_training(), op);
  } else {
    if (example_inputs.size() != 1 || !example_inputs[0].defined())
      fail(op, "a ", module.name(), " is traced through one call on one example input; got ", example_inputs.size());
    const Tensor& x = example_inputs[0];
    if (x.ndim() < 1) fail<ShapeError>(op, "the example input is 0-d; axis 0 is the batch axis");
    if (opset == 0) opset = 17;  // what Debian 12's onnx 1.12 checker knows, and PyTorch 1.13 writes
    if (opset < 17 || opset > kLastOpset) fail(op, "opset ", opset, " is not written; kten writes opsets 17 to ", kLastOpset);
    proto.set_ir_version(opset <= 17 ? 8 : 10);  // IR 10: what onnx 1.16 and later stamp on opsets 18 to 23
    proto.set_producer_name("kten");
    proto.set_producer_version(version());
    auto* import = proto.add_opset_import();
    import->set_domain("");
    import->set_version(opset);
    Exporter(op, module, *proto.mutable_graph(), opset).write(x);
  }
  if (checker_judges(proto)) {  // an imported model of a newer IR or opset was checked by load()
    try {
      ::onnx::checker::check_model(proto);
    } catch (const std::exception& e) {
      fail(op, "the ONNX checker rejects what kten wrote (a bug in kten): ", e.what());
    }
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) fail(op, "protobuf cannot serialise the model (over 2 GiB?)");
  kten::detail::AtomicFile file(path, op);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace kten::onnx
