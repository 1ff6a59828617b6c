// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::onnx (issue 32): graphs built here with the ONNX project's protobuf classes run on the
// device under test to kten's own results, shape arithmetic on the host without a device
// synchronisation; kten's layers written by save() read back to the same outputs and train alike;
// every malformed or hostile file is a FormatError at load() naming the node and op.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <onnx/onnx_pb.h>

#include <kten/onnx.hpp>

#include "design_block.hpp"
#include "onnx_builder.hpp"
#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {

using test::Builder;
using test::require_load_fails;
using test::scratch;

// A two-layer MLP: y = relu(x W1^T + b1) W2^T + b2, x of shape (N, 3).
Builder mlp(int opset = 17) {
  Builder b(opset);
  b.input("x", {-1, 3});
  b.floats("fc1.weight", {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f}, {2, 3});
  b.floats("fc1.bias", {0.05f, -0.05f}, {2});
  b.floats("fc2.weight", {1.0f, -1.5f}, {1, 2});
  b.floats("fc2.bias", {0.25f}, {1});
  Builder::attr(b.node("Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}, "fc1"), "transB", 1);
  b.node("Relu", {"h"}, {"r"}, "act");
  Builder::attr(b.node("Gemm", {"r", "fc2.weight", "fc2.bias"}, {"y"}, "fc2"), "transB", 1);
  b.output("y", {-1, 1});
  return b;
}

}  // namespace

TEST_CASE("onnx: an MLP graph runs, names its parameters by their ONNX names and trains", "[onnx]") {
  const Device d = test::device();
  auto net = kten::onnx::load(mlp().write("kten-test-mlp.onnx"), d);
  REQUIRE(net.input_names() == std::vector<std::string>{"x"});
  REQUIRE(net.output_names() == std::vector<std::string>{"y"});
  REQUIRE(net.opset() == 17);
  std::vector<std::string> names;
  for (const auto& [name, t] : net.state_dict()) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  REQUIRE(!net.is_training());  // nothing in the file asks for training mode

  const Tensor x = tensor({{1.f, 2.f, 3.f}, {-1.f, 0.5f, 2.f}, {0.f, 0.f, 0.f}, {3.f, -2.f, 1.f}}, d);
  const Tensor w1 = tensor({{0.1f, -0.2f, 0.3f}, {0.4f, 0.5f, -0.6f}}, d), b1 = tensor({0.05f, -0.05f}, d);
  const Tensor w2 = tensor({{1.0f, -1.5f}}, d), b2 = tensor({0.25f}, d);
  const Tensor want = matmul(relu(matmul(x, w1.transpose()) + b1), w2.transpose()) + b2;
  test::require_allclose<float>(net(x), test::host_doubles<float>(want));

  // Training: the loaded parameters learn like any module's.
  const Tensor before = net.state_dict()[0].second.copyto(d);
  optim::SGD sgd(0.1);
  net.zero_grad();
  nn::MSELoss()(net(x), zeros({4, 1}, d)).backward();
  sgd.step(net);
  REQUIRE(test::host_doubles<float>(net.state_dict()[0].second) != test::host_doubles<float>(before));

  // Copies share the graph and the parameters; float64 casts the constants too.
  kten::onnx::Model copy = net;
  copy.to(float64);
  REQUIRE(net.state_dict()[0].second.dtype() == float64);
  REQUIRE(copy(x.astype(float64)).dtype() == float64);
}

TEST_CASE("onnx: run() checks the inputs against the graph's declaration", "[onnx]") {
  const Device d = test::device();
  auto net = kten::onnx::load(mlp().write("kten-test-mlp-inputs.onnx"), d);
  REQUIRE_THROWS_AS(net(zeros({2, 4}, d)), ShapeError);  // width 3 is fixed
  REQUIRE_THROWS_AS(net(zeros({2, 3}, d, float64)), DTypeError);
  REQUIRE_THROWS_AS(net(zeros({2, 3}, test::other_device())), DeviceMismatch);
  REQUIRE_THROWS_AS(net.run({}), Error);
  REQUIRE(net(zeros({5, 3}, d)).shape() == Shape{5, 1});  // N is symbolic
  // The errors say what to do: astype for the dtype, dynamic_axes for a batch the export fixed.
  CHECK_THROWS_WITH(net(zeros({2, 3}, d, float64)), ContainsSubstring("x.astype(kten::float32)"));
  Builder fixed = mlp();
  fixed.graph->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(4);
  auto fixed_net = kten::onnx::load(fixed.write("kten-test-mlp-fixed.onnx"), d);
  CHECK_THROWS_WITH(fixed_net(zeros({2, 3}, d)), ContainsSubstring("fixes the batch axis at 4") && ContainsSubstring("dynamic_axes"));
  CHECK_THROWS_WITH(fixed_net(zeros({4, 2}, d)), !ContainsSubstring("dynamic_axes"));  // not the batch axis
}

TEST_CASE("onnx: shape arithmetic runs on the host, views and softmax on the device, without a sync", "[onnx]") {
  // y = Flatten(Slice(Concat(Split(Softmax(Transpose(Reshape(x, [N, 2, 3]))))))) with the target
  // shape computed from Shape(x), as PyTorch's exporter writes x.view(x.size(0), 2, 3).
  Builder b(13);
  b.input("x", {-1, 6});
  b.ints("zero", {0});
  b.ints("rest", {2, 3});
  b.ints("split", {1, 2});
  b.ints("starts", {1});
  b.ints("ends", {100});
  b.ints("axes", {1});
  b.node("Shape", {"x"}, {"s"});
  Builder::attr(b.node("Gather", {"s", "zero"}, {"n"}), "axis", 0);
  Builder::attr(b.node("Concat", {"n", "rest"}, {"shape"}), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"r"});
  Builder::attr(b.node("Transpose", {"r"}, {"t"}), "perm", std::vector<std::int64_t>{0, 2, 1});
  Builder::attr(b.node("Softmax", {"t"}, {"sm"}), "axis", -1);
  Builder::attr(b.node("Split", {"sm", "split"}, {"p", "q"}), "axis", 1);
  Builder::attr(b.node("Concat", {"q", "p"}, {"c"}), "axis", 1);
  b.node("Slice", {"c", "starts", "ends", "axes"}, {"sl"});
  b.node("Flatten", {"sl"}, {"y"});
  b.output("y", {-1, 4});
  const Device d = test::device();
  auto net = kten::onnx::load(b.write("kten-test-shapes.onnx"), d);
  const Tensor x = randn({5, 6}, d, 7);
  (void)net(x);  // warm
  reset_stats();
  const Tensor y = net(x);
  REQUIRE(stats().host_syncs == 0);
  REQUIRE(stats().transfers() == 0);
  const Tensor sm = softmax(x.reshape({5, 2, 3}).permute({0, 2, 1}), -1);
  const Tensor want = cat({sm.narrow(1, 1, 2), sm.narrow(1, 0, 1)}, 1).narrow(1, 1, 2).reshape({5, 4});
  REQUIRE(y.shape() == Shape{5, 4});
  test::require_allclose<float>(y, test::host_doubles<float>(want));
}

