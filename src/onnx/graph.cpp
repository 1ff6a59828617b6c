// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// An imported model at run time: the planned nodes in order, each input taken from where the plan
// put it (a constant's copy on the device, shape arithmetic on the host), intermediates freed
// after their last use. Every tensor op records on the autograd tape as usual.
#include <kten/onnx.hpp>

#include "core/fail.hpp"
#include "graph.hpp"

namespace kten::onnx {

namespace detail {

namespace {

// Says which node failed, keeping the error's class.
[[noreturn]] void rethrow_from(const std::string& where, const Error& e) {
  const std::string op = "onnx::Model, " + where;
  if (dynamic_cast<const ShapeError*>(&e)) kten::detail::fail_within<ShapeError>(op, e);
  if (dynamic_cast<const DTypeError*>(&e)) kten::detail::fail_within<DTypeError>(op, e);
  if (dynamic_cast<const DeviceMismatch*>(&e)) kten::detail::fail_within<DeviceMismatch>(op, e);
  if (dynamic_cast<const IndexError*>(&e)) kten::detail::fail_within<IndexError>(op, e);
  if (dynamic_cast<const FormatError*>(&e)) kten::detail::fail_within<FormatError>(op, e);
  throw;  // others (OutOfMemory, SyncError, ...) as they are
}

}  // namespace

std::vector<Tensor> run_graph(Graph& graph, const std::vector<Tensor>& inputs, bool training) {
  std::vector<Tensor> slots(graph.values.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) slots[graph.inputs[i].value] = inputs[i];
  const auto value_of = [&](int v, bool on_host) -> Tensor {
    const Value& value = graph.values[v];
    switch (value.source) {
      case Source::constant: return on_host ? value.constant : value.on_device;
      case Source::parameter: return value.parameter;
      default: return slots[v];
    }
  };
  for (const Node& n : graph.nodes) {
    Call call{n, {}, {}, training, n.on_host ? cpu() : graph.device, &graph.dropout_calls, graph.seed};
    for (int v : n.inputs) {
      if (v < 0) {
        call.in.emplace_back();
        call.host.emplace_back();
        continue;
      }
      const Value& value = graph.values[v];
      const bool known_on_host = value.source == Source::constant || value.source == Source::host;
      Tensor t = value_of(v, n.on_host);
      call.host.push_back(known_on_host ? value_of(v, true) : Tensor());
      // A host value a device node reads as a tensor goes to the device (shape arithmetic rarely
      // meets device data; cpu() models copy nothing).
      const bool read_on_host = (n.impl->host_inputs >> call.in.size()) & 1U;
      if (!n.on_host && value.source == Source::host && !read_on_host) t = t.to(graph.device);
      call.in.push_back(t);
    }
    std::vector<Tensor> outs;
    try {
      outs = n.impl->run(call);
    } catch (const Error& e) {
      rethrow_from(call.where(), e);
    }
    for (std::size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] >= 0) slots[n.outputs[i]] = outs.at(i);
    for (int v : n.frees) slots[v] = Tensor();
  }
  std::vector<Tensor> outputs;
  for (int v : graph.outputs) {
    Tensor t = value_of(v, false);
    outputs.push_back(graph.values[v].source == Source::host ? t.to(graph.device) : t);
  }
  return outputs;
}

}  // namespace detail

using kten::detail::fail;
using namespace detail;

Tensor Model::forward(const Tensor& input) {
  if (graph_->inputs.size() != 1 || graph_->outputs.size() != 1)
    fail("onnx::Model", "the graph has ", graph_->inputs.size(), " inputs and ", graph_->outputs.size(),
         " outputs; calling it as a module takes one of each: use run({...})");
  return run({input}).front();
}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) {
  const char* op = "onnx::Model::run";
  if (inputs.size() != graph_->inputs.size())
    fail(op, "the graph takes ", graph_->inputs.size(), " inputs, got ", inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Input& want = graph_->inputs[i];
    const Tensor& x = inputs[i];
    const std::string& name = graph_->values[want.value].name;
    if (!x.defined()) fail(op, "input '", name, "' is an undefined tensor");
    if (x.device() != device())
      fail<DeviceMismatch>(op, "input '", name, "' is on ", x.device(), " but the model is on ", device(),
                           "; kten never copies implicitly: move it with x.to(", device(), ")");
    if (x.dtype() != want.dtype)
      fail<DTypeError>(op, "input '", name, "' is ", x.dtype(), "; the graph declares ", want.dtype, ": convert it with x.astype(kten::",
                       want.dtype, ")");
    bool fits = want.shape.empty() || static_cast<std::size_t>(x.ndim()) == want.shape.size();
    for (std::size_t d = 0; fits && d < want.shape.size(); ++d) fits = want.shape[d] < 0 || want.shape[d] == x.shape()[d];
    // Only the batch axis differs from a fixed extent: the export fixed it (no dynamic_axes).
    bool batch_only = !fits && static_cast<std::size_t>(x.ndim()) == want.shape.size() && !want.shape.empty() &&
                      want.shape[0] >= 0 && want.shape[0] != x.shape()[0];
    for (std::size_t d = 1; batch_only && d < want.shape.size(); ++d) batch_only = want.shape[d] < 0 || want.shape[d] == x.shape()[d];
    if (!fits)
      fail<ShapeError>(op, "input '", name, "' has shape ", x.shape(), "; the graph declares ", want.shape, " (-1: any extent)",
                       batch_only ? std::string("; the file fixes the batch axis at ") + std::to_string(want.shape[0]) +
                                        ": export with dynamic_axes={'" + name + "': {0: 'batch'}} (and the outputs') to run other batch sizes"
                                  : std::string());
  }
  return run_graph(*graph_, inputs, is_training());
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (const Input& in : graph_->inputs) names.push_back(graph_->values[in.value].name);
  return names;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (int v : graph_->outputs) names.push_back(graph_->values[v].name);
  return names;
}

int Model::opset() const { return graph_->opset; }

void Model::to(const Device& device) {
  Module::to(device);
  graph_->device = device;
  for (Value& v : graph_->values)
    if (v.source == Source::constant) v.on_device = v.constant.to(device);
}

void Model::to(DType dtype) {
  Module::to(dtype);
  for (Value& v : graph_->values)
    if (v.source == Source::constant && is_floating(v.constant.dtype())) {
      v.constant = v.constant.astype(dtype);
      v.on_device = v.constant.to(graph_->device);
    }
  for (Input& in : graph_->inputs)
    if (is_floating(in.dtype)) in.dtype = dtype;
}

std::vector<SupportedOp> supported_ops() {
  std::vector<SupportedOp> ops;
  for (const OpImpl& impl : op_table()) ops.push_back({impl.op_type, impl.first_opset, impl.last_opset});
  return ops;
}

bool available() { return true; }

}  // namespace kten::onnx
