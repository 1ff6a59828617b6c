// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Today's ONNX (issue 49): what opsets 18 to 23 and IR 9 to 13 changed in the operators kten
// imports, the fields newer than Debian 12's onnx 1.12 classes, and model-local functions. Each
// form is written node by node and run on the device under test against values computed here on
// the host; each refusal names the node, the op and what is not supported. Last, every registered
// op of one tensor is loaded from each of its ONNX forms and saved to its own.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <kten/onnx.hpp>

#include "onnx_builder.hpp"
#include "ops/registry.hpp"
#include "onnx_reference.hpp"
#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;
using test::Builder;

namespace {

// A float output of unknown shape.
void output(Builder& b, const std::string& name) {
  Builder::declare(b.graph->add_output(), name, {});
  b.graph->mutable_output(b.graph->output_size() - 1)->mutable_type()->mutable_tensor_type()->mutable_shape();
}

// A graph at `opset` (IR 10, as PyTorch 2.x's files) over a float input "x" of `shape`.
Builder over(int opset, const Shape& shape) {
  Builder b(opset);
  b.model.set_ir_version(10);
  b.input("x", shape);
  return b;
}

// Loads and runs `b` on x (moved to the device under test); every output as float64 on the host.
std::vector<Tensor> run(const Builder& b, const std::string& file, const Tensor& x) {
  auto net = kten::onnx::load(b.write(file), test::device());
  std::vector<Tensor> out;
  for (const Tensor& y : net.run({x.to(test::device())})) out.push_back(y.to(cpu()).astype(float64));
  return out;
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Loading or running `b` is a kten::Error (a FormatError, or a ShapeError for an axis named twice)
// holding every part.
void require_refused(const Builder& b, const std::string& file, const Tensor& x, const std::vector<std::string>& parts) {
  try {
    (void)run(b, file, x);
    FAIL(file << ": loaded and ran");
  } catch (const Error& e) {
    INFO(e.what());
    for (const auto& part : parts) CHECK_THAT(e.what(), ContainsSubstring(part));
  }
}

const std::vector<float> kX = {0.5f, -1.f, 2.f, 3.f, -0.25f, 1.5f};  // x of shape (2, 3)

Tensor x23() { return tensor(kX, {2, 3}); }

}  // namespace

TEST_CASE("onnx: from opset 18 the reductions take their axes as an input", "[onnx]") {
  const auto row = [](int r, auto f) {
    double acc = 0;
    for (int j = 0; j < 3; ++j) acc = f(acc, static_cast<double>(kX[static_cast<std::size_t>(3 * r + j)]), j);
    return acc;
  };
  struct Case {
    const char* op;
    double (*per_row)(int);
  };
  static const auto sum = [](int r, auto g) { double s = 0; for (int j = 0; j < 3; ++j) s += g(kX[static_cast<std::size_t>(3 * r + j)]); return s; };
  const Case cases[] = {
      {"ReduceMean", [](int r) { return sum(r, [](double v) { return v; }) / 3; }},
      {"ReduceSum", [](int r) { return sum(r, [](double v) { return v; }); }},
      {"ReduceL1", [](int r) { return sum(r, [](double v) { return std::fabs(v); }); }},
      {"ReduceL2", [](int r) { return std::sqrt(sum(r, [](double v) { return v * v; })); }},
      {"ReduceSumSquare", [](int r) { return sum(r, [](double v) { return v * v; }); }},
      {"ReduceLogSumExp", [](int r) { return std::log(sum(r, [](double v) { return std::exp(v); })); }},
  };
  for (int opset : {18, 20, 23}) {
    for (const Case& c : cases) {
      INFO(c.op << " at opset " << opset);
      Builder b = over(opset, {2, 3});
      b.ints("axes", {-1});
      Builder::attr(b.node(c.op, {"x", "axes"}, {"y"}, "crafted"), "keepdims", std::int64_t{0});
      output(b, "y");
      test::require_allclose<double>(run(b, "kten-reduce.onnx", x23())[0], {c.per_row(0), c.per_row(1)}, 2e-6, 2e-6);
    }
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      Builder b = over(opset, {2, 3});
      b.ints("axes", {1});
      b.node(op, {"x", "axes"}, {"y"}, "crafted");
      output(b, "y");
      const bool max = std::string(op) == "ReduceMax";
      const Tensor y = run(b, "kten-reduce.onnx", x23())[0];
      REQUIRE(y.shape() == Shape{2, 1});
      test::require_allclose<double>(y, {row(0, [&](double a, double v, int j) { return j == 0 ? v : max ? std::max(a, v) : std::min(a, v); }),
                                         row(1, [&](double a, double v, int j) { return j == 0 ? v : max ? std::max(a, v) : std::min(a, v); })});
    }
  }
  SECTION("a log-sum-exp over several axes, kept") {
    Builder b = over(18, {2, 3});
    b.ints("axes", {0, 1});
    b.node("ReduceLogSumExp", {"x", "axes"}, {"y"}, "crafted");
    output(b, "y");
    double s = 0;
    for (float v : kX) s += std::exp(static_cast<double>(v));
    const Tensor y = run(b, "kten-reduce.onnx", x23())[0];
    REQUIRE(y.shape() == Shape{1, 1});
    test::require_allclose<double>(y, {std::log(s)}, 2e-6, 2e-6);
  }
  SECTION("the axes in the form of another opset are refused") {
    Builder b = over(18, {2, 3});
    Builder::attr(b.node("ReduceMean", {"x"}, {"y"}, "crafted"), "axes", std::vector<std::int64_t>{1});
    output(b, "y");
    require_refused(b, "kten-reduce-old.onnx", x23(), {"'crafted' (ReduceMean)", "at opset 18 the axes are an input"});
    Builder c = over(17, {2, 3});
    c.ints("axes", {1});
    c.node("ReduceMean", {"x", "axes"}, {"y"}, "crafted");
    output(c, "y");
    require_refused(c, "kten-reduce-new.onnx", x23(), {"'crafted' (ReduceMean)", "at opset 17 the axes are an attribute"});
    Builder d = over(18, {2, 3});
    d.ints("axes", {1, -1});
    d.node("ReduceSum", {"x", "axes"}, {"y"}, "crafted");
    output(d, "y");
    require_refused(d, "kten-reduce-twice.onnx", x23(), {"'crafted' (ReduceSum)", "axis 1 is named more than once"});
  }
}