TEST_CASE("onnx: the elementwise, reduction and shape operators compute kten's results", "[onnx]") {
  Builder b(17);
  b.input("x", {-1, 4});
  b.floats("W", {0.5f, -1.f, 0.25f, 1.5f, 0.f, -0.5f, 2.f, 1.f, -1.f, 0.75f, -0.25f, 0.5f}, {4, 3});
  b.floats("C", {0.1f, -0.2f, 0.3f}, {3});
  b.ints("one_axis", {1});
  b.ints("zero_axis", {0});
  b.ints("wide", {1, 3});
  Builder::attr(b.node("Transpose", {"x"}, {"xt"}), "perm", std::vector<std::int64_t>{1, 0});
  auto* gemm = b.node("Gemm", {"xt", "W", "C"}, {"g"});
  Builder::attr(gemm, "transA", 1);
  const std::pair<const char*, float> scalars[] = {{"alpha", 0.5f}, {"beta", 2.f}};
  for (const auto& [name, v] : scalars) {
    auto* a = gemm->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
    a->set_f(v);
  }
  b.node("Abs", {"g"}, {"a"});
  b.node("Neg", {"a"}, {"n"});
  b.node("Exp", {"n"}, {"e"});
  auto* one = b.node("Constant", {}, {"one"});
  {
    auto* a = one->add_attribute();
    a->set_name("value_float");
    a->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
    a->set_f(1.f);
  }
  b.node("Add", {"e", "one"}, {"e1"});
  b.node("Log", {"e1"}, {"l"});
  b.node("Mul", {"l", "l"}, {"ll"});
  b.node("Add", {"ll", "one"}, {"ll1"});
  b.node("Sqrt", {"ll1"}, {"s"});
  b.node("Pow", {"s", "s"}, {"p"});
  b.node("ReduceSum", {"p", "one_axis"}, {"r"});
  Builder::attr(b.node("ReduceMean", {"p"}, {"m"}), "axes", std::vector<std::int64_t>{1});
  auto* rmax = b.node("ReduceMax", {"p"}, {"mx"});
  Builder::attr(rmax, "axes", std::vector<std::int64_t>{-1});
  Builder::attr(rmax, "keepdims", 0);
  b.node("Unsqueeze", {"mx", "one_axis"}, {"u"});
  b.node("Sub", {"r", "m"}, {"d"});
  b.node("Div", {"d", "u"}, {"q"});
  b.node("Expand", {"q", "wide"}, {"ex"});
  b.node("Shape", {"ex"}, {"exshape"});
  b.node("ConstantOfShape", {"exshape"}, {"zeros"});
  b.node("Equal", {"ex", "ex"}, {"same"});
  b.node("Where", {"same", "ex", "zeros"}, {"w"});
  b.node("Erf", {"w"}, {"ef"});
  b.node("Sigmoid", {"ef"}, {"sg"});
  b.node("Tanh", {"sg"}, {"th"});
  b.node("LeakyRelu", {"th"}, {"lr"});  // alpha 0.01 by default
  Builder::attr(b.node("LogSoftmax", {"lr"}, {"ls"}), "axis", 1);
  b.node("Unsqueeze", {"ls", "zero_axis"}, {"us"});
  b.node("Squeeze", {"us", "zero_axis"}, {"sq"});
  b.node("Dropout", {"sq"}, {"dr"});
  b.node("Identity", {"dr"}, {"id"});
  Builder::attr(b.node("Cast", {"id"}, {"y"}), "to", 11);
  b.output("y", {-1, 3}, 11);
  const Device d = test::device();
  auto net = kten::onnx::load(b.write("kten-test-zoo.onnx"), d);
  const Tensor x = randn({5, 4}, d, 9);
  const Tensor W = tensor({{0.5f, -1.f, 0.25f}, {1.5f, 0.f, -0.5f}, {2.f, 1.f, -1.f}, {0.75f, -0.25f, 0.5f}}, d);
  const Tensor g = matmul(x, W) * 0.5 + tensor({0.1f, -0.2f, 0.3f}, d) * 2.0;
  const Tensor l = log(exp(-abs(g)) + 1.0);
  const Tensor s = sqrt(l * l + 1.0);
  const Tensor p = pow(s, s);
  const Tensor q = (sum(p, {1}, true) - mean(p, {1}, true)) / max(p, {1}, true);
  const Tensor th = tanh(sigmoid(erf(q.expand({5, 3}))));
  const Tensor lr = where(gt(th, 0.0), th, th * 0.01);
  const Tensor want = log_softmax(lr, 1).astype(float64);
  const Tensor y = net(x);
  REQUIRE(y.dtype() == float64);
  REQUIRE(y.shape() == Shape{5, 3});
  test::require_allclose<double>(y, test::host_doubles<double>(want), 1e-5, 1e-6);
}

TEST_CASE("onnx: save() writes kten's layers; load() reads them back to the same outputs and training", "[onnx]") {
  const Device d = test::device();
  const auto build = [&] {
    nn::Sequential seq;
    seq.add(nn::Linear(4, 6, {true, float32, 11}));
    seq.add(nn::LayerNorm(6));
    seq.add(nn::SiLU());
    seq.add(nn::Linear(6, 6, {true, float32, 12}));
    seq.add(nn::GELU());
    seq.add(nn::Softplus(0.5));
    seq.add(nn::Sigmoid());
    seq.add(nn::Dropout(0.3));
    seq.add(nn::Linear(6, 2, {false, float32, 13}));
    seq.add(nn::Tanh());
    seq.add(nn::ReLU());
    seq.to(d);
    seq.eval();
    return seq;
  };
  nn::Sequential seq = build();
  const std::string path = (scratch() / "kten-test-seq.onnx").string();
  kten::onnx::save(path, seq, {randn({3, 4}, d, 1)});
  auto net = kten::onnx::load(path, d);
  std::vector<std::string> want_names, got_names;
  for (const auto& [name, t] : seq.state_dict()) want_names.push_back(name);
  for (const auto& [name, t] : net.state_dict()) got_names.push_back(name);
  std::sort(want_names.begin(), want_names.end());
  std::sort(got_names.begin(), got_names.end());
  REQUIRE(got_names == want_names);
  const Tensor x = randn({8, 4}, d, 2);
  {
    NoGradGuard no_grad;
    test::require_allclose<float>(net(x), test::host_doubles<float>(seq(x)), 1e-5, 1e-6);
  }
  // Three Adam steps on each give the same parameters.
  optim::Adam a(1e-2), b(1e-2);
  for (int step = 0; step < 3; ++step) {
    a.zero_grad(seq);
    b.zero_grad(net);
    nn::MSELoss()(seq(x), zeros({8, 2}, d)).backward();
    nn::MSELoss()(net(x), zeros({8, 2}, d)).backward();
    a.step(seq);
    b.step(net);
  }
  const auto trained = seq.state_dict();
  for (const auto& [name, t] : net.state_dict())
    for (const auto& [other, u] : trained)
      if (name == other) test::require_allclose<float>(t, test::host_doubles<float>(u), 1e-5, 1e-6);

  // Re-export of the imported model keeps its trained weights.
  kten::onnx::save(path, net);
  auto again = kten::onnx::load(path, d);
  NoGradGuard no_grad;
  test::require_allclose<float>(again(x), test::host_doubles<float>(net(x)), 0, 0);
}

TEST_CASE("onnx: save() names an op without an ONNX form and the module it is in; it needs one example input", "[onnx]") {
  const Device d = test::device();
  // logsumexp has no export form (ReduceLogSumExp only loads): an error naming it, and no file.
  nn::Activation soft_max("SoftMax", [](const Tensor& x) { return tanh(logsumexp(x, 1, true)); });
  soft_max.to(d);
  const std::string path = (scratch() / "kten-test-logsumexp.onnx").string();
  REQUIRE_THROWS_WITH(kten::onnx::save(path, soft_max, {randn({2, 3}, d, 1)}),
                      ContainsSubstring("kten::logsumexp") && ContainsSubstring("in module 'SoftMax'") &&
                          ContainsSubstring("has no ONNX form"));
  REQUIRE_FALSE(std::filesystem::exists(path));
  // An adaptive pooling whose bins are not equal windows has none either.
  nn::AdaptiveAvgPool1d uneven(Shape{3});
  uneven.to(d);
  REQUIRE_THROWS_WITH(kten::onnx::save(path, uneven, {randn({2, 1, 8}, d, 2)}),
                      ContainsSubstring("kten::adaptive_avg_pool1d (in module 'AdaptiveAvgPool1d')") &&
                          ContainsSubstring("does not divide"));
  nn::Linear fc(3, 2);
  REQUIRE_THROWS_AS(kten::onnx::save((scratch() / "fc.onnx").string(), fc, {}), Error);
  // An output computed without the input (here: under a NoGradGuard) has no graph to trace.
  nn::Activation untraced("Untraced", [](const Tensor& x) {
    NoGradGuard no_grad;
    return x * 2.0;
  });
  untraced.to(d);
  REQUIRE_THROWS_WITH(kten::onnx::save(path, untraced, {randn({2, 3}, d, 3)}), ContainsSubstring("not computed from its input"));
  // An int64 input's reshape is not recorded: its view would be frozen, so it is refused.
  nn::Embedding table(10, 3);
  table.to(d);
  nn::Activation flat_lookup("FlatLookup", [&table](const Tensor& i) { return table(i.reshape({-1})); });
  flat_lookup.to(d);
  const Tensor indices = tensor(std::vector<std::int64_t>{1, 2, 3, 4}, {2, 2}, d);
  REQUIRE_THROWS_WITH(kten::onnx::save(path, flat_lookup, {indices}), ContainsSubstring("a view of the input"));
}

