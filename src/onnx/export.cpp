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
#include "ops/registry.hpp"

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

using ops::TracedOp;

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

// The graph being written (ops::OnnxWriter, which the registry's export forms write through):
// nodes with names of their own, constants.
class GraphWriter final : public ops::OnnxWriter {
 public:
  explicit GraphWriter(::onnx::GraphProto& graph) : graph_(graph) {}

  std::string node(const char* op, const std::vector<std::string>& inputs,
                   const std::vector<ops::OnnxAttr>& attrs, int outputs) override {
    ::onnx::NodeProto* n = graph_.add_node();
    const std::string name = "/" + std::string(op) + "_" + std::to_string(count_++);
    n->set_name(name);
    n->set_op_type(op);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(name + "_output");
    for (int i = 1; i < outputs; ++i) n->add_output(name + "_output_" + std::to_string(i));
    for (const ops::OnnxAttr& a : attrs) {
      auto* p = n->add_attribute();
      p->set_name(a.name);
      switch (a.kind) {
        case ops::OnnxAttr::integer:
          p->set_type(::onnx::AttributeProto_AttributeType_INT);
          p->set_i(a.i);
          break;
        case ops::OnnxAttr::integers:
          p->set_type(::onnx::AttributeProto_AttributeType_INTS);
          for (std::int64_t v : a.ints) p->add_ints(v);
          break;
        case ops::OnnxAttr::real:
          p->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
          p->set_f(static_cast<float>(a.f));
          break;
        case ops::OnnxAttr::text:
          p->set_type(::onnx::AttributeProto_AttributeType_STRING);
          p->set_s(a.s);
          break;
      }
    }
    return name + "_output";
  }

  std::string constant(const Tensor& value) override {
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

  ::onnx::GraphProto& graph() { return graph_; }

 private:
  ::onnx::GraphProto& graph_;
  int count_ = 0;
};

// The export forms: the registry's entries' (src/ops), and nn's fused functions', which are no
// registered op (layer_norm, dropout), by the name the tape records.
const std::unordered_map<std::string_view, std::function<std::string(ops::OnnxEmit&)>>& rows() {
  static const auto table = [] {
    std::unordered_map<std::string_view, std::function<std::string(ops::OnnxEmit&)>> t;
    for (const ops::OpDef& def : ops::registry())
      for (const ops::OnnxExport& form : def.onnx_export)
        if (!t.emplace(form.traced, form.write).second)
          fail("onnx::save", "two export forms for ", form.traced, " (a bug in kten's op registry)");
    t.emplace("kten::layer_norm", [](ops::OnnxEmit& e) {
      return e.node("LayerNormalization", {e.in[0], e.in[1], e.in[2]},
                    {ops::attr_i("axis", -1), ops::attr_f("epsilon", e.r(0))});
    });
    t.emplace("kten::dropout", [](ops::OnnxEmit& e) {  // recorded only in training mode
      return e.node("Dropout", {e.in[0], e.scalar(e.r(0)), e.w.constant(full({}, 1, cpu(), boolean))});
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
      ops::OnnxEmit e{w_, o, {}, opset_};
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
