// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::onnx::save of an imported model (issue 47): the file says the mode the model is in, not
// the mode it was exported in, so that a model trained and switched to eval() deploys with its
// running statistics and no dropout in ONNX Runtime (which runs the file's mode), and loads back in
// that mode.
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <onnx/onnx_pb.h>

#include <kten/onnx.hpp>

#include "onnx_builder.hpp"
#include "support.hpp"

using namespace kten;
using test::Builder;

namespace {

// x (N, 3, 4) -> BatchNormalization (training mode) -> Dropout (training mode, ratio 0.5) -> y.
Builder trained_export(int opset) {
  Builder b(opset);
  b.input("x", {-1, 3, 4});
  b.floats("bn.weight", {1.f, 0.5f, 2.f}, {3});
  b.floats("bn.bias", {0.f, 0.1f, -0.1f}, {3});
  b.floats("bn.running_mean", {0.f, 0.f, 0.f}, {3});
  b.floats("bn.running_var", {1.f, 1.f, 1.f}, {3});
  auto* ratio = b.graph->add_initializer();
  ratio->set_name("ratio");
  ratio->set_data_type(1);
  ratio->add_float_data(0.5f);
  auto* mode = b.graph->add_initializer();
  mode->set_name("training");
  mode->set_data_type(9);
  mode->add_int32_data(1);
  const std::vector<std::string> bn_in = {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
  if (opset >= 14) {
    Builder::attr(b.node("BatchNormalization", bn_in, {"h", "rm", "rv"}, "bn"), "training_mode", 1);
  } else {
    b.node("BatchNormalization", bn_in, {"h", "rm", "rv", "sm", "sv"}, "bn");
  }
  b.node("Dropout", {"h", "ratio", "training"}, {"y"}, "drop");
  b.output("y", {-1, 3, 4});
  return b;
}

// The file's BatchNormalization mode (its attribute, or at opset 13 its outputs) and the value of
// its Dropout's training_mode input.
struct Modes {
  bool batch_norm_training;
  int batch_norm_outputs;
  bool dropout_training;
};

Modes modes_of(const std::string& path) {
  ::onnx::ModelProto m;
  m.ParseFromString(test::read_bytes(path));
  Modes out{false, 0, false};
  std::string mode_input;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "BatchNormalization") {
      out.batch_norm_outputs = n.output_size();
      out.batch_norm_training = n.output_size() > 1;
      for (const auto& a : n.attribute())
        if (a.name() == "training_mode") out.batch_norm_training = a.i() != 0;
    }
    if (n.op_type() == "Dropout" && n.input_size() > 2) mode_input = n.input(2);
  }
  for (const auto& t : m.graph().initializer())
    if (t.name() == mode_input) out.dropout_training = t.has_raw_data() ? t.raw_data().at(0) != 0 : t.int32_data(0) != 0;
  return out;
}

}  // namespace

TEST_CASE("onnx: save() of an imported model writes the mode the model is in", "[onnx]") {
  const Device d = test::device();
  for (const int opset : {13, 15}) {
    INFO("opset " << opset);
    auto net = kten::onnx::load(trained_export(opset).write("kten-test-modes.onnx"), d);
    REQUIRE(net.is_training());
    const std::string eval_path = (test::scratch() / "kten-test-modes-eval.onnx").string();
    const std::string train_path = (test::scratch() / "kten-test-modes-train.onnx").string();

    net.eval();
    kten::onnx::save(eval_path, net);
    const Modes eval = modes_of(eval_path);
    CHECK_FALSE(eval.batch_norm_training);
    CHECK(eval.batch_norm_outputs == 1);
    CHECK_FALSE(eval.dropout_training);
    auto deployed = kten::onnx::load(eval_path, d);
    CHECK_FALSE(deployed.is_training());
    const Tensor x = randn({2, 3, 4}, d, 8) * 3.0 + 1.0;
    NoGradGuard no_grad;
    test::require_allclose<float>(deployed(x), test::host_doubles<float>(net(x)), 0, 0);  // running statistics, no dropout

    net.train();
    kten::onnx::save(train_path, net);
    const Modes train = modes_of(train_path);
    CHECK(train.batch_norm_training);
    CHECK(train.dropout_training);
    CHECK(kten::onnx::load(train_path, d).is_training());
    // An inference file switched to train() gets the training form back (opset 13: the outputs).
    deployed.train();
    kten::onnx::save(train_path, deployed);
    CHECK(modes_of(train_path).batch_norm_training);
    CHECK(kten::onnx::load(train_path, d).is_training());
  }
}

TEST_CASE("onnx: save() traces attention and recurrent layers, which load back to their outputs", "[onnx][attention][rnn]") {
  const Device d = test::device();
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 16;
  o.seed = 1;
  nn::TransformerEncoderLayer enc(8, 2, o);
  nn::RNNOptions r;
  r.num_layers = 2;
  r.bidirectional = true;
  r.seed = 2;
  nn::LSTM lstm(8, 4, r);
  nn::GRU gru(8, 4, r);
  for (auto [name, layer] : {std::pair<const char*, nn::Module*>{"encoder", &enc}, {"lstm", &lstm}, {"gru", &gru}}) {
    INFO(name);
    layer->to(d);
    layer->eval();
    const std::string path = (test::scratch() / ("kten-test-" + std::string(name) + ".onnx")).string();
    kten::onnx::save(path, *layer, {randn({5, 3, 8}, d, 3)});
    auto loaded = kten::onnx::load(path, d);
    NoGradGuard no_grad;
    const Tensor x = randn({5, 3, 8}, d, 4);
    test::require_allclose<float>(loaded(x), test::host_doubles<float>((*layer)(x)), 1e-5, 1e-6);
  }
}