TEST_CASE("onnx: Split's num_outputs, Pad's axes and wrap mode, Resize's axes (opsets 18 and 19)", "[onnx]") {
  SECTION("Split num_outputs: chunks of ceil(extent / n), the last smaller") {
    Builder b = over(18, {5});
    Builder::attr(b.node("Split", {"x"}, {"a", "b"}, "crafted"), "num_outputs", std::int64_t{2});
    output(b, "a");
    output(b, "b");
    const auto y = run(b, "kten-split.onnx", tensor(std::vector<float>{1, 2, 3, 4, 5}));
    REQUIRE(values(y[0]) == std::vector<double>{1, 2, 3});
    REQUIRE(values(y[1]) == std::vector<double>{4, 5});
    Builder c = over(18, {5});
    Builder::attr(c.node("Split", {"x"}, {"a", "b"}, "crafted"), "num_outputs", std::int64_t{3});
    output(c, "a");
    output(c, "b");
    require_refused(c, "kten-split-count.onnx", tensor(std::vector<float>{1, 2, 3, 4, 5}), {"'crafted' (Split)", "num_outputs"});
  }
  SECTION("Pad with axes pads those axes only") {
    Builder b = over(18, {2, 3});
    b.ints("pads", {1, 2});
    b.ints("axes", {-1});
    b.node("Pad", {"x", "pads", "", "axes"}, {"y"}, "crafted");
    output(b, "y");
    const Tensor y = run(b, "kten-pad-axes.onnx", x23())[0];
    REQUIRE(y.shape() == Shape{2, 6});
    REQUIRE(values(y) == std::vector<double>{0, 0.5, -1, 2, 0, 0, 0, 3, -0.25, 1.5, 0, 0});
  }
  SECTION("Pad's wrap mode (opset 19) is circular padding") {
    Builder b = over(19, {2, 3});
    b.ints("pads", {0, 1, 0, 2});
    Builder::attr_s(b.node("Pad", {"x", "pads"}, {"y"}, "crafted"), "mode", "wrap");
    output(b, "y");
    REQUIRE(values(run(b, "kten-pad-wrap.onnx", x23())[0]) ==
            std::vector<double>{2, 0.5, -1, 2, 0.5, -1, 1.5, 3, -0.25, 1.5, 3, -0.25});
    Builder c = over(18, {2, 3});
    c.ints("pads", {0, 1, 0, 2});
    Builder::attr_s(c.node("Pad", {"x", "pads"}, {"y"}, "crafted"), "mode", "wrap");
    output(c, "y");
    require_refused(c, "kten-pad-wrap-18.onnx", x23(), {"'crafted' (Pad)", "opset-19 mode"});
  }
  SECTION("Resize with axes scales those axes only; antialias is refused") {
    for (const bool antialias : {false, true}) {
      Builder b = over(18, {1, 1, 2, 2});
      auto* scales = b.floats("scales", {2.f, 2.f}, {2});
      (void)scales;
      auto* n = b.node("Resize", {"x", "", "scales"}, {"y"}, "crafted");
      Builder::attr(n, "axes", std::vector<std::int64_t>{2, 3});
      Builder::attr_s(n, "mode", "nearest");
      Builder::attr_s(n, "coordinate_transformation_mode", "asymmetric");
      Builder::attr_s(n, "nearest_mode", "floor");
      if (antialias) Builder::attr(n, "antialias", std::int64_t{1});
      output(b, "y");
      const Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2});
      if (antialias) {
        require_refused(b, "kten-resize-aa.onnx", x, {"'crafted' (Resize)", "antialias 1 is not supported"});
        continue;
      }
      const Tensor y = run(b, "kten-resize-axes.onnx", x)[0];
      REQUIRE(y.shape() == Shape{1, 1, 4, 4});
      REQUIRE(values(y) == std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    }
  }
}

