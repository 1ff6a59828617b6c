// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::onnx in a kten built without ONNX (KTEN_ENABLE_ONNX=OFF): every call says so.
#include <kten/onnx.hpp>

#include "core/fail.hpp"

namespace kten::onnx {

namespace {
[[noreturn]] void not_built(const char* op) {
  kten::detail::fail(op, "this kten was built without ONNX; configure it with -DKTEN_ENABLE_ONNX=ON (Debian 12: "
                         "apt-get install libonnx-dev, which scripts/setup does)");
}
}  // namespace

Model::Model(std::shared_ptr<detail::Graph> graph) : graph_(std::move(graph)) { not_built("onnx::Model"); }
Tensor Model::forward(const Tensor&) { not_built("onnx::Model"); }
std::vector<Tensor> Model::run(const std::vector<Tensor>&) { not_built("onnx::Model::run"); }
std::vector<std::string> Model::input_names() const { not_built("onnx::Model::input_names"); }
std::vector<std::string> Model::output_names() const { not_built("onnx::Model::output_names"); }
int Model::opset() const { not_built("onnx::Model::opset"); }
void Model::to(const Device&) { not_built("onnx::Model::to"); }
void Model::to(DType) { not_built("onnx::Model::to"); }
Model load(const std::string&, const Device&) { not_built("onnx::load"); }
void save(const std::string&, nn::Module&, const std::vector<Tensor>&) { not_built("onnx::save"); }
void save(const std::string&, nn::Module&, const std::vector<Tensor>&, int) { not_built("onnx::save"); }
std::vector<SupportedOp> supported_ops() { return {}; }
bool available() { return false; }

}  // namespace kten::onnx