TEST_CASE("onnx: malformed and hostile files are FormatErrors at load, naming the node and op", "[onnx]") {
  const auto tmp = scratch();
  SECTION("missing, empty, garbage and truncated files") {
    require_load_fails((tmp / "kten-test-no-such.onnx").string(), {"no-such"});
    const std::string good = mlp().bytes();
    test::write_bytes((tmp / "kten-test-garbage.onnx").string(), std::string("\xff\xff\xff\x07 not a protobuf", 20));
    require_load_fails((tmp / "kten-test-garbage.onnx").string(), {"malformed or truncated"});
    for (std::size_t cut : {std::size_t{0}, good.size() / 3, good.size() / 2, good.size() - 3}) {
      test::write_bytes((tmp / "kten-test-cut.onnx").string(), good.substr(0, cut));
      CAPTURE(cut);
      REQUIRE_THROWS_AS(kten::onnx::load((tmp / "kten-test-cut.onnx").string(), test::device()), FormatError);
    }
  }
  SECTION("a dangling input") {
    Builder b = mlp();
    b.graph->mutable_node(1)->set_input(0, "nowhere");
    require_load_fails(b.write("kten-test-dangling.onnx"), {"node 'act' (Relu)", "'nowhere'"});
  }
  SECTION("a cycle") {
    Builder b = mlp();
    b.graph->mutable_node(0)->set_input(0, "r");  // fc1 reads act's output, act reads fc1's
    require_load_fails(b.write("kten-test-cycle.onnx"), {"(Gemm)", "cycle"});
  }
  SECTION("an unsupported op, opset or dtype") {
    Builder b = mlp();
    b.graph->mutable_node(1)->set_op_type("Celu");
    require_load_fails(b.write("kten-test-op.onnx"), {"node 'act' (Celu)", "'Celu' is not supported"});
    require_load_fails(mlp(10).write("kten-test-opset.onnx"), {"(Gemm)", "supported at opsets 13 to 23, not 10"});
    require_load_fails(mlp(12).write("kten-test-opset.onnx"), {"(Gemm)", "supported at opsets 13 to 23, not 12"});
    Builder c = mlp();
    c.graph->mutable_initializer(1)->set_data_type(10);  // float16
    require_load_fails(c.write("kten-test-dtype.onnx"), {"initializer 'fc1.bias'", "FLOAT16"});
    Builder e = mlp();
    e.graph->mutable_node(1)->set_domain("com.example");
    require_load_fails(e.write("kten-test-domain.onnx"), {"node 'act' (Relu)", "com.example"});
  }
  SECTION("initializer data that does not match its shape") {
    Builder b = mlp();
    b.graph->mutable_initializer(1)->set_raw_data(std::string(12, '\0'));  // 3 floats for shape [2]
    require_load_fails(b.write("kten-test-big.onnx"), {"initializer 'fc1.bias'", "12 bytes", "8 bytes"});
    Builder c = mlp();
    c.graph->mutable_initializer(1)->add_dims(1 << 30);  // a huge declared shape over 8 bytes
    require_load_fails(c.write("kten-test-small.onnx"), {"initializer 'fc1.bias'"});
    Builder e = mlp();  // no element, but strides past 64 bits (a fuzzer's finding)
    auto* t = e.graph->add_initializer();
    t->set_name("empty");
    t->set_data_type(1);
    for (std::int64_t dim : {std::int64_t{0}, std::int64_t{1} << 40, std::int64_t{1} << 40}) t->add_dims(dim);
    require_load_fails(e.write("kten-test-strides.onnx"), {"initializer 'empty'"});
  }
  SECTION("external data outside the model's folder") {
    for (const char* location : {"../outside.bin", "/etc/passwd", "a/../../outside.bin"}) {
      Builder b = mlp();
      auto* t = b.graph->mutable_initializer(1);
      t->clear_raw_data();
      t->set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
      auto* entry = t->add_external_data();
      entry->set_key("location");
      entry->set_value(location);
      CAPTURE(location);
      require_load_fails(b.write("kten-test-external.onnx"), {"initializer 'fc1.bias'", "outside the model's folder"});
    }
  }
  SECTION("external data beside the model is read") {
    const auto folder = tmp / "kten-test-external-ok";
    std::filesystem::create_directories(folder);
    const std::vector<float> bias = {0.05f, -0.05f};
    test::write_bytes((folder / "bias.bin").string(), std::string(8, 'x') + std::string(reinterpret_cast<const char*>(bias.data()), 8));
    Builder b = mlp();
    auto* t = b.graph->mutable_initializer(1);
    t->clear_raw_data();
    t->set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    const std::pair<const char*, const char*> entries[] = {{"location", "bias.bin"}, {"offset", "8"}, {"length", "8"}};
    for (const auto& [k, v] : entries) {
      auto* entry = t->add_external_data();
      entry->set_key(k);
      entry->set_value(v);
    }
    test::write_bytes((folder / "model.onnx").string(), b.bytes());
    auto net = kten::onnx::load((folder / "model.onnx").string(), test::device());
    auto reference = kten::onnx::load(mlp().write("kten-test-inline.onnx"), test::device());
    const Tensor x = randn({3, 3}, test::device(), 4);
    NoGradGuard no_grad;
    test::require_allclose<float>(net(x), test::host_doubles<float>(reference(x)), 0, 0);
  }
  SECTION("a wrong attribute or arity") {
    Builder b = mlp();
    b.graph->mutable_node(1)->add_input("x");  // Relu of two inputs
    require_load_fails(b.write("kten-test-arity.onnx"), {"node 'act' (Relu)", "2 inputs"});
    Builder c = mlp();
    auto* cast = c.node("Cast", {"y"}, {"z"}, "to_half");
    Builder::attr(cast, "to", 10);
    require_load_fails(c.write("kten-test-cast.onnx"), {"node 'to_half' (Cast)", "element type 10"});
  }
  SECTION("an initializer name that cannot be a qualified name") {
    Builder b = mlp();
    b.graph->mutable_initializer(1)->set_name("fc1..bias");
    b.graph->mutable_node(0)->set_input(2, "fc1..bias");
    require_load_fails(b.write("kten-test-dots.onnx"), {"'fc1..bias'"});
  }
}

TEST_CASE("onnx: a graph exported in training mode starts in train(), and the mode decides Dropout", "[onnx]") {
  Builder b(13);
  b.input("x", {-1, 1000});
  auto* ratio = b.graph->add_initializer();
  ratio->set_name("ratio");
  ratio->set_data_type(1);
  ratio->add_float_data(0.5f);
  auto* mode = b.graph->add_initializer();
  mode->set_name("training_mode");
  mode->set_data_type(9);
  mode->add_int32_data(1);
  b.node("Dropout", {"x", "ratio", "training_mode"}, {"y"}, "drop");
  b.output("y", {-1, 1000});
  const Device d = test::device();
  auto net = kten::onnx::load(b.write("kten-test-dropout.onnx"), d);
  REQUIRE(net.is_training());
  const Tensor x = ones({2, 1000}, d);
  const double kept = sum(ne(net(x), 0.0).astype(float32)).item<double>();
  REQUIRE(kept > 800);  // about half of 2000
  REQUIRE(kept < 1200);
  REQUIRE(max(net(x)).item<double>() == 2.0);  // kept ones scaled by 1 / (1 - p)
  net.eval();
  test::require_allclose<float>(net(x), std::vector<double>(2000, 1.0), 0, 0);
}

// The values of `t` on the host, for comparisons.
std::vector<double> values(const Tensor& t) { return test::host_doubles<double>(t.astype(float64)); }

// n weights of mixed signs, `scale` times -5 .. 5 in a scrambled order.
std::vector<float> ramp(std::int64_t n, float scale = 0.1f) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(scale * static_cast<float>((i * 7) % 11 - 5));
  return v;
}

TEST_CASE("onnx: Conv and ConvTranspose compute kten's convolutions, uneven pads included", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 4, 6, 7});
  b.input("s", {-1, 2, 5});
  b.floats("w", ramp(2 * 2 * 3 * 2), {2, 2, 3, 2});
  b.floats("bias", {0.5f, -0.5f}, {2});
  b.floats("wt", ramp(2 * 3 * 3, 0.2f), {2, 3, 3});
  auto* conv = b.node("Conv", {"x", "w", "bias"}, {"y"}, "conv");
  Builder::attr(conv, "pads", std::vector<std::int64_t>{1, 0, 0, 1});  // begins (H, W), then ends
  Builder::attr(conv, "strides", std::vector<std::int64_t>{1, 2});
  Builder::attr(conv, "dilations", std::vector<std::int64_t>{2, 1});
  Builder::attr(conv, "group", 2);
  auto* up = b.node("ConvTranspose", {"s", "wt"}, {"t"}, "up");
  Builder::attr(up, "strides", std::vector<std::int64_t>{2});
  Builder::attr(up, "pads", std::vector<std::int64_t>{1, 1});
  Builder::attr(up, "output_padding", std::vector<std::int64_t>{1});
  auto* crop = b.node("ConvTranspose", {"s", "wt"}, {"c"}, "crop");
  Builder::attr(crop, "pads", std::vector<std::int64_t>{2, 0});
  b.output("y", {-1, 2, -1, -1});
  b.output("t", {-1, 3, -1});
  b.output("c", {-1, 3, -1});
  auto net = kten::onnx::load(b.write("kten-test-conv.onnx"), d);
  const Tensor x = randn({3, 4, 6, 7}, d, 21), s = randn({2, 2, 5}, d, 22);
  const auto ys = net.run({x, s});
  const Tensor w = net.state_dict()[0].second, bias = net.state_dict()[1].second, wt = net.state_dict()[2].second;
  const Tensor want = conv2d(pad(x, {0, 1, 1, 0}), w, bias, {1, 2}, {0}, {2, 1}, 2);
  test::require_allclose<double>(ys[0].astype(float64), values(want), 1e-5, 1e-6);
  test::require_allclose<double>(ys[1].astype(float64), values(conv_transpose1d(s, wt, {}, {2}, {1}, {1})), 1e-5, 1e-6);
  REQUIRE(ys[2].shape() == Shape{2, 3, 5});  // 7 long unpadded, 2 cropped before
  test::require_allclose<double>(ys[2].astype(float64), values(conv_transpose1d(s, wt).narrow(2, 2, 5)), 1e-5, 1e-6);
  // Gradients reach the weights through kten's registered ops.
  net.zero_grad();
  sum(net.run({x, s})[0]).backward();
  Tensor w2 = w.detach();
  w2.requires_grad_(true);
  sum(conv2d(pad(x, {0, 1, 1, 0}), w2, bias.detach(), {1, 2}, {0}, {2, 1}, 2)).backward();
  test::require_allclose<double>(net.named_parameters()[0].slot->value.grad().astype(float64), values(w2.grad()), 1e-5, 1e-6);
}