TEST_CASE("onnx: Gelu (20), LayerNormalization's statistics, GroupNormalization (18, 21), RMSNormalization (23)", "[onnx]") {
  const Tensor x = x23();
  SECTION("Gelu, exact and tanh") {
    for (const char* approximate : {"none", "tanh"}) {
      Builder b = over(20, {2, 3});
      Builder::attr_s(b.node("Gelu", {"x"}, {"y"}, "crafted"), "approximate", approximate);
      output(b, "y");
      std::vector<double> want;
      for (float f : kX) {
        const double v = f;
        want.push_back(std::string(approximate) == "none"
                           ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                           : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
      }
      test::require_allclose<double>(run(b, "kten-gelu.onnx", x)[0], want, 2e-6, 2e-6);
    }
    Builder b = over(19, {2, 3});
    b.node("Gelu", {"x"}, {"y"}, "crafted");
    output(b, "y");
    require_refused(b, "kten-gelu-19.onnx", x, {"'crafted' (Gelu)", "opsets 20 to 23, not 19"});
  }
  SECTION("LayerNormalization gives its Mean and InvStdDev") {
    for (int opset : {17, 18, 23}) {
      Builder b = over(opset, {2, 3});
      b.floats("scale", {1.f, 2.f, 3.f}, {3});
      b.floats("bias", {0.f, 0.5f, -1.f}, {3});
      b.node("LayerNormalization", {"x", "scale", "bias"}, {"y", "mean", "inv_std"}, "crafted");
      for (const char* name : {"y", "mean", "inv_std"}) output(b, name);
      const auto out = run(b, "kten-layernorm.onnx", x);
      std::vector<double> y, mu, inv;
      for (int r = 0; r < 2; ++r) {
        double m = 0, v = 0;
        for (int j = 0; j < 3; ++j) m += kX[static_cast<std::size_t>(3 * r + j)] / 3.0;
        for (int j = 0; j < 3; ++j) v += std::pow(kX[static_cast<std::size_t>(3 * r + j)] - m, 2) / 3.0;
        mu.push_back(m);
        inv.push_back(1 / std::sqrt(v + 1e-5));
        for (int j = 0; j < 3; ++j) y.push_back((kX[static_cast<std::size_t>(3 * r + j)] - m) * inv.back() * (j + 1) + (j == 0 ? 0 : j == 1 ? 0.5 : -1));
      }
      INFO("opset " << opset);
      test::require_allclose<double>(out[0], y, 2e-5, 2e-5);
      REQUIRE(out[1].shape() == Shape{2, 1});
      test::require_allclose<double>(out[1], mu, 2e-6, 2e-6);
      test::require_allclose<double>(out[2], inv, 2e-5, 2e-5);
    }
  }
  SECTION("GroupNormalization: per group at opset 18, per channel at 21") {
    const Tensor g = tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 9}, {1, 4, 2});
    for (int opset : {18, 21}) {
      Builder b = over(opset, {1, 4, 2});
      const std::vector<float> scale = opset == 18 ? std::vector<float>{2, 3} : std::vector<float>{2, 2, 3, 3};
      const std::vector<float> bias = opset == 18 ? std::vector<float>{1, -1} : std::vector<float>{1, 1, -1, -1};
      b.floats("scale", scale, {static_cast<std::int64_t>(scale.size())});
      b.floats("bias", bias, {static_cast<std::int64_t>(bias.size())});
      Builder::attr(b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "crafted"), "num_groups", std::int64_t{2});
      output(b, "y");
      const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 9};
      std::vector<double> want;
      for (int group = 0; group < 2; ++group) {
        double m = 0, var = 0;
        for (int i = 0; i < 4; ++i) m += v[static_cast<std::size_t>(4 * group + i)] / 4;
        for (int i = 0; i < 4; ++i) var += std::pow(v[static_cast<std::size_t>(4 * group + i)] - m, 2) / 4;
        for (int i = 0; i < 4; ++i)
          want.push_back((v[static_cast<std::size_t>(4 * group + i)] - m) / std::sqrt(var + 1e-5) * (group == 0 ? 2 : 3) + (group == 0 ? 1 : -1));
      }
      INFO("opset " << opset);
      test::require_allclose<double>(run(b, "kten-groupnorm.onnx", g)[0], want, 2e-5, 2e-5);
    }
    Builder b = over(21, {1, 4, 2});
    b.floats("scale", {1, 1, 1, 1}, {4});
    b.floats("bias", {0, 0, 0, 0}, {4});
    b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "crafted");
    output(b, "y");
    require_refused(b, "kten-groupnorm-groups.onnx", g, {"'crafted' (GroupNormalization)", "'num_groups' must be given"});
  }
  SECTION("RMSNormalization") {
    Builder b = over(23, {2, 3});
    b.floats("scale", {1.f, 2.f, 3.f}, {3});
    b.node("RMSNormalization", {"x", "scale"}, {"y"}, "crafted");
    output(b, "y");
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      double ms = 0;
      for (int j = 0; j < 3; ++j) ms += std::pow(kX[static_cast<std::size_t>(3 * r + j)], 2) / 3.0;
      for (int j = 0; j < 3; ++j) want.push_back(kX[static_cast<std::size_t>(3 * r + j)] / std::sqrt(ms + 1e-5) * (j + 1));
    }
    test::require_allclose<double>(run(b, "kten-rmsnorm.onnx", x)[0], want, 2e-5, 2e-5);
  }
}

