// kten::onnx::save: writes a module as an ONNX model (opset 17). An imported Model is its own
// graph with the current parameters; kten's layers are written node by node from what each is
// (Linear as Gemm, LayerNorm as LayerNormalization, ...), with state_dict() names as initializer
// names and float constants as Constant nodes (so load() makes no extra parameters of them).
#include <cmath>
#include <cstring>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <kten/info.hpp>
#include <kten/nn/layers.hpp>
#include <kten/onnx.hpp>

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

// Writes kten's layers as nodes of one graph.
class Writer {
 public:
  Writer(::onnx::GraphProto& graph, DType dtype) : graph_(graph), dtype_(dtype) {}

  // The output value of `module` applied to value `x`; `prefix` qualifies its parameters' names.
  std::string layer(nn::Module& module, const std::string& x, const std::string& prefix) {
    if (auto* seq = dynamic_cast<nn::Sequential*>(&module)) {
      std::string y = x;
      for (const auto& [name, child] : seq->named_children()) y = layer(*child, y, prefix + name + ".");
      return y;
    }
    if (auto* linear = dynamic_cast<nn::Linear*>(&module)) {
      if (!linear->weight().defined())
        fail("onnx::save", "the lazy Linear '", prefix, "' has no weight before its first call");
      const std::string w = initializer(prefix + "weight", linear->weight());
      const std::string b = linear->bias().defined() ? initializer(prefix + "bias", linear->bias()) : "";
      if (rank_ == 2) {
        std::vector<std::string> in = {x, w};
        if (!b.empty()) in.push_back(b);
        return node("Gemm", in, [](::onnx::NodeProto& n) { int_attr(n, "transB", 1); });
      }
      const std::string wt = node("Transpose", {w});
      const std::string y = node("MatMul", {x, wt});
      return b.empty() ? y : node("Add", {y, b});
    }
    if (auto* norm = dynamic_cast<nn::LayerNorm*>(&module)) {
      const std::string w = initializer(prefix + "weight", norm->weight());
      const std::string b = initializer(prefix + "bias", norm->bias());
      const double eps = norm->eps();
      return node("LayerNormalization", {x, w, b}, [eps](::onnx::NodeProto& n) {
        int_attr(n, "axis", -1);
        auto* a = n.add_attribute();
        a->set_name("epsilon");
        a->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
        a->set_f(static_cast<float>(eps));
      });
    }
    if (auto* drop = dynamic_cast<nn::Dropout*>(&module)) {
      const std::string ratio = constant(drop->p());
      const std::string mode = constant_bool(drop->is_training());
      return node("Dropout", {x, ratio, mode});
    }
    if (dynamic_cast<nn::ReLU*>(&module)) return node("Relu", {x});
    if (dynamic_cast<nn::Tanh*>(&module)) return node("Tanh", {x});
    if (dynamic_cast<nn::Sigmoid*>(&module)) return node("Sigmoid", {x});
    if (dynamic_cast<nn::SiLU*>(&module)) return node("Mul", {x, node("Sigmoid", {x})});
    if (dynamic_cast<nn::GELU*>(&module)) {  // x/2 (1 + erf(x / sqrt 2)): opset 17 has no Gelu
      const std::string e = node("Erf", {node("Div", {x, constant(std::sqrt(2.0))})});
      return node("Mul", {node("Mul", {x, node("Add", {e, constant(1.0)})}), constant(0.5)});
    }
    if (auto* sp = dynamic_cast<nn::Softplus*>(&module)) {  // ONNX's Softplus has beta 1 (and no threshold)
      if (sp->beta() == 1) return node("Softplus", {x});
      const std::string beta = constant(sp->beta());
      return node("Div", {node("Softplus", {node("Mul", {x, beta})}), beta});
    }
    fail("onnx::save", "a ", module.name(), prefix.empty() ? "" : " ('" + prefix.substr(0, prefix.size() - 1) + "')",
         " is not exportable yet: save() writes Linear, ReLU, Tanh, Sigmoid, GELU, SiLU, Softplus, LayerNorm, "
         "Dropout, a Sequential of those, and models loaded with kten::onnx::load");
  }