TEST_CASE("onnx: MaxPool, AveragePool and GlobalAveragePool compute kten's pooling", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 2, 9});
  auto* max = b.node("MaxPool", {"x"}, {"mx"}, "max");
  Builder::attr(max, "kernel_shape", std::vector<std::int64_t>{2});
  Builder::attr(max, "strides", std::vector<std::int64_t>{2});
  Builder::attr(max, "ceil_mode", 1);
  auto* avg = b.node("AveragePool", {"x"}, {"av"}, "avg");
  Builder::attr(avg, "kernel_shape", std::vector<std::int64_t>{3});
  Builder::attr(avg, "strides", std::vector<std::int64_t>{2});
  Builder::attr(avg, "pads", std::vector<std::int64_t>{1, 1});
  Builder::attr(avg, "count_include_pad", 1);
  auto* ceil = b.node("AveragePool", {"x"}, {"ac"}, "avg_ceil");
  Builder::attr(ceil, "kernel_shape", std::vector<std::int64_t>{2});
  Builder::attr(ceil, "strides", std::vector<std::int64_t>{2});
  Builder::attr(ceil, "ceil_mode", 1);
  b.node("GlobalAveragePool", {"x"}, {"g"}, "global");
  for (const char* out : {"mx", "av", "ac", "g"}) b.output(out, {-1, 2, -1});
  auto net = kten::onnx::load(b.write("kten-test-pool.onnx"), d);
  std::vector<float> v;
  for (int i = 1; i <= 18; ++i) v.push_back(static_cast<float>(i % 2 == 0 ? i : -i));
  const Tensor x = tensor(v, {1, 2, 9}, d);
  const auto ys = net.run({x});
  // Windows of 2, 2 apart, the last one (element 9) past the end: ceil_mode keeps it.
  test::require_allclose<double>(ys[0].astype(float64), {2, 4, 6, 8, -9, 10, 12, 14, 16, 18}, 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), values(avg_pool1d(x, {3}, {2}, {1}, false, true)), 1e-6, 1e-6);
  test::require_allclose<double>(ys[2].astype(float64), values(avg_pool1d(x, {2}, {2}, {0}, true, false)), 1e-6, 1e-6);
  test::require_allclose<double>(ys[3].astype(float64), values(mean(x, {2}, true)), 1e-6, 1e-6);
}

TEST_CASE("onnx: auto_pad SAME_UPPER, SAME_LOWER and VALID, and pads kten's pools do not take", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 1, 5});
  b.input("p", {-1, 2, 6, 7});
  b.floats("w", ramp(2 * 2 * 3 * 2), {2, 2, 3, 2});
  const auto pool = [&](const char* op, const char* name, const char* auto_pad, int count_pad) {
    auto* n = b.node(op, {"x"}, {name}, name);
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2});
    Builder::attr_s(n, "auto_pad", auto_pad);
    if (count_pad) Builder::attr(n, "count_include_pad", 1);
    b.output(name, {-1, 1, -1});
  };
  pool("AveragePool", "avg_upper", "SAME_UPPER", 0);
  pool("AveragePool", "avg_lower", "SAME_LOWER", 0);
  pool("AveragePool", "avg_lower_counted", "SAME_LOWER", 1);
  pool("MaxPool", "max_lower", "SAME_LOWER", 0);
  pool("MaxPool", "max_valid", "VALID", 0);
  auto* uneven = b.node("AveragePool", {"x"}, {"avg_pads"}, "avg_pads");
  Builder::attr(uneven, "kernel_shape", std::vector<std::int64_t>{3});
  Builder::attr(uneven, "strides", std::vector<std::int64_t>{2});
  Builder::attr(uneven, "pads", std::vector<std::int64_t>{2, 1});
  b.output("avg_pads", {-1, 1, -1});
  for (const char* op : {"AveragePool", "MaxPool"}) {  // pads over half the kernel, which PyTorch refuses
    auto* wide = b.node(op, {"x"}, {op}, op);
    Builder::attr(wide, "kernel_shape", std::vector<std::int64_t>{3});
    Builder::attr(wide, "pads", std::vector<std::int64_t>{2, 2});
    b.output(op, {-1, 1, -1});
  }
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    auto* conv = b.node("Conv", {"p", "w"}, {mode}, mode);
    Builder::attr_s(conv, "auto_pad", mode);
    Builder::attr(conv, "strides", std::vector<std::int64_t>{2, 1});
    b.output(mode, {-1, 2, -1, -1});
  }
  auto net = kten::onnx::load(b.write("kten-test-auto-pad.onnx"), d);
  const Tensor x = tensor(std::vector<float>{1, -2, 4, 8, -16}, {1, 1, 5}, d), p = randn({2, 2, 6, 7}, d, 25);
  const auto ys = net.run({x, p});
  // Windows of 2, 5 outputs: the one pad at the end (UPPER) or the start (LOWER); uncounted, it
  // leaves the lone element's value, counted it halves it; MaxPool's pad never wins.
  test::require_allclose<double>(ys[0].astype(float64), {-0.5, 1, 6, -4, -16}, 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), {1, -0.5, 1, 6, -4}, 0, 0);
  test::require_allclose<double>(ys[2].astype(float64), {0.5, -0.5, 1, 6, -4}, 0, 0);
  test::require_allclose<double>(ys[3].astype(float64), {1, 1, 4, 8, 8}, 0, 0);
  test::require_allclose<double>(ys[4].astype(float64), {1, 4, 8, 8}, 0, 0);
  // Windows of 3, 2 apart, 2 pads before and 1 after: {p, p, 1}, {1, -2, 4}, {4, 8, -16}.
  test::require_allclose<double>(ys[5].astype(float64), {1, 1, -4.0 / 3}, 1e-6, 1e-6);
  test::require_allclose<double>(ys[6].astype(float64), {1, -0.5, 1, 10.0 / 3, -4.0 / 3, -4, -16}, 1e-6, 1e-6);
  test::require_allclose<double>(ys[7].astype(float64), {1, 1, 4, 8, 8, 8, -16}, 0, 0);
  // The 3x2 kernel, strides (2, 1) over 6x7: 3 x 7 outputs, one pad in each spatial axis, after
  // (UPPER) or before (LOWER); kten's pad takes (W before, W after, H before, H after).
  const Tensor w = net.state_dict()[0].second;
  test::require_allclose<double>(ys[8].astype(float64), values(conv2d(pad(p, {0, 1, 0, 1}), w, {}, {2, 1})), 1e-5, 1e-6);
  test::require_allclose<double>(ys[9].astype(float64), values(conv2d(pad(p, {1, 0, 1, 0}), w, {}, {2, 1})), 1e-5, 1e-6);
  REQUIRE(ys[8].shape() == Shape{2, 2, 3, 7});
  // SAME with ceil_mode, and uneven AveragePool pads with ceil_mode, are refused by name.
  for (const bool same : {true, false}) {
    Builder r(17);
    r.input("x", {1, 1, 5});
    auto* n = r.node(same ? "MaxPool" : "AveragePool", {"x"}, {"y"}, "refused");
    Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2});
    Builder::attr(n, "ceil_mode", 1);
    if (same) Builder::attr_s(n, "auto_pad", "SAME_UPPER");
    else Builder::attr(n, "pads", std::vector<std::int64_t>{1, 0});
    r.output("y", {1, 1, -1});
    require_load_fails(r.write("kten-test-refused-pads.onnx"),
                       {"'refused'", same ? "ceil_mode 1 with auto_pad SAME_UPPER" : "pads uneven or over half"});
  }
}

namespace {
// A PyTorch-ordered parameter's gate blocks (rows of `hidden`) in ONNX's order: LSTM i, f, g, o to
// i, o, f, c(g); GRU r, z, n to z, r, h. Host floats, for an initializer.
std::vector<float> onnx_gates(const Tensor& t, std::int64_t hidden, bool lstm) {
  std::vector<Tensor> g;
  for (std::int64_t i = 0; i * hidden < t.size(0); ++i) g.push_back(t.narrow(0, i * hidden, hidden));
  return (lstm ? cat({g[0], g[3], g[1], g[2]}, 0) : cat({g[1], g[0], g[2]}, 0)).contiguous().to(cpu()).to_vector<float>();
}
std::vector<float> joined(std::vector<std::vector<float>> parts) {
  std::vector<float> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}
}  // namespace