TEST_CASE("onnx: IR versions 3 to 13 and opsets up to 23 (each op its own); newer fields read, ignored or refused by name", "[onnx]") {
  const Tensor x = x23();
  const auto relu = [](int opset, int ir) {
    Builder b = over(opset, {2, 3});
    b.model.set_ir_version(ir);
    b.node("Relu", {"x"}, {"y"}, "crafted");
    output(b, "y");
    return b;
  };
  // onnx 1.12's checker refuses IR 10 and opset 20 whatever their merit: kten's own checks judge them.
  REQUIRE(values(run(relu(20, 10), "kten-ir10.onnx", x)[0]) == std::vector<double>{0.5, 0, 2, 3, 0, 1.5});
  REQUIRE(values(run(relu(23, 11), "kten-ir11.onnx", x)[0]) == std::vector<double>{0.5, 0, 2, 3, 0, 1.5});
  REQUIRE(values(run(relu(20, 13), "kten-ir13.onnx", x)[0]) == std::vector<double>{0.5, 0, 2, 3, 0, 1.5});  // onnx 1.20's
  require_refused(relu(20, 14), "kten-ir14.onnx", x, {"IR version is 14", "IR versions 3 to 13"});
  require_refused(relu(24, 11), "kten-opset24.onnx", x, {"opset is 24", "opsets 1 to 23"});
  require_refused(relu(12, 8), "kten-opset12.onnx", x, {"(Relu)", "supported at opsets 13 to 23, not 12"});

  SECTION("metadata is ignored; device configurations and unknown fields are refused") {
    Builder b = relu(20, 10);
    test::add_bytes_field(b.graph->mutable_node(0), 9, std::string("\x0a\x01k\x12\x01v", 6));
    REQUIRE(values(run(b, "kten-metadata.onnx", x)[0]).size() == 6);
    Builder c = relu(20, 11);
    test::add_bytes_field(c.graph->mutable_node(0), 10, std::string());
    require_refused(c, "kten-device-config.onnx", x, {"NodeProto.device_configurations", "not support"});
    Builder d = relu(20, 10);
    test::add_varint_field(d.graph->mutable_node(0), 99, 1);
    require_refused(d, "kten-field-99.onnx", x, {"the model.graph.node[0]", "field 99 of onnx.NodeProto"});
    Builder e = relu(20, 10);  // a known message field as a varint: protobuf keeps it as an unknown one
    test::add_varint_field(e.graph->mutable_node(0), 5, 1);
    require_refused(e, "kten-attribute-varint.onnx", x, {"the model.graph.node[0].attribute[0]", "not a message"});
  }
  SECTION("element types kten lacks are named") {
    Builder b = relu(20, 10);
    auto* t = b.graph->add_initializer();
    t->set_name("f8");
    t->set_data_type(17);
    t->add_dims(1);
    t->set_raw_data(std::string(1, '\0'));
    require_refused(b, "kten-float8.onnx", x, {"initializer 'f8'", "FLOAT8E4M3FN", "does not support"});
  }
  SECTION("an attribute set twice is refused") {
    Builder b = over(20, {2, 3});
    auto* n = b.node("LeakyRelu", {"x"}, {"y"}, "crafted");
    Builder::attr_f(n, "alpha", 0.1f);
    Builder::attr_f(n, "alpha", 0.2f);
    output(b, "y");
    require_refused(b, "kten-attr-twice.onnx", x, {"'crafted' (LeakyRelu)", "'alpha' twice"});
  }
}

