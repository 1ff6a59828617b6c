// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file onnx.hpp
/// \brief ONNX import and export (kten::onnx): a model exported from PyTorch (torch.onnx.export,
/// opsets up to 23, IR 3 to 13, external data) runs and keeps training in kten, without libtorch, and any kten module is
/// written as ONNX by tracing one call. Needs neither protobuf nor ONNX headers: linking kten::kten is
/// enough. In a kten built without ONNX (KTEN_ENABLE_ONNX=OFF) every call throws kten::Error.
#include <memory>
#include <string>
#include <vector>

#include <kten/device.hpp>
#include <kten/nn/module.hpp>
#include <kten/tensor.hpp>

namespace kten::onnx {

namespace detail {
struct Graph;
}

/// \brief An imported ONNX graph as a kten::nn::Module: its float initializers are trainable
/// parameters under their ONNX names ("0.weight" is the parameter "weight" of the child module
/// "0", so state_dict() and named_parameters() give the ONNX names), except BatchNormalization's
/// running mean and variance, which are buffers (as PyTorch's); integer initializers and
/// constants are neither. The graph was checked and planned once by load(): each call runs its
/// nodes in that order with kten's operations (so autograd gives the gradients), evaluates shape
/// arithmetic (Shape, Gather, Concat, Unsqueeze...) on the host from tensor metadata, and frees
/// each intermediate after its last use. Copies share the graph and the parameters.
class Model : public nn::Module {
 public:
  /// \brief Runs a graph of one input and one output (kten::Error for any other: use run()).
  Tensor forward(const Tensor& input) override;
  /// \brief Runs the graph: `inputs` in input_names()' order, on device(), with the graph's
  /// dtypes; returns the outputs in output_names()' order. A fixed extent of a declared input
  /// shape that the tensor does not have is a ShapeError; symbolic ones (a batch) take any size.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  /// \brief The graph's inputs (initializers excluded), in order.
  std::vector<std::string> input_names() const;
  /// \brief The graph's outputs, in order.
  std::vector<std::string> output_names() const;
  /// \brief The default ONNX domain's opset the file was written for.
  int opset() const;
  /// \brief Moves the parameters and the graph's constants to `device`.
  void to(const Device& device) override;
  /// \brief Casts the float parameters and float constants to `dtype` (float32 or float64).
  void to(DType dtype) override;
  std::string name() const override { return "onnx::Model"; }
  /// \brief Internal: the planned graph (load() makes it).
  const std::shared_ptr<detail::Graph>& graph() const { return graph_; }
  /// \brief Internal: a model over a planned graph, its parameters registered (load()).
  explicit Model(std::shared_ptr<detail::Graph> graph);

 private:
  std::shared_ptr<detail::Graph> graph_;
};

/// \brief Reads, checks (kten's own checks, then ONNX's checker where Debian 12's onnx 1.12 knows
/// the IR and opset) and plans the ONNX file at
/// `path` onto `device`. A missing, truncated or malformed file, a dangling node input, a cycle,
/// an unsupported op, opset, attribute or dtype, external data outside the model's folder, or an
/// initializer whose data does not match its shape is a kten::FormatError naming the node and op
/// (or the initializer). A model with a node in training mode (Dropout's or BatchNormalization's training_mode) starts in
/// train(), any other in eval().
Model load(const std::string& path, const Device& device = cpu());

/// \brief Writes `module` as an ONNX file (opset 17) that onnx.checker accepts and load() reads
/// back to the same outputs; the write is atomic. An imported Model is written as its graph with
/// the current parameters (its dynamic axes kept; `example_inputs` may be empty). Any other
/// module is traced: one call `module(x)` on a copy of the one example input x, with grad mode on,
/// records every op on the autograd tape, and the ops the output depends on become nodes. The
/// input is "input", the output "output", axis 0 of both a dynamic "batch" axis (the example
/// gives the rank, dtype and other extents); state_dict() tensors are initializers under their
/// names, any other tensor an op reads is a Constant (ops that depend on neither the input nor the
/// parameters are folded, and control flow follows the traced path, as torch.jit.trace). The
/// module's mode decides Dropout and BatchNorm, and its buffers are left as they were. An op with
/// no ONNX form is a kten::Error naming the op and the module (docs/onnx.md lists those that have one).
void save(const std::string& path, nn::Module& module, const std::vector<Tensor>& example_inputs = {});

/// \brief save() at `opset`, 17 to 23 (save() writes 17, which Debian 12's onnx 1.12 checker knows;
/// PyTorch 2.9's default is 20). From 18 a reduction's axes are an input, from 20 GELU is a Gelu
/// node. The file is IR 8 at 17, IR 10 above (onnx 1.12's checker, which knows neither, is not
/// run). An imported Model is written at its own opset: another is a kten::Error.
void save(const std::string& path, nn::Module& module, const std::vector<Tensor>& example_inputs, int opset);

/// \brief One ONNX operator load() supports, in the default domain, and the opsets it does.
struct SupportedOp {
  std::string name;   ///< \brief the ONNX operator ("Gemm")
  int first_opset;    ///< \brief the first opset supported
  int last_opset;     ///< \brief the last opset supported
};

/// \brief Every operator load() supports, by name (empty without ONNX; kten-info lists them).
std::vector<SupportedOp> supported_ops();

/// \brief True when this kten was built with ONNX (KTEN_ENABLE_ONNX).
bool available();

}  // namespace kten::onnx