TEST_CASE("onnx: LSTM and GRU run nn::LSTM's and nn::GRU's recurrence with ONNX's gate order", "[onnx]") {
  const Device d = test::device();
  const std::int64_t steps = 4, batch = 2, in = 3, hidden = 2;
  nn::RNNOptions both;
  both.bidirectional = true;
  both.seed = 11;
  nn::LSTM lstm(in, hidden, both);  // parameters: w_ih, w_hh, b_ih, b_hh, then the reverse ones
  nn::RNNOptions one;
  one.batch_first = true;
  one.seed = 12;
  nn::GRU gru(in, hidden, one);
  std::vector<Tensor> lp, gp;
  for (const auto& p : lstm.named_parameters()) lp.push_back(p.slot->value);
  for (const auto& p : gru.named_parameters()) gp.push_back(p.slot->value);
  Builder b(17);
  b.input("x", {steps, batch, in});
  b.input("xb", {batch, steps, in});
  b.input("h0", {batch, 1, hidden});
  b.floats("W", joined({onnx_gates(lp[0], hidden, true), onnx_gates(lp[4], hidden, true)}), {2, 4 * hidden, in});
  b.floats("R", joined({onnx_gates(lp[1], hidden, true), onnx_gates(lp[5], hidden, true)}), {2, 4 * hidden, hidden});
  b.floats("B", joined({onnx_gates(lp[2], hidden, true), onnx_gates(lp[3], hidden, true), onnx_gates(lp[6], hidden, true),
                        onnx_gates(lp[7], hidden, true)}), {2, 8 * hidden});
  b.floats("GW", onnx_gates(gp[0], hidden, false), {1, 3 * hidden, in});
  b.floats("GR", onnx_gates(gp[1], hidden, false), {1, 3 * hidden, hidden});
  b.floats("GB", joined({onnx_gates(gp[2], hidden, false), onnx_gates(gp[3], hidden, false)}), {1, 6 * hidden});
  auto* l = b.node("LSTM", {"x", "W", "R", "B"}, {"Y", "Y_h", "Y_c"}, "lstm");
  Builder::attr(l, "hidden_size", hidden);
  Builder::attr_s(l, "direction", "bidirectional");
  auto* g = b.node("GRU", {"xb", "GW", "GR", "GB", "", "h0"}, {"GY", "GY_h"}, "gru");
  Builder::attr(g, "hidden_size", hidden);
  Builder::attr(g, "linear_before_reset", 1);
  Builder::attr(g, "layout", 1);
  b.output("Y", {steps, 2, batch, hidden});
  b.output("Y_h", {2, batch, hidden});
  b.output("Y_c", {2, batch, hidden});
  b.output("GY", {batch, steps, 1, hidden});
  b.output("GY_h", {batch, 1, hidden});
  auto net = kten::onnx::load(b.write("kten-test-recurrent.onnx"), d);
  lstm.to(d);
  gru.to(d);
  const Tensor x = randn({steps, batch, in}, d, 31), xb = randn({batch, steps, in}, d, 32), h0 = randn({batch, 1, hidden}, d, 33);
  const auto ys = net.run({x, xb, h0});
  auto [y, hc] = lstm.forward_state(x);
  // ONNX's Y is (L, directions, N, H); nn's output (L, N, directions H).
  test::require_allclose<double>(ys[0].astype(float64),
                                 values(y.reshape({steps, batch, 2, hidden}).permute({0, 2, 1, 3})), 1e-6, 1e-6);
  test::require_allclose<double>(ys[1].astype(float64), values(std::get<0>(hc)), 1e-6, 1e-6);
  test::require_allclose<double>(ys[2].astype(float64), values(std::get<1>(hc)), 1e-6, 1e-6);
  // layout 1: Y (N, L, directions, H), Y_h and initial_h (N, directions, H); nn's state (directions, N, H).
  auto [gy, gh] = gru.forward_state(xb, h0.transpose(0, 1));
  test::require_allclose<double>(ys[3].astype(float64), values(gy.unsqueeze(2)), 1e-6, 1e-6);
  test::require_allclose<double>(ys[4].astype(float64), values(gh.transpose(0, 1)), 1e-6, 1e-6);
  // Gradients reach W, R and B through the reordering.
  net.zero_grad();
  sum(net.run({x, xb, h0})[0]).backward();
  CHECK(max(abs(net.named_parameters()[0].slot->value.grad())).item<double>() > 0);
  // GRU's linear_before_reset 0 (ONNX's default) is not PyTorch's GRU: refused by name.
  Builder r(17);
  r.input("x", {steps, batch, in});
  r.floats("GW", onnx_gates(gp[0], hidden, false), {1, 3 * hidden, in});
  r.floats("GR", onnx_gates(gp[1], hidden, false), {1, 3 * hidden, hidden});
  Builder::attr(r.node("GRU", {"x", "GW", "GR"}, {"y"}, "refused"), "hidden_size", hidden);
  r.output("y", {steps, 1, batch, hidden});
  require_load_fails(r.write("kten-test-gru-reset.onnx"), {"'refused'", "(GRU)", "linear_before_reset 0"});
}

TEST_CASE("onnx: Pad's constant, reflect and edge modes are kten's pad", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 2, 3, 4});
  b.ints("pads", {0, 0, 1, 2, 0, 0, 2, 1});  // H and W: (1, 2) and (2, 1)
  auto* value = b.graph->add_initializer();
  value->set_name("value");
  value->set_data_type(1);
  value->add_float_data(1.5f);
  b.node("Pad", {"x", "pads", "value"}, {"c"}, "constant");
  Builder::attr_s(b.node("Pad", {"x", "pads"}, {"r"}, "reflect"), "mode", "reflect");
  Builder::attr_s(b.node("Pad", {"x", "pads"}, {"e"}, "edge"), "mode", "edge");
  for (const char* out : {"c", "r", "e"}) b.output(out, {-1, 2, 6, 7});
  auto net = kten::onnx::load(b.write("kten-test-pad.onnx"), d);
  const Tensor x = randn({2, 2, 3, 4}, d, 23);
  const auto ys = net.run({x});
  const Shape torch_order = {2, 1, 1, 2};
  test::require_allclose<double>(ys[0].astype(float64), values(pad(x, torch_order, nn::PaddingMode::zeros, 1.5)), 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), values(pad(x, torch_order, nn::PaddingMode::reflect)), 0, 0);
  test::require_allclose<double>(ys[2].astype(float64), values(pad(x, torch_order, nn::PaddingMode::replicate)), 0, 0);
}

TEST_CASE("onnx: Resize's nearest and linear modes are kten's interpolate", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 2, 3, 5});
  b.ints("sizes", {2, 2, 7, 8});
  auto* scales = b.graph->add_initializer();
  scales->set_name("scales");
  scales->set_data_type(1);
  scales->add_dims(4);
  for (float f : {1.f, 1.f, 2.f, 1.5f}) scales->add_float_data(f);
  auto* nearest = b.node("Resize", {"x", "", "", "sizes"}, {"n"}, "nearest");
  Builder::attr_s(nearest, "coordinate_transformation_mode", "asymmetric");
  Builder::attr_s(nearest, "nearest_mode", "floor");
  auto* half = b.node("Resize", {"x", "", "scales"}, {"h"}, "half_pixel");
  Builder::attr_s(half, "mode", "linear");
  auto* corners = b.node("Resize", {"x", "", "", "sizes"}, {"a"}, "align_corners");
  Builder::attr_s(corners, "mode", "linear");
  Builder::attr_s(corners, "coordinate_transformation_mode", "align_corners");
  for (const char* out : {"n", "h", "a"}) b.output(out, {-1, 2, -1, -1});
  auto net = kten::onnx::load(b.write("kten-test-resize.onnx"), d);
  const Tensor x = randn({2, 2, 3, 5}, d, 24);
  const auto ys = net.run({x});
  using nn::InterpolateMode;
  test::require_allclose<double>(ys[0].astype(float64), values(interpolate(x, Shape{7, 8}, InterpolateMode::nearest)), 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), values(interpolate(x, std::vector<double>{2, 1.5}, InterpolateMode::bilinear)), 1e-6, 1e-6);
  test::require_allclose<double>(ys[2].astype(float64), values(interpolate(x, Shape{7, 8}, InterpolateMode::bilinear, true)), 1e-6, 1e-6);
}