namespace {

// A model-local function "local.AddScaled"(a, b) = a + alpha * b, alpha an attribute (default 2,
// given as IR 9's attribute_proto, a field onnx 1.12's classes do not know), with an overload
// "half" whose default is 0.5.
void add_scaled(Builder& b, const std::string& overload, float alpha) {
  auto* f = b.model.add_functions();
  f->set_domain("local");
  f->set_name("AddScaled");
  f->add_input("a");
  f->add_input("b");
  f->add_output("out");
  f->add_attribute("alpha");
  auto* o = f->add_opset_import();
  o->set_domain("");
  o->set_version(18);
  auto* k = f->add_node();
  k->set_op_type("Constant");
  k->add_output("k");
  auto* ref = k->add_attribute();
  ref->set_name("value_float");
  ref->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("b");
  mul->add_input("k");
  mul->add_output("scaled");
  auto* add = f->add_node();
  add->set_op_type("Add");
  add->add_input("a");
  add->add_input("scaled");
  add->add_output("out");
  ::onnx::AttributeProto fallback;
  fallback.set_name("alpha");
  fallback.set_type(::onnx::AttributeProto_AttributeType_FLOAT);
  fallback.set_f(alpha);
  test::add_bytes_field(f, 11, fallback.SerializeAsString());
  if (!overload.empty()) test::add_bytes_field(f, 13, overload);
}

::onnx::NodeProto* call(Builder& b, const std::string& fn, const std::vector<std::string>& in, const std::string& out,
                        const std::string& overload = "") {
  auto* n = b.node(fn, in, {out}, "call_" + out);
  n->set_domain("local");
  if (!overload.empty()) test::add_bytes_field(n, 8, overload);
  return n;
}

}  // namespace