  int rank_ = 2;  // the rank of the values flowing through (the example input's)

 private:
  static void int_attr(::onnx::NodeProto& n, const char* name, std::int64_t value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_INT);
    a->set_i(value);
  }

  std::string node(const char* op, const std::vector<std::string>& inputs,
                   const std::function<void(::onnx::NodeProto&)>& attrs = nullptr) {
    ::onnx::NodeProto* n = graph_.add_node();
    const std::string name = std::string(op) + "_" + std::to_string(count_++);
    n->set_name(name);
    n->set_op_type(op);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(name + "_out");
    if (attrs) attrs(*n);
    return name + "_out";
  }

  std::string initializer(const std::string& name, const Tensor& value) {
    fill(*graph_.add_initializer(), name, value);
    return name;
  }

  // A 0-d float constant of the model's dtype, as a Constant node.
  std::string constant(double value) {
    const Tensor t = full({}, value, cpu(), dtype_);
    return node("Constant", {}, [&t](::onnx::NodeProto& n) {
      auto* a = n.add_attribute();
      a->set_name("value");
      a->set_type(::onnx::AttributeProto_AttributeType_TENSOR);
      fill(*a->mutable_t(), "value", t);
    });
  }

  std::string constant_bool(bool value) {
    const Tensor t = full({}, value ? 1 : 0, cpu(), boolean);
    return node("Constant", {}, [&t](::onnx::NodeProto& n) {
      auto* a = n.add_attribute();
      a->set_name("value");
      a->set_type(::onnx::AttributeProto_AttributeType_TENSOR);
      fill(*a->mutable_t(), "value", t);
    });
  }

  ::onnx::GraphProto& graph_;
  DType dtype_;
  int count_ = 0;
};

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

}  // namespace

void save(const std::string& path, nn::Module& module, const std::vector<Tensor>& example_inputs) {
  const std::string op = "onnx::save('" + path + "')";
  ::onnx::ModelProto proto;
  if (auto* model = dynamic_cast<Model*>(&module)) {
    // The loaded graph as it was, its parameters' current values inline.
    proto = *model->graph()->proto;
    const Graph& graph = *model->graph();
    for (auto& t : *proto.mutable_graph()->mutable_initializer())
      for (const Value& v : graph.values)
        if (v.source == Source::parameter && v.name == t.name()) fill(t, t.name(), v.parameter);
  } else {
    if (example_inputs.size() != 1 || !example_inputs[0].defined())
      fail(op, "a ", module.name(), " is written from one example input (its rank, dtype and extents past the "
               "batch axis); got ", example_inputs.size());
    const Tensor& x = example_inputs[0];
    if (x.ndim() < 1) fail<ShapeError>(op, "the example input is 0-d; axis 0 is the batch axis");
    Tensor y;
    {
      NoGradGuard no_grad;
      y = module(x);
    }
    proto.set_ir_version(8);
    proto.set_producer_name("kten");
    proto.set_producer_version(version());
    auto* opset = proto.add_opset_import();
    opset->set_domain("");
    opset->set_version(17);
    ::onnx::GraphProto& graph = *proto.mutable_graph();
    graph.set_name(module.name());
    Writer writer(graph, x.dtype());
    writer.rank_ = x.ndim();
    const std::string out = writer.layer(module, "input", "");
    declare(*graph.add_input(), "input", x.dtype(), x.shape());
    // The output has a name of its own: an Identity when the module wrote no node (an empty Sequential).
    ::onnx::NodeProto* last = graph.add_node();
    last->set_name("output_identity");
    last->set_op_type("Identity");
    last->add_input(out);
    last->add_output("output");
    declare(*graph.add_output(), "output", y.dtype(), y.shape());
  }
  try {
    ::onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    fail(op, "the ONNX checker rejects what kten wrote (a bug in kten): ", e.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) fail(op, "protobuf cannot serialise the model (over 2 GiB?)");
  kten::detail::AtomicFile file(path, op);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace kten::onnx