TEST_CASE("onnx: BatchNormalization keeps running statistics as buffers and updates them in training", "[onnx]") {
  const Device d = test::device();
  const auto build = [](int training_mode) {
    Builder b(15);
    b.input("x", {-1, 3, 4});
    b.floats("bn.weight", {1.5f, 0.5f, -1.f}, {3});
    b.floats("bn.bias", {0.1f, 0.2f, 0.3f}, {3});
    b.floats("bn.running_mean", {0.5f, -0.5f, 0.f}, {3});
    b.floats("bn.running_var", {2.f, 0.5f, 1.f}, {3});
    b.floats("in.scale", {2.f, -1.f, 0.5f}, {3});
    b.floats("in.bias", {0.f, 1.f, -1.f}, {3});
    auto* bn = b.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y"}, "bn");
    Builder::attr_f(bn, "momentum", 0.75f);  // ONNX's: the running value's weight
    Builder::attr(bn, "training_mode", training_mode);
    Builder::attr_f(b.node("InstanceNormalization", {"x", "in.scale", "in.bias"}, {"i"}, "in"), "epsilon", 1e-3f);
    b.output("y", {-1, 3, 4});
    b.output("i", {-1, 3, 4});
    return b;
  };
  const Tensor x = randn({5, 3, 4}, d, 25);
  const Tensor w = tensor({1.5f, 0.5f, -1.f}, d), bias = tensor({0.1f, 0.2f, 0.3f}, d);
  auto eval = kten::onnx::load(build(0).write("kten-test-bn-eval.onnx"), d);
  REQUIRE_FALSE(eval.is_training());
  REQUIRE(eval.named_parameters().size() == 4);  // weight, bias and the InstanceNormalization's
  REQUIRE(eval.named_buffers().size() == 2);
  REQUIRE(eval.named_buffers()[0].first == "bn.running_mean");
  const auto ys = eval.run({x});
  const Tensor mean0 = tensor({0.5f, -0.5f, 0.f}, d), var0 = tensor({2.f, 0.5f, 1.f}, d);
  test::require_allclose<double>(ys[0].astype(float64), values(batch_norm(x, mean0, var0, w, bias)), 1e-5, 1e-6);
  const Tensor scale = tensor({2.f, -1.f, 0.5f}, d), shift = tensor({0.f, 1.f, -1.f}, d);
  test::require_allclose<double>(ys[1].astype(float64), values(instance_norm(x, {}, {}, scale, shift, true, 0.1, 1e-3)), 1e-5, 1e-6);

  auto train = kten::onnx::load(build(1).write("kten-test-bn-train.onnx"), d);
  REQUIRE(train.is_training());
  const Tensor mean1 = tensor({0.5f, -0.5f, 0.f}, d), var1 = tensor({2.f, 0.5f, 1.f}, d);  // updated by batch_norm
  const Tensor want = batch_norm(x, mean1, var1, w, bias, true, 0.25);
  test::require_allclose<double>(train.run({x})[0].astype(float64), values(want), 1e-5, 1e-6);
  test::require_allclose<double>(train.named_buffers()[0].second.astype(float64), values(mean1), 1e-6, 1e-7);
  // ONNX's running variance takes the batch's population variance; PyTorch's module (batch_norm)
  // the unbiased one, 20/19 times it here.
  const Tensor centred = x - mean(x, {0, 2}, true);
  const Tensor var_onnx = var0 * 0.75 + mean(centred * centred, {0, 2}) * 0.25;
  test::require_allclose<double>(train.named_buffers()[1].second.astype(float64), values(var_onnx), 1e-6, 1e-7);
  double gap = 0;
  for (std::size_t i = 0; i < 3; ++i) gap = std::max(gap, std::fabs(values(var_onnx)[i] - values(var1)[i]));
  REQUIRE(gap > 1e-3);  // so that the check above tells the two apart
  REQUIRE(values(mean1) != values(mean0));
  train.eval();  // the running statistics again, now the updated ones
  test::require_allclose<double>(train.run({x})[0].astype(float64), values(batch_norm(x, mean1, var_onnx, w, bias)), 1e-5, 1e-6);

  // Opset 13's training form (PyTorch 1.13 at opset 13): no training_mode, five outputs.
  const auto opset13 = [](bool read_saved) {
    Builder b(13);
    b.input("x", {-1, 3, 4});
    b.floats("w", {1.5f, 0.5f, -1.f}, {3});
    b.floats("b", {0.1f, 0.2f, 0.3f}, {3});
    b.floats("mean", {0.5f, -0.5f, 0.f}, {3});
    b.floats("var", {2.f, 0.5f, 1.f}, {3});
    b.node("BatchNormalization", {"x", "w", "b", "mean", "var"}, {"y", "m", "v", "saved_mean", "saved_var"}, "bn13");
    b.output("y", {-1, 3, 4});
    if (read_saved) b.output("saved_mean", {3});
    return b;
  };
  auto old = kten::onnx::load(opset13(false).write("kten-test-bn13.onnx"), d);
  REQUIRE(old.is_training());
  const Tensor mean2 = tensor({0.5f, -0.5f, 0.f}, d), var2 = tensor({2.f, 0.5f, 1.f}, d);
  test::require_allclose<double>(old.run({x})[0].astype(float64), values(batch_norm(x, mean2, var2, w, bias, true)), 1e-5, 1e-6);
  test::require_allclose<double>(old.named_buffers()[0].second.astype(float64), values(mean2), 1e-6, 1e-7);
  require_load_fails(opset13(true).write("kten-test-bn13-saved.onnx"), {"'bn13'", "saved_mean and saved_var"});
}

TEST_CASE("onnx: GatherElements and ScatterElements are kten's gather and scatters", "[onnx]") {
  const Device d = test::device();
  Builder b(16);
  b.input("x", {4, 3});
  b.input("index", {2, 3}, 7);
  b.input("src", {2, 3});
  Builder::attr(b.node("GatherElements", {"x", "index"}, {"g"}, "gather"), "axis", 0);
  Builder::attr_s(b.node("ScatterElements", {"x", "index", "src"}, {"add"}, "scatter_add"), "reduction", "add");
  b.node("ScatterElements", {"x", "index", "src"}, {"put"}, "scatter");
  b.output("g", {2, 3});
  b.output("add", {4, 3});
  b.output("put", {4, 3});
  auto net = kten::onnx::load(b.write("kten-test-scatter.onnx"), d);
  const Tensor x = randn({4, 3}, d, 26), src = randn({2, 3}, d, 27);
  const Tensor index = tensor(std::vector<std::int64_t>{3, 0, 1, 1, 2, 3}, {2, 3}, d);
  const auto ys = net.run({x, index, src});
  test::require_allclose<double>(ys[0].astype(float64), values(gather(x, 0, index)), 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), values(scatter_add(x, 0, index, src)), 1e-6, 1e-7);
  std::vector<double> put = values(x);
  const std::vector<double> s = values(src);
  const std::int64_t at[] = {3, 0, 1, 1, 2, 3};
  for (int k = 0; k < 6; ++k) put[static_cast<std::size_t>(at[k] * 3 + k % 3)] = s[static_cast<std::size_t>(k)];
  test::require_allclose<double>(ys[2].astype(float64), put, 0, 0);
}

TEST_CASE("onnx: Slice takes steps other than 1, backwards too (PyTorch's Pad pads are flipped so)", "[onnx]") {
  const Device d = test::device();
  Builder b(17);
  b.input("x", {-1, 5});
  b.ints("back_starts", {-1});
  b.ints("back_ends", {std::numeric_limits<std::int64_t>::min()});
  b.ints("axis", {1});
  b.ints("back", {-1});
  b.ints("starts", {1});
  b.ints("ends", {100});
  b.ints("two", {2});
  b.node("Slice", {"x", "back_starts", "back_ends", "axis", "back"}, {"r"}, "reverse");
  b.node("Slice", {"x", "starts", "ends", "axis", "two"}, {"o"}, "odd");
  b.output("r", {-1, 5});
  b.output("o", {-1, 2});
  auto net = kten::onnx::load(b.write("kten-test-slice-steps.onnx"), d);
  const Tensor x = tensor({{1.f, 2.f, 3.f, 4.f, 5.f}, {6.f, 7.f, 8.f, 9.f, 10.f}}, d);
  const auto ys = net.run({x});
  test::require_allclose<double>(ys[0].astype(float64), {5, 4, 3, 2, 1, 10, 9, 8, 7, 6}, 0, 0);
  test::require_allclose<double>(ys[1].astype(float64), {2, 4, 7, 9}, 0, 0);
}

TEST_CASE("onnx: grid and graph attributes kten cannot honour are FormatErrors naming the node and op", "[onnx]") {
  struct Refusal {
    const char* op;
    const char* attribute;
    const char* value;  // a string attribute's value, or null for the integer list {2, 2}
    const char* message;
  };
  const Refusal refusals[] = {
      {"Conv", "auto_pad", "SAME", "it must be NOTSET, VALID, SAME_UPPER or SAME_LOWER"},
      {"ConvTranspose", "auto_pad", "SAME_UPPER", "auto_pad SAME_UPPER"},
      {"ConvTranspose", "output_shape", nullptr, "output_shape"},
      {"MaxPool", "dilations", nullptr, "a dilation of 2"},
      {"Pad", "mode", "wrap", "mode wrap"},
      {"Resize", "mode", "cubic", "mode cubic"},
      {"Resize", "coordinate_transformation_mode", "pytorch_half_pixel", "pytorch_half_pixel"},
      {"ScatterElements", "reduction", "mul", "reduction mul"},
  };
  for (const Refusal& r : refusals) {
    Builder b(17);
    b.input("x", {1, 2, 4, 4});
    b.floats("w", ramp(2 * 2 * 2 * 2), {2, 2, 2, 2});
    b.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
    b.ints("index", {0});
    const std::string op = r.op;
    const std::vector<std::string> in = op == "Conv" || op == "ConvTranspose" ? std::vector<std::string>{"x", "w"}
                                        : op == "Pad"                         ? std::vector<std::string>{"x", "pads"}
                                        : op == "ScatterElements"             ? std::vector<std::string>{"x", "x", "x"}
                                                                              : std::vector<std::string>{"x"};
    auto* n = b.node(op, in, {"y"}, "refused");
    if (op == "MaxPool" || op == "AveragePool") Builder::attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
    if (r.value) Builder::attr_s(n, r.attribute, r.value);
    else Builder::attr(n, r.attribute, std::vector<std::int64_t>{2, 2});
    b.output("y", {1, 2, 4, 4});
    INFO(op << " " << r.attribute);
    require_load_fails(b.write("kten-test-refused.onnx"), {"'refused'", "(" + op + ")", r.message});
  }
}

TEST_CASE("onnx: the supported operators are listed with their opsets", "[onnx]") {
  const auto ops = kten::onnx::supported_ops();
  REQUIRE(kten::onnx::available());
  bool gemm = false;
  for (const auto& op : ops) {
    REQUIRE(op.first_opset >= 1);
    REQUIRE(op.last_opset >= op.first_opset);
    gemm = gemm || op.name == "Gemm";
  }
  REQUIRE(gemm);
}

// --- save() of any module, by tracing one call (DESIGN 1c) -----------------------------------------

namespace {

using Block = kten::test::DesignBlock;  // DESIGN 1c's composed model (tests/design_block.hpp)

// A small U-Net: circular Conv2d, GroupNorm, MaxPool2d, bilinear Upsample, ConvTranspose2d, a
// skip concatenation, a 1x1 head.
class SmallUNet : public nn::Module {
 public:
  SmallUNet() {
    nn::ConvOptions circular;
    circular.padding = {1};
    circular.padding_mode = nn::PaddingMode::circular;
    circular.seed = 51;
    enc_ = register_module("enc", nn::Conv2d(1, 4, {3, 3}, circular));
    norm_ = register_module("norm", nn::GroupNorm(2, 4));
    pool_ = register_module("pool", nn::MaxPool2d(Shape{2}));
    nn::ConvOptions same;
    same.padding = {1};
    same.seed = 52;
    mid_ = register_module("mid", nn::Conv2d(4, 8, {3, 3}, same));
    nn::UpsampleOptions up;
    up.scale_factor = {2};
    up.mode = nn::InterpolateMode::bilinear;
    up_ = register_module("up", nn::Upsample(up));
    nn::ConvTransposeOptions t;
    t.stride = {2};
    t.seed = 53;
    tconv_ = register_module("tconv", nn::ConvTranspose2d(8, 4, {2, 2}, t));
    nn::ConvOptions head;
    head.seed = 54;
    head_ = register_module("head", nn::Conv2d(16, 2, {1, 1}, head));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor e = relu((*norm_)((*enc_)(x)));
    const Tensor m = gelu((*mid_)((*pool_)(e)));
    return (*head_)(cat({(*up_)(m), (*tconv_)(m), e}, 1));
  }
  std::string name() const override { return "SmallUNet"; }