TEST_CASE("onnx: model-local functions are inlined: attribute references, defaults, overloads, nesting", "[onnx]") {
  Builder b = over(20, {2, 3});
  auto* local = b.model.add_opset_import();
  local->set_domain("local");
  local->set_version(1);
  add_scaled(b, "", 2.f);
  add_scaled(b, "half", 0.5f);
  call(b, "AddScaled", {"x", "x"}, "y");                        // x + 2x
  Builder::attr_f(call(b, "AddScaled", {"x", "y"}, "z"), "alpha", -1.f);  // x - 3x
  call(b, "AddScaled", {"z", "x"}, "w", "half");               // -2x + x/2
  output(b, "w");
  output(b, "y");
  const auto out = run(b, "kten-functions.onnx", x23());
  std::vector<double> w, y;
  for (float v : kX) {
    w.push_back(-1.5 * v);
    y.push_back(3.0 * v);
  }
  test::require_allclose<double>(out[0], w, 1e-6, 1e-6);
  test::require_allclose<double>(out[1], y, 1e-6, 1e-6);

  SECTION("a function that calls itself is refused") {
    Builder c = over(20, {2, 3});
    auto* l = c.model.add_opset_import();
    l->set_domain("local");
    l->set_version(1);
    auto* f = c.model.add_functions();
    f->set_domain("local");
    f->set_name("Loop");
    f->add_input("a");
    f->add_output("out");
    auto* self = f->add_node();
    self->set_op_type("Loop");
    self->set_domain("local");
    self->add_input("a");
    self->add_output("out");
    call(c, "Loop", {"x"}, "y");
    output(c, "y");
    require_refused(c, "kten-recursive.onnx", x23(), {"nested 32 deep"});
  }
}

namespace {

// GELU and two reductions over a Linear: the forms save() writes differently from opset 18 (a
// reduction's axes as an input) and 20 (a Gelu node).
class Reduced : public nn::Module {
 public:
  Reduced() { fc_ = register_module("fc", nn::Linear(4, 4, {true, float32, 5})); }
  Tensor forward(const Tensor& x) override {
    const Tensor h = gelu((*fc_)(x));
    return h - mean(h, {1}, true) + max(h, {1}, true);
  }
  std::string name() const override { return "Reduced"; }

 private:
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace

TEST_CASE("onnx: save() writes opsets 17 to 23 on request, each in its own forms", "[onnx]") {
  Reduced net;
  net.to(test::device());
  const Tensor x = randn({3, 4}, test::device(), 6);
  const Tensor want = net(x);
  for (int opset : {17, 18, 20, 23}) {
    INFO("opset " << opset);
    const std::string path = (test::scratch() / ("kten-opset-" + std::to_string(opset) + ".onnx")).string();
    kten::onnx::save(path, net, {randn({2, 4}, test::device(), 7)}, opset);
    ::onnx::ModelProto m;
    REQUIRE(m.ParseFromString(test::read_bytes(path)));
    REQUIRE(m.opset_import(0).version() == opset);
    REQUIRE(m.ir_version() == (opset == 17 ? 8 : 10));
    bool gelu_node = false, axes_input = false;
    for (const auto& n : m.graph().node()) {
      gelu_node = gelu_node || n.op_type() == "Gelu";
      if (n.op_type() == "ReduceMean") axes_input = n.input_size() == 2;
    }
    CHECK(gelu_node == (opset >= 20));
    CHECK(axes_input == (opset >= 18));
    auto loaded = kten::onnx::load(path, test::device());
    REQUIRE(loaded.opset() == opset);
    test::require_allclose<double>(loaded(x).astype(float64), values(want.astype(float64)), 1e-5, 1e-6);
    test::keep_for_onnx_runtime(path, "kten-reduced-opset" + std::to_string(opset), {x}, want);
  }
  const std::string path = (test::scratch() / "kten-opset-bad.onnx").string();
  for (int opset : {16, 24}) {
    try {
      kten::onnx::save(path, net, {x}, opset);
      FAIL("opset " << opset << " was written");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), ContainsSubstring("kten writes opsets 17 to 23"));
    }
  }
  auto loaded = kten::onnx::load((test::scratch() / "kten-opset-20.onnx").string(), test::device());
  try {
    kten::onnx::save(path, loaded, {}, 18);
    FAIL("a loaded opset-20 model was written at 18");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), ContainsSubstring("at its own opset, 20, not 18"));
  }
  kten::onnx::save(path, loaded, {}, 20);  // its own: fine
}

TEST_CASE("onnx: issue 49's new operators run and refuse what they cannot read by name", "[onnx]") {
  const Tensor x = x23();  // {{0.5, -1, 2}, {3, -0.25, 1.5}}
  const auto one = [](const char* op, std::vector<std::string> in, int outputs, auto set) {
    Builder b = over(23, {2, 3});
    b.ints("two", {2});
    b.ints("one", {1});
    b.ints("three", {3});
    b.ints("none", {});
    b.ints("reps", {1, -1});
    b.floats("half_four", {2.f}, {1});
    std::vector<std::string> out{"y"};
    for (int i = 1; i < outputs; ++i) out.push_back("y" + std::to_string(i));
    set(b.node(op, in, out, "crafted"));
    for (const std::string& o : out) output(b, o);
    return b;
  };
  const auto none = [](::onnx::NodeProto*) {};
  SECTION("values") {
    REQUIRE(values(run(one("TopK", {"x", "two"}, 2, none), "kten-topk.onnx", x)[0]) == std::vector<double>{2, 0.5, 3, 1.5});
    REQUIRE(values(run(one("TopK", {"x", "two"}, 2, none), "kten-topk.onnx", x)[1]) == std::vector<double>{2, 0, 0, 2});
    REQUIRE(values(run(one("CumSum", {"x", "one"}, 1, [](auto* n) { Builder::attr(n, "reverse", std::int64_t{1}); }),
                       "kten-cumsum.onnx", x)[0]) == std::vector<double>{1.5, 1, 2, 4.25, 1.25, 1.5});
    REQUIRE(values(run(one("ArgMin", {"x"}, 1, [](auto* n) { Builder::attr(n, "axis", std::int64_t{1}); }), "kten-argmin.onnx", x)[0]) ==
            std::vector<double>{1, 1});
    REQUIRE(values(run(one("Einsum", {"x", "x"}, 1, [](auto* n) { Builder::attr_s(n, "equation", "ij,kj->ik"); }),
                       "kten-einsum.onnx", x)[0]) == std::vector<double>{5.25, 4.75, 4.75, 11.3125});
    REQUIRE(values(run(one("Mod", {"x", "half_four"}, 1, none), "kten-mod.onnx", x)[0]) == std::vector<double>{0.5, 1, 0, 1, 1.75, 1.5});
    REQUIRE(values(run(one("Trilu", {"x"}, 1, none), "kten-trilu.onnx", x)[0]) == std::vector<double>{0.5, -1, 2, 0, -0.25, 1.5});
  }
  SECTION("refusals name the node, the op and the value") {
    require_refused(one("Mod", {"x", "x"}, 1, [](auto* n) { Builder::attr(n, "fmod", std::int64_t{2}); }), "kten-mod2.onnx", x,
                    {"'crafted' (Mod)", "fmod 2"});
    require_refused(one("CumSum", {"x", "one"}, 1, [](auto* n) { Builder::attr(n, "exclusive", std::int64_t{3}); }),
                    "kten-cumsum3.onnx", x, {"(CumSum)", "exclusive 3"});
    require_refused(one("TopK", {"x", "reps"}, 2, none), "kten-topk-k.onnx", x, {"(TopK)", "K must be one value"});
    require_refused(one("TopK", {"x", "three"}, 2, [](auto* n) { Builder::attr(n, "axis", std::int64_t{0}); }), "kten-topk-big.onnx", x,
                    {"(TopK)", "k = 3 is outside [0, 2]"});
    require_refused(one("Tile", {"x", "reps"}, 1, none), "kten-tile.onnx", x, {"(Tile)", "negative repeat"});
    require_refused(one("Trilu", {"x", "none"}, 1, none), "kten-trilu-k.onnx", x, {"(Trilu)", "k must be one value, not 0"});
    require_refused(one("Einsum", {"x"}, 1, [](auto* n) { Builder::attr_s(n, "equation", "i->i"); }), "kten-einsum-rank.onnx", x,
                    {"(Einsum)", "names 1 axes of an operand with 2"});
    require_refused(one("Einsum", {"x"}, 1, [](auto* n) { Builder::attr_s(n, "equation", "ij->k"); }), "kten-einsum-out.onnx", x,
                    {"(Einsum)", "an output subscript appears twice or in no operand"});
    require_refused(one("ArgMax", {"x"}, 1, [](auto* n) { Builder::attr(n, "axis", std::int64_t{2}); }), "kten-argmax-axis.onnx", x,
                    {"(ArgMax)", "axis 2"});
    require_refused(one("NegativeLogLikelihoodLoss", {"x", "x"}, 1, [](auto* n) { Builder::attr_s(n, "reduction", "avg"); }),
                    "kten-nll.onnx", x, {"(NegativeLogLikelihoodLoss)", "reduction 'avg'"});
    require_refused(one("And", {"x", "x"}, 1, none), "kten-and.onnx", x, {"(And)", "takes booleans"});
    require_refused(one("Attention", {"x", "x", "x"}, 1, [](auto* n) { Builder::attr(n, "qk_matmul_output_mode", std::int64_t{4}); }),
                    "kten-attention-mode.onnx", x, {"(Attention)", "qk_matmul_output_mode 4 (0 to 3)"});
    require_refused(one("Attention", {"x", "x", "x"}, 1, none), "kten-attention-rank.onnx", x, {"(Attention)", "must all be 3-D or 4-D"});
  }
}