 private:
  std::shared_ptr<nn::Conv2d> enc_, mid_, head_;
  std::shared_ptr<nn::GroupNorm> norm_;
  std::shared_ptr<nn::MaxPool2d> pool_;
  std::shared_ptr<nn::Upsample> up_;
  std::shared_ptr<nn::ConvTranspose2d> tconv_;
};

// A module wrapping an imported (and trained) model: traced through the model's own ops.
class Wrapped : public nn::Module {
 public:
  explicit Wrapped(std::shared_ptr<kten::onnx::Model> net) { net_ = register_module("net", std::move(net)); }
  Tensor forward(const Tensor& x) override { return tanh((*net_)(x)) * 2.0; }
  std::string name() const override { return "Wrapped"; }

 private:
  std::shared_ptr<kten::onnx::Model> net_;
};

// The elementwise, view and reduction ops of save()'s table that the models above do not use,
// in one forward pass over (N, 4, 6).
class OpZoo : public nn::Module {
 public:
  OpZoo() { w_ = register_parameter("w", randn({4, 3}, cpu(), 120)); }
  Tensor forward(const Tensor& x) override {
    const Tensor a = x.transpose(1, 2);                          // (N, 6, 4)
    const Tensor c = a.permute({0, 2, 1}).narrow(2, 1, 4);       // (N, 4, 4)
    const Tensor s = c.select(1, 2);                             // (N, 4)
    const Tensor e = s.unsqueeze(1).expand({x.shape()[0], 3, 4});  // (N, 3, 4)
    const Tensor q = sum(e, {1}, true).squeeze(1) / 3.0;         // (N, 4)
    const Tensor m = mean(c, {2}) + max(c, {1}, false);          // (N, 4)
    const std::vector<Tensor> parts = {
        pow(abs(m) + 1.0, 1.5), pow(abs(q) + 0.5, tanh(q)), log1p(abs(q)), expm1(q * 0.1), sqrt(abs(m) + 1.0),
        fma(q, m, s), 1.0 / (2.0 - sigmoid(q)), softplus(q, 2.0, 20.0), leaky_relu(q, 0.1), silu(q), gelu(q),
        where(eq(s, s), s * 2.0, s), (q.astype(float64) * 0.5).astype(float32), -exp(-abs(q)), log(abs(q) + 1.0),
        sin(q) - cos(q), erf(q), clamp(q, -0.5, std::numeric_limits<double>::infinity()), sum(matmul(a, w_), {1}), index_select(s, 1, tensor(std::vector<std::int64_t>{3, 0, 3}, x.device())),
        sum(x.reshape({x.shape()[0], 2, 12}), {2}), x.reshape({-1, 24}).narrow(1, 0, 2)};
    return log_softmax(cat(parts, 1), 1);
  }
  std::string name() const override { return "OpZoo"; }