TEST_CASE("onnx: ReduceProd is halves multiplied: its gradient is the product of the others, zeros included", "[onnx]") {
  Builder b = over(18, {2, 3});
  b.ints("axes", {1});
  Builder::attr(b.node("ReduceProd", {"x", "axes"}, {"y"}, "crafted"), "keepdims", std::int64_t{0});
  output(b, "y");
  auto net = kten::onnx::load(b.write("kten-reduceprod.onnx"), test::device());
  Tensor x = tensor(std::vector<float>{0.f, -1.f, 2.f, 3.f, -0.25f, 1.5f}, {2, 3}).to(test::device());
  x.requires_grad_();
  const Tensor y = net.run({x})[0];
  REQUIRE(values(y.detach().to(cpu()).astype(float64)) == std::vector<double>{0, -1.125});
  sum(y).backward();
  REQUIRE(values(x.grad().to(cpu()).astype(float64)) == std::vector<double>{-2, 0, 0, -0.375, 4.5, -0.75});
}

TEST_CASE("onnx: every registered op of one tensor and no other argument loads from its ONNX forms and saves to its own",
          "[onnx]") {
  // Driven by the registry: an op added with its ONNX forms is checked here without a line of its own.
  const Device d = test::device();
  const Tensor x = uniform({3, 4}, 0.5, 1.5, d, 1);  // inside every such op's domain (log, sqrt, ...)
  int imported = 0, exported = 0;
  for (const ops::OpDef& op : ops::registry()) {
    if (op.arity != 1 || op.dtypes != ops::DTypes::floating || op.api != op.name + "(Tensor)") continue;
    INFO(op.name);
    const Tensor want = op.forward({x}, {});
    for (const ops::OnnxImport& form : op.onnx_import) {
      if (form.min_inputs != 1) continue;
      INFO("from " << form.op_type);
      Builder b(std::max(17, form.first_opset));
      b.input("x", {3, 4});
      b.node(form.op_type, {"x"}, {"y"});
      b.output("y", {3, 4});
      auto net = kten::onnx::load(b.write("kten-test-one-" + op.name + ".onnx"), d);
      test::require_allclose<float>(net(x), test::host_doubles<float>(want), 1e-6, 1e-7);
      ++imported;
    }
    if (op.onnx_export.empty()) continue;
    nn::Activation layer(op.name, [&op](const Tensor& t) { return op.forward({t}, {}); });
    layer.to(d);
    const std::string path = (test::scratch() / ("kten-test-saved-" + op.name + ".onnx")).string();
    kten::onnx::save(path, layer, {x});
    auto loaded = kten::onnx::load(path, d);
    test::require_allclose<float>(loaded(x), test::host_doubles<float>(want), 1e-5, 1e-6);  // log1p and expm1 as Log/Exp
    ++exported;
  }
  INFO(imported << " ONNX forms loaded, " << exported << " ops saved");
  CHECK(imported >= 17);  // as many as on 2026-12-08: a form lost is a failure
  CHECK(exported >= 20);
}