 private:
  Tensor w_;
};

// max |got - want| over the largest |want| (at least 1e-6): the outputs' relative difference.
double relative_difference(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  double diff = 0, largest = 1e-6;
  for (std::size_t i = 0; i < g.size(); ++i) {
    diff = std::max(diff, std::fabs(g[i] - w[i]));
    largest = std::max(largest, std::fabs(w[i]));
  }
  return diff / largest;
}

// Writes `module` traced on `example`, checks the file with the ONNX checker (save() does) and
// loads it on the device under test: the reloaded model gives the module's outputs at the traced
// batch size and at another (the batch axis is dynamic), to 1e-5 relative.
kten::onnx::Model traced_round_trip(const std::string& file, nn::Module& module, const Tensor& example, const Tensor& other) {
  const std::string path = (scratch() / file).string();
  kten::onnx::save(path, module, {example});
  auto net = kten::onnx::load(path, test::device());
  REQUIRE(net.is_training() == module.is_training());
  REQUIRE(net.input_names() == std::vector<std::string>{"input"});
  REQUIRE(net.output_names() == std::vector<std::string>{"output"});
  for (const Tensor& x : {example, other}) {
    INFO(file << ": a batch of " << x.shape()[0] << " (traced with " << example.shape()[0] << ")");
    NoGradGuard no_grad;
    const Tensor want = module(x), got = net(x);
    REQUIRE(got.shape() == want.shape());
    const double difference = relative_difference(got, want);
    CHECK(difference <= 1e-5);
  }
  return net;
}

std::vector<std::string> sorted_names(const nn::StateDict& named) {
  std::vector<std::string> names;
  for (const auto& [name, t] : named) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

// The buffer `name` of `m`.
Tensor buffer(nn::Module& m, const std::string& name) {
  for (const auto& [n, t] : m.named_buffers())
    if (n == name) return t;
  FAIL("no buffer " << name);
  return Tensor();
}

std::vector<std::string> parameter_names(nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("onnx: save() traces DESIGN's Block in evaluation mode: state_dict names, running statistics as buffers", "[onnx]") {
  const Device d = test::device();
  Block block(3, 41, 0.7);
  block.to(d);
  // Running statistics of their own (two training calls), then evaluation mode.
  block(randn({4, 3, 6, 6}, d, 60));
  block(randn({4, 3, 6, 6}, d, 61));
  block.eval();
  auto net = traced_round_trip("kten-test-block-eval.onnx", block, randn({2, 3, 6, 6}, d, 62), randn({5, 3, 6, 6}, d, 63));
  REQUIRE(parameter_names(net) == parameter_names(block));
  REQUIRE(parameter_names(net) == std::vector<std::string>{"conv.bias", "conv.weight", "gain", "norm.bias", "norm.weight"});
  // BatchNorm's running statistics are buffers with the module's values; the int64 "calls" and
  // num_batches_tracked, which no op reads, are not in the graph.
  REQUIRE(sorted_names(net.named_buffers()) == std::vector<std::string>{"norm.running_mean", "norm.running_var"});
  for (const auto& [name, t] : net.named_buffers())
    for (const auto& [other, u] : block.named_buffers())
      if (name == other) test::require_allclose<float>(t, test::host_doubles<float>(u), 0, 0);
  // The reloaded model trains: one Adam step on each gives the same parameters.
  const Tensor x = randn({3, 3, 6, 6}, d, 64);
  optim::Adam a(1e-2), b(1e-2);
  a.zero_grad(block);
  b.zero_grad(net);
  nn::MSELoss()(block(x), zeros({3, 3, 6, 6}, d)).backward();
  nn::MSELoss()(net(x), zeros({3, 3, 6, 6}, d)).backward();
  a.step(block);
  b.step(net);
  const auto trained = block.state_dict();
  for (const auto& [name, t] : net.state_dict())
    for (const auto& [other, u] : trained)
      if (name == other) test::require_allclose<float>(t, test::host_doubles<float>(u), 1e-5, 1e-6);
}

TEST_CASE("onnx: save() traces DESIGN's Block in training mode, which the file keeps, without changing the module", "[onnx]") {
  const Device d = test::device();
  Block block(3, 41, 0.7);
  block.to(d);
  block.train();
  const std::vector<double> mean_before = values(buffer(block, "norm.running_mean"));
  const std::string path = (scratch() / "kten-test-block-train.onnx").string();
  kten::onnx::save(path, block, {randn({2, 3, 5, 5}, d, 70)});
  // The traced call ran BatchNorm in training mode; save() put the running statistics back.
  REQUIRE(values(buffer(block, "norm.running_mean")) == mean_before);
  REQUIRE(values(buffer(block, "norm.num_batches_tracked")) == std::vector<double>{0});
  auto net = kten::onnx::load(path, d);
  REQUIRE(net.is_training());
  for (const std::int64_t batch : {2, 6}) {
    const Tensor x = randn({batch, 3, 5, 5}, d, 71 + static_cast<std::uint64_t>(batch));
    const Tensor want = block(x), got = net(x);  // the batch's statistics; both update their running ones
    CHECK(relative_difference(got, want) <= 1e-5);
  }
  // The running means agree; the variances differ by design: the file is ONNX's, whose running
  // variance takes the batch's population variance (the module's, PyTorch's, the unbiased one).
  const auto mine = block.named_buffers();
  for (const auto& [name, t] : net.named_buffers())
    for (const auto& [other, u] : mine)
      if (name == other && name != "norm.running_var") CHECK(relative_difference(t, u) <= 1e-5);
      else if (name == other) CHECK(relative_difference(t, u) > 1e-4);
  // In evaluation mode both then read the same running statistics.
  for (const auto& [name, t] : net.named_buffers())
    if (name == "norm.running_var") buffer(block, "norm.running_var").copy_from(t);
  net.eval();
  block.eval();
  NoGradGuard no_grad;
  const Tensor x = randn({4, 3, 5, 5}, d, 79);
  CHECK(relative_difference(net(x), block(x)) <= 1e-5);
}

TEST_CASE("onnx: save() traces a small U-Net (circular padding, GroupNorm, pooling, upsampling, cat, ConvTranspose2d)", "[onnx]") {
  const Device d = test::device();
  SmallUNet unet;
  unet.to(d);
  unet.eval();
  auto net = traced_round_trip("kten-test-unet.onnx", unet, randn({2, 1, 8, 8}, d, 80), randn({3, 1, 8, 8}, d, 81));
  REQUIRE(parameter_names(net) == parameter_names(unet));
  REQUIRE(net.named_buffers().empty());
}

TEST_CASE("onnx: save() traces a 1-D CNN (replicate padding, AvgPool1d, Flatten, Linear, softmax) and an MLP", "[onnx]") {
  const Device d = test::device();
  nn::Sequential cnn;
  nn::ConvOptions o;
  o.padding = {1};
  o.padding_mode = nn::PaddingMode::replicate;
  o.seed = 90;
  cnn.add(nn::Conv1d(2, 4, {3}, o));
  cnn.add(nn::LeakyReLU(0.2));
  nn::PoolOptions pool;
  pool.stride = {2};
  pool.padding = {1};
  pool.ceil_mode = true;
  cnn.add(nn::AvgPool1d({3}, pool));
  cnn.add(nn::AdaptiveAvgPool1d(Shape{3}));  // of 9: equal windows, an AveragePool
  cnn.add(nn::Flatten());
  cnn.add(nn::Linear(12, 5, {true, float32, 91}));
  cnn.add(nn::Activation("Softmax", [](const Tensor& x) { return softmax(x, 1); }));
  cnn.to(d);
  cnn.eval();
  auto net = traced_round_trip("kten-test-cnn1d.onnx", cnn, randn({3, 2, 16}, d, 92), randn({7, 2, 16}, d, 93));
  REQUIRE(parameter_names(net) == parameter_names(cnn));

  nn::Sequential mlp;
  mlp.add(nn::Linear(4, 8, {true, float32, 94}));
  mlp.add(nn::Tanh());
  mlp.add(nn::Dropout(0.5));  // evaluation mode: no op
  mlp.add(nn::Linear(8, 8, {true, float32, 95}));
  mlp.add(nn::Activation("Clamped", [](const Tensor& x) { return clamp(x * 3.0 - 0.5, -1.0, 2.0) + exp(-x) / 4.0; }));
  mlp.add(nn::Linear(8, 3, {false, float32, 96}));
  mlp.add(nn::Activation("LogSoftmax", [](const Tensor& x) { return log_softmax(x, -1); }));
  mlp.to(d);
  mlp.eval();
  auto mlp_net = traced_round_trip("kten-test-mlp-traced.onnx", mlp, randn({2, 4}, d, 97), randn({9, 4}, d, 98));
  REQUIRE(parameter_names(mlp_net) == parameter_names(mlp));
}

TEST_CASE("onnx: save() traces an Embedding and Linear model over an int64 input", "[onnx]") {
  const Device d = test::device();
  nn::Sequential model;
  model.add(nn::Embedding(10, 3, float32, 100));
  model.add(nn::Flatten());
  model.add(nn::Linear(12, 2, {true, float32, 101}));
  model.add(nn::Sigmoid());
  model.to(d);
  model.eval();
  const Tensor example = tensor(std::vector<std::int64_t>{1, 2, 3, 4, 9, 8, 7, 0}, {2, 4}, d);
  const Tensor other = tensor(std::vector<std::int64_t>{5, 5, 0, 1, 2, 3, 4, 6, 7, 8, 9, 0}, {3, 4}, d);
  auto net = traced_round_trip("kten-test-embedding.onnx", model, example, other);
  REQUIRE(parameter_names(net) == std::vector<std::string>{"0.weight", "2.bias", "2.weight"});
}

TEST_CASE("onnx: save() writes an imported model after training, alone (its graph) or inside a module (traced)", "[onnx]") {
  const Device d = test::device();
  auto imported = std::make_shared<kten::onnx::Model>(kten::onnx::load(mlp().write("kten-test-mlp-to-train.onnx"), d));
  const Tensor x = randn({6, 3}, d, 110);
  optim::Adam adam(5e-2);
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad(*imported);
    nn::MSELoss()((*imported)(x), ones({6, 1}, d)).backward();
    adam.step(*imported);
  }
  // Alone: its own graph, with the trained weights (no example needed).
  const std::string path = (scratch() / "kten-test-mlp-trained.onnx").string();
  kten::onnx::save(path, *imported);
  auto again = kten::onnx::load(path, d);
  {
    NoGradGuard no_grad;
    for (const Tensor& input : {x, randn({11, 3}, d, 111)}) CHECK(relative_difference(again(input), (*imported)(input)) <= 1e-6);
  }
  // Inside a module: traced through its ops; its initializers keep their names under "net.".
  Wrapped wrapped(imported);
  wrapped.to(d);
  wrapped.eval();
  auto net = traced_round_trip("kten-test-wrapped.onnx", wrapped, randn({4, 3}, d, 112), randn({7, 3}, d, 113));
  REQUIRE(parameter_names(net) == parameter_names(wrapped));
  REQUIRE(parameter_names(net) ==
          std::vector<std::string>{"net.fc1.bias", "net.fc1.weight", "net.fc2.bias", "net.fc2.weight"});
}

TEST_CASE("onnx: save() traces the other ops of its table: views, reductions, elementwise and grid options", "[onnx]") {
  const Device d = test::device();
  OpZoo zoo;
  zoo.to(d);
  zoo.eval();
  traced_round_trip("kten-test-zoo-traced.onnx", zoo, randn({2, 4, 6}, d, 121), randn({5, 4, 6}, d, 122));

  // 1-D grids: strided, dilated, grouped Conv1d; reflect and constant pads; linear (align_corners)
  // and nearest resampling by size and by scale; InstanceNorm1d; MaxPool1d with ceil_mode;
  // ConvTranspose1d with output_padding; global average pooling.
  nn::Sequential grid;
  nn::ConvOptions o;
  o.stride = {2};
  o.padding = {2};
  o.dilation = {2};
  o.groups = 2;
  o.seed = 123;
  grid.add(nn::Conv1d(2, 4, {3}, o));
  grid.add(nn::Activation("Pads", [](const Tensor& v) {
    return pad(pad(v, {1, 2}, nn::PaddingMode::reflect), {2, 1}, nn::PaddingMode::zeros, 0.5);
  }));
  nn::UpsampleOptions linear;
  linear.size = {15};
  linear.mode = nn::InterpolateMode::linear;
  linear.align_corners = true;
  grid.add(nn::Upsample(linear));
  grid.add(nn::InstanceNorm1d(4, 1e-5, true));
  nn::UpsampleOptions nearest;
  nearest.scale_factor = {1.5};
  grid.add(nn::Upsample(nearest));
  nn::PoolOptions ceil;
  ceil.stride = {2};
  ceil.padding = {1};
  ceil.ceil_mode = true;
  grid.add(nn::MaxPool1d(Shape{3}, ceil));
  nn::ConvTransposeOptions t;
  t.stride = {2};
  t.padding = {1};
  t.output_padding = {1};
  t.seed = 124;
  grid.add(nn::ConvTranspose1d(4, 3, {3}, t));
  grid.add(nn::Activation("Nearest", [](const Tensor& v) { return interpolate(v, Shape{7}); }));
  grid.add(nn::AdaptiveAvgPool1d(Shape{1}));
  grid.add(nn::Flatten());
  grid.to(d);
  grid.eval();
  traced_round_trip("kten-test-grid1d.onnx", grid, randn({2, 2, 12}, d, 125), randn({4, 2, 12}, d, 126));

  // 3-D: circular Conv3d, InstanceNorm3d without affine, AvgPool3d, global pooling.
  nn::Sequential volume;
  nn::ConvOptions v;
  v.padding = {1};
  v.padding_mode = nn::PaddingMode::circular;
  v.seed = 127;
  volume.add(nn::Conv3d(1, 2, {3, 3, 3}, v));
  volume.add(nn::InstanceNorm3d(2));
  volume.add(nn::ReLU());  // else the global mean of normalised values is 0 up to rounding
  volume.add(nn::AvgPool3d(Shape{2}));
  volume.add(nn::AdaptiveAvgPool3d(Shape{1}));
  volume.to(d);
  volume.eval();
  traced_round_trip("kten-test-volume.onnx", volume, randn({2, 1, 4, 4, 4}, d, 128), randn({3, 1, 4, 4, 4}, d, 129));

  // Graph ops over tensors of the traced batch (their index constants fix it): gather, scatter_add.
  nn::Activation graph_ops("GraphOps", [](const Tensor& h) {
    const Tensor columns = tensor(std::vector<std::int64_t>{0, 2, 1, 0, 1, 2}, {2, 3}, h.device());
    const Tensor rows = tensor(std::vector<std::int64_t>{0, 1, 1, 0, 1, 0}, {2, 3}, h.device());
    return scatter_add(h * 0.5, 0, rows, gather(h, 1, columns) + 1.0);
  });
  graph_ops.to(d);
  graph_ops.eval();
  const Tensor h = randn({2, 3}, d, 130);
  traced_round_trip("kten-test-graph-ops.onnx", graph_ops, h, h);
}
