// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// PyTorch interchange: state dicts (state_dict, load_state_dict) and the safetensors format.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>


#include <catch2/matchers/catch_matchers_string.hpp>

#include "support.hpp"

using namespace kten;
using Catch::Matchers::ContainsSubstring;

namespace {


// A safetensors file: the header's length (its own by default), the header, the data.
std::string safetensors_file(const std::string& header, const std::string& data, std::uint64_t length = ~0ull) {
  if (length == ~0ull) length = header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>(length >> (8 * i));
  return out + header + data;
}

nn::Sequential mlp(std::uint64_t seed, const Device& d, DType dtype = float32) {
  nn::Sequential net;
  net.add(nn::Linear(3, 4, {true, dtype, seed}));
  net.add(nn::ReLU());
  net.add(nn::Linear(4, 2, {true, dtype, seed + 1}));
  net.to(d);
  return net;
}

// Every parameter's shape and values (float64), for "unchanged" checks.
std::vector<std::vector<double>> parameter_values(nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, slot] : m.named_parameters()) {
    if (!slot->value.defined()) {
      out.emplace_back();
      continue;
    }
    out.emplace_back(slot->value.shape().begin(), slot->value.shape().end());
    out.push_back(slot->value.astype(float64).to_vector<double>());
  }
  return out;
}

// Same shape, dtype and elements (bit for bit through each dtype's own values).
void require_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  switch (want.dtype()) {
    case DType::float32: CHECK(got.to_vector<float>() == want.to_vector<float>()); break;
    case DType::float64: CHECK(got.to_vector<double>() == want.to_vector<double>()); break;
    case DType::int64: CHECK(got.to_vector<std::int64_t>() == want.to_vector<std::int64_t>()); break;
    case DType::boolean: CHECK(got.to_vector<bool>() == want.to_vector<bool>()); break;
  }
}

template <class Call>
void expect_format_error(const std::string& what, const Call& call, const std::string& needle) {
  CAPTURE(what);
  try {
    call();
    FAIL("expected FormatError");
  } catch (const FormatError& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("state_dict names the parameters as PyTorch does and shares their storage, without history",
          "[interchange]") {
  const Device d = test::device();
  auto net = mlp(1, d);
  const nn::StateDict sd = net.state_dict();
  const auto params = net.parameters();
  REQUIRE(sd.size() == 4);
  const std::vector<std::string> names = {"0.weight", "0.bias", "2.weight", "2.bias"};
  for (std::size_t i = 0; i < sd.size(); ++i) {
    CHECK(sd[i].first == names[i]);
    CHECK(sd[i].second.shares_storage_with(params[i]));
    CHECK(sd[i].second.shape() == params[i].shape());
    CHECK(sd[i].second.device() == d);
    CHECK_FALSE(sd[i].second.requires_grad());
    CHECK(params[i].requires_grad());
  }
  nn::Sequential lazy;
  lazy.add(nn::Linear(2));
  CHECK_THROWS_WITH(lazy.state_dict(), ContainsSubstring("'0.weight' has no shape yet"));
}

TEST_CASE("load_state_dict copies into the parameters in place, on the module's device", "[interchange]") {
  const Device d = test::device();
  auto source = mlp(1, d), target = mlp(11, d);
  const auto before = target.parameters();
  const nn::StateDict taken = target.state_dict();
  target.load_state_dict(source.state_dict());
  const auto after = target.parameters();
  CHECK(parameter_values(target) == parameter_values(source));
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].shares_storage_with(before[i]));  // in place: optimisers and taken dicts see it
    CHECK_FALSE(after[i].shares_storage_with(source.parameters()[i]));
    CHECK(after[i].requires_grad());
    require_same(taken[i].second, source.parameters()[i].detach());
  }
  const Tensor x = randn({5, 3}, d, 3);
  require_same(target(x).detach(), source(x).detach());
  // Still trainable: the gradients reach the loaded parameters.
  sum(target(x)).backward();
  CHECK(target.parameters()[0].grad().defined());
}

TEST_CASE("load_state_dict converts dtypes, as PyTorch's copy_", "[interchange]") {
  const Device d = test::device();
  auto wide = mlp(1, d, float64);
  auto narrow = mlp(11, d, float32);
  narrow.load_state_dict(wide.state_dict());
  const auto got = narrow.parameters(), want = wide.parameters();
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].dtype() == float32);
    require_same(got[i], want[i].detach().astype(float32));
  }
  // Integers and booleans convert too: 0.bias from int64, 2.bias from boolean.
  nn::StateDict sd = narrow.state_dict();
  sd[1].second = tensor(std::vector<std::int64_t>{-2, 0, 1, 5}, d);
  sd[3].second = tensor(std::vector<bool>{true, false}, d);
  narrow.load_state_dict(sd);
  CHECK(narrow.parameters()[1].to_vector<float>() == std::vector<float>{-2, 0, 1, 5});
  CHECK(narrow.parameters()[3].to_vector<float>() == std::vector<float>{1, 0});
}

TEST_CASE("load_state_dict takes a dict from another device with one counted transfer per tensor",
          "[interchange][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  auto source = mlp(1, other), target = mlp(11, d);
  const nn::StateDict sd = source.state_dict();
  reset_stats();
  target.load_state_dict(sd);
  const Stats s = stats();
  CHECK(s.transfers() == sd.size());
  CHECK((d.is_gpu() ? s.host_to_device : s.device_to_host) == sd.size());
  CHECK(target.parameters()[0].device() == d);
  CHECK(parameter_values(target) == parameter_values(source));
}

TEST_CASE("strict load_state_dict wants exactly the model's names; non-strict loads the names both have",
          "[interchange]") {
  const Device d = test::device();
  auto source = mlp(1, d), target = mlp(11, d);
  nn::StateDict sd = source.state_dict();
  sd.pop_back();                                       // no 2.bias
  sd.emplace_back("3.weight", zeros({2, 2}, d));       // a layer the model does not have
  const auto before = parameter_values(target);
  expect_format_error("missing and unexpected", [&] { target.load_state_dict(sd); },
                      "missing '2.bias'; unexpected '3.weight'");
  CHECK(parameter_values(target) == before);
  target.load_state_dict(sd, /*strict=*/false);
  const auto loaded = target.parameters(), want = source.parameters();
  for (int i = 0; i < 3; ++i) require_same(loaded[i].detach(), want[i].detach());
  CHECK(parameter_values(target).back() == before.back());  // 2.bias kept its values
}

TEST_CASE("a state dict that does not fit throws FormatError and changes nothing", "[interchange]") {
  const Device d = test::device();
  auto target = mlp(11, d);
  const auto before = parameter_values(target);
  const auto expect_refused = [&](const std::string& what, const nn::StateDict& sd, const std::string& needle) {
    for (bool strict : {true, false}) {
      expect_format_error(what, [&] { target.load_state_dict(sd, strict); }, needle);
      CHECK(parameter_values(target) == before);
    }
  };
  nn::StateDict sd = mlp(1, d).state_dict();
  // Each fault sits in the last entry, after entries that would load.
  nn::StateDict bad = sd;
  bad[3].second = zeros({3}, d);
  expect_refused("a shape", bad, "'2.bias' has shape 3 in the state dict but 2 in the model");
  bad = sd;
  bad[3].second = Tensor();
  expect_refused("an undefined tensor", bad, "'2.bias' is an undefined tensor");
  bad = sd;
  bad.push_back(sd[0]);
  expect_refused("a name twice", bad, "names '0.weight' twice");
  // Every fault in one message, as PyTorch's: a wrong architecture is seen whole at the first try.
  bad = sd;
  bad[0].second = zeros({5, 3}, d);
  bad[3].second = zeros({3}, d);
  expect_refused("two shapes", bad,
                 "(2 faults): '0.weight' has shape 5x3 in the state dict but 4x3 in the model; '2.bias' has shape 3");
  bad.pop_back();
  bad.emplace_back("3.weight", zeros({2, 2}, d));
  expect_format_error("names and a shape", [&] { target.load_state_dict(bad); },
                      "(3 faults): missing '2.bias'; unexpected '3.weight'; '0.weight' has shape 5x3");
  CHECK(parameter_values(target) == before);
}

TEST_CASE("a lazily shaped Linear takes its shape from the state dict", "[interchange]") {
  const Device d = test::device();
  auto eager = mlp(1, d);
  const auto lazy_mlp = [&] {
    nn::Sequential net;
    net.add(nn::Linear(4, {true, float32, 5}));
    net.add(nn::ReLU());
    net.add(nn::Linear(2, {true, float32, 6}));
    net.to(d);
    return net;
  };
  auto lazy = lazy_mlp();
  lazy.load_state_dict(eager.state_dict());
  CHECK(dynamic_cast<nn::Linear&>(lazy[0]).in_features() == 3);
  CHECK(dynamic_cast<nn::Linear&>(lazy[2]).in_features() == 4);
  CHECK(lazy.parameters()[0].device() == d);
  CHECK(lazy.parameters()[0].requires_grad());
  CHECK_FALSE(lazy.parameters()[0].shares_storage_with(eager.parameters()[0]));  // its own storage
  const Tensor x = randn({5, 3}, d, 3);
  require_same(lazy(x).detach(), eager(x).detach());

  // Shaped in part, a lazy layer would make up the rest at its first call: refused.
  auto partial = lazy_mlp();
  nn::StateDict first_layer = eager.state_dict();
  first_layer.resize(2);
  expect_format_error("layer 0 only", [&] { partial.load_state_dict(first_layer, false); },
                      "not '2.weight', '2.bias', which have no shape yet");
  CHECK(partial.parameters().empty());
  // A lazy extent is never 0 (a Linear needs in_features >= 1).
  nn::StateDict no_features = eager.state_dict();
  Shape shape = partial.named_parameters()[0].slot->expected;  // -1 where the input width goes
  for (auto& extent : shape)
    if (extent == -1) extent = 0;
  no_features[0].second = zeros(shape, d);
  expect_format_error("in_features 0", [&] { partial.load_state_dict(no_features); }, "'0.weight' has shape");
  CHECK(partial.parameters().empty());
}

TEST_CASE("safetensors files round-trip every dtype, views and empty tensors, on every device", "[safetensors]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const Tensor x = rand({4, 3}, d, 1);
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min(), highest = std::numeric_limits<std::int64_t>::max();
  const nn::StateDict sd = {
      {"f32", x},
      {"f64", randn({2, 2, 2}, d, 2, float64)},
      {"i64", tensor(std::vector<std::int64_t>{lowest, -1, 0, highest}, {2, 2}, d)},
      {"bool", gt(x, 0.5)},
      {"scalar", full({}, 2.5, d, float64)},
      {"empty", zeros({0, 3}, d)},
      {"transposed", x.transpose(0, 1)},
      {"column", x.narrow(1, 1, 1)},
      {"expanded", x.select(0, 2).expand({2, 3})},
  };
  const std::string path = scratch / "all.safetensors";
  io::save_safetensors(path, sd);
  reset_stats();
  const nn::StateDict loaded = io::load_safetensors(path, d);
  // One counted host-to-device copy per tensor, and none to cpu() (the file is read into host tensors).
  CHECK(stats().host_to_device == (d.is_gpu() ? sd.size() : 0));
  REQUIRE(loaded.size() == sd.size());
  for (std::size_t i = 0; i < sd.size(); ++i) {
    CAPTURE(sd[i].first);
    CHECK(loaded[i].first == sd[i].first);  // kten writes the dict's order and reads the data's
    CHECK(loaded[i].second.device() == d);
    CHECK(loaded[i].second.is_contiguous());
    require_same(loaded[i].second, sd[i].second);
  }
  CHECK(io::load_safetensors_metadata(path).empty());
}

TEST_CASE("a model round-trips through a safetensors file", "[safetensors][interchange]") {
  const Device d = test::device();
  const test::Scratch scratch;
  auto source = mlp(1, d), target = mlp(11, d);
  io::save_safetensors(scratch / "model.safetensors", source.state_dict(), {{"format", "pt"}});
  target.load_state_dict(io::load_safetensors(scratch / "model.safetensors", d));
  const Tensor x = randn({5, 3}, d, 3);
  require_same(target(x).detach(), source(x).detach());
}

TEST_CASE("save_safetensors writes the safetensors library's header, padding and little-endian data",
          "[safetensors]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const std::string path = scratch / "layout.safetensors";
  io::save_safetensors(path, {{"b", tensor({1.f, -2.f}, d)}, {"a", tensor(std::vector<std::int64_t>{258}, d)}},
                       {{"format", "pt"}, {"note", "say \"hi\"\n\x01"}});
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"say \"hi\"\n\u0001"},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0\x02\x01\x00\x00\x00\x00\x00\x00", 16);
  CHECK(test::read_bytes(path) == safetensors_file(padded, data));
  CHECK(padded.size() % 8 == 0);
  const auto metadata = io::load_safetensors_metadata(path);
  CHECK(metadata == std::map<std::string, std::string>{{"format", "pt"}, {"note", "say \"hi\"\n\x01"}});
}

TEST_CASE("load_safetensors reads the header in any order and returns the tensors in the data's", "[safetensors]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const std::string path = scratch / "library-order.safetensors";
  // As the safetensors library writes: widest dtype first, then by name; here the header lists
  // them in yet another order, with the metadata last, escapes and UTF-8 in the names.
  const std::string header =
      R"({"w\u00e9ight":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
      R"( "bias" : { "shape" : [ 2 ] , "data_offsets" : [ 0 , 16 ] , "dtype" : "F64" },)"
      "\n\t\"\xf0\x9f\x99\x82\\ud83d\\ude42\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[20,21]},"
      R"("__metadata__":{"format":"pt"}}   )";
  std::string data(21, '\0');
  const double bias[2] = {0.5, -1.0};
  const float weight = 3.f;
  std::memcpy(data.data(), bias, 16);  // this test assumes a little-endian host, as the data are
  std::memcpy(data.data() + 16, &weight, 4);
  data[20] = 1;
  test::write_bytes(path, safetensors_file(header, data));
  const nn::StateDict sd = io::load_safetensors(path, d);
  REQUIRE(sd.size() == 3);
  CHECK(sd[0].first == "bias");
  CHECK(sd[1].first == "w\xc3\xa9ight");
  CHECK(sd[2].first == "\xf0\x9f\x99\x82\xf0\x9f\x99\x82");
  CHECK(sd[0].second.to_vector<double>() == std::vector<double>{0.5, -1.0});
  CHECK(sd[1].second.to_vector<float>() == std::vector<float>{3.f});
  CHECK(sd[2].second.shape() == Shape{});
  CHECK(sd[2].second.item<bool>());
  CHECK(io::load_safetensors_metadata(path) == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("every malformed safetensors file throws FormatError saying what is wrong", "[safetensors]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const std::string path = scratch / "bad.safetensors";
  const auto expect_bad = [&](const std::string& what, const std::string& bytes, const std::string& needle) {
    test::write_bytes(path, bytes);
    expect_format_error(what, [&] { io::load_safetensors(path, d); }, needle);
  };
  // A header of one entry `name` with the given fields, and `data` after it.
  const auto one = [](const std::string& fields, const std::string& data) {
    return safetensors_file(R"({"a":{)" + fields + "}}", data);
  };
  const std::string f32 = R"("dtype":"F32","shape":[1],"data_offsets":[0,4])";
  const std::string four(4, '\0');
  expect_bad("empty", "", "fewer than the 8");
  expect_bad("short length", std::string(7, '\0'), "fewer than the 8");
  expect_bad("header past the end", safetensors_file("{}", "", 100), "only 2 follow");
  expect_bad("header over 100 MB", safetensors_file("{}", "", 100'000'001), "over the format's limit");
  expect_bad("length past 2^63", safetensors_file("{}", "", ~0ull - 1), "over the format's limit");
  expect_bad("not JSON", safetensors_file("hello", ""), "the header must be a JSON object");
  expect_bad("an array", safetensors_file("[]", ""), "the header must be a JSON object");
  expect_bad("empty header", safetensors_file("", ""), "the header must be a JSON object");
  expect_bad("not closed", safetensors_file(R"({"a":{)" + f32 + "}", four), "expected '}' to close an object");
  expect_bad("trailing comma", safetensors_file(R"({"a":{)" + f32 + "},}", four), "expected a key");
  expect_bad("missing colon", safetensors_file(R"({"a" {)" + f32 + "}}", four), "expected ':' after a key");
  expect_bad("after the object", safetensors_file(R"({"a":{)" + f32 + "}} x", four), "after the header's object");
  expect_bad("padding of NULs", safetensors_file(R"({"a":{)" + f32 + "}}" + std::string(3, '\0'), four),
             "after the header's object");
  expect_bad("string not closed", safetensors_file(R"({"a)", ""), "not closed");
  expect_bad("invalid UTF-8", safetensors_file("{\"\xff\":{" + f32 + "}}", four), "not valid UTF-8");
  expect_bad("overlong UTF-8", safetensors_file("{\"\xc0\xaf\":{" + f32 + "}}", four), "not valid UTF-8");
  expect_bad("UTF-8 surrogate", safetensors_file("{\"\xed\xa0\x80\":{" + f32 + "}}", four), "not valid UTF-8");
  expect_bad("truncated UTF-8", safetensors_file("{\"\xe2\x82", ""), "not valid UTF-8");
  expect_bad("control character", safetensors_file("{\"a\nb\":{" + f32 + "}}", four), "control character (10)");
  expect_bad("unknown escape", safetensors_file(R"({"\q":{)" + f32 + "}}", four), "unknown escape '\\q'");
  expect_bad("short \\u", safetensors_file(R"({"\u12":{)" + f32 + "}}", four), "four hexadecimal digits");
  expect_bad("lone low surrogate", safetensors_file(R"({"\udc00":{)" + f32 + "}}", four), "lone low surrogate");
  expect_bad("lone high surrogate", safetensors_file(R"({"\ud800x":{)" + f32 + "}}", four), "without its low half");
  expect_bad("high then high", safetensors_file(R"({"\ud800\ud800":{)" + f32 + "}}", four), "without its low half");
  expect_bad("entry not an object", safetensors_file(R"({"a":[1]})", ""), "a tensor's entry must be a JSON object");
  expect_bad("missing dtype", one(R"("shape":[1],"data_offsets":[0,4])", four), "lacks 'dtype'");
  expect_bad("missing shape", one(R"("dtype":"F32","data_offsets":[0,4])", four), "lacks 'shape'");
  expect_bad("missing offsets", one(R"("dtype":"F32","shape":[1])", four), "lacks 'data_offsets'");
  expect_bad("unknown field", one(f32 + R"(,"foo":1)", four), "unknown field 'foo'");
  expect_bad("field twice", one(f32 + R"(,"dtype":"F32")", four), "gives 'dtype' twice");
  expect_bad("F16", one(R"("dtype":"F16","shape":[2],"data_offsets":[0,4])", four), "dtype 'F16', which kten does not read");
  expect_bad("dtype not a string", one(R"("dtype":4,"shape":[1],"data_offsets":[0,4])", four), "expected a dtype");
  expect_bad("shape not an array", one(R"("dtype":"F32","shape":1,"data_offsets":[0,4])", four), "'shape' must be an array of non-negative integers");
  expect_bad("leading zero", one(R"("dtype":"F32","shape":[01],"data_offsets":[0,4])", four), "a number in 'shape' has a leading zero");
  expect_bad("negative", one(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])", four), "expected a non-negative integer in 'shape'");
  expect_bad("fraction", one(R"("dtype":"F32","shape":[1.0],"data_offsets":[0,4])", four), "a number in 'shape' is not an integer");
  expect_bad("exponent", one(R"("dtype":"F32","shape":[1e0],"data_offsets":[0,4])", four), "a number in 'shape' is not an integer");
  expect_bad("past 2^64", one(R"("dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616])", four), "a number in 'data_offsets' is past 2^64");
  expect_bad("extent past int64", one(R"("dtype":"BOOL","shape":[9223372036854775808],"data_offsets":[0,4])", four),
             "past the largest int64");
  expect_bad("bytes past 2^64", one(R"("dtype":"F64","shape":[4611686018427387904,8],"data_offsets":[0,4])", four),
             "more bytes than fit in 64 bits");
  expect_bad("empty, strides past 2^63", one(R"("dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0])", four),
             "more elements (extents of 0 aside) than fit in 64 bits");
  expect_bad("one offset", one(R"("dtype":"F32","shape":[1],"data_offsets":[4])", four), "1 data_offsets, not 2");
  expect_bad("size not shape's", one(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])", four),
             "F32 of shape 2 (8 bytes) but its data_offsets [0, 4]");
  expect_bad("reversed offsets", one(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])", four), "data_offsets [4, 0]");
  expect_bad("tensor twice", safetensors_file(R"({"a":{)" + f32 + R"(},"a":{)" + f32 + "}}", four), "'a' is given twice");
  expect_bad("metadata twice", safetensors_file(R"({"__metadata__":{},"__metadata__":{}})", ""), "given twice");
  expect_bad("metadata key twice", safetensors_file(R"({"__metadata__":{"k":"1","k":"2"}})", ""), "'k' is given twice");
  expect_bad("metadata not strings", safetensors_file(R"({"__metadata__":{"k":1}})", ""), "expected a metadata value");
  expect_bad("metadata not an object", safetensors_file(R"({"__metadata__":"k"})", ""), "\"__metadata__\" must be a JSON object");
  const std::string b_at = R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":)";
  expect_bad("overlap", safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})" + b_at + "[4,8]}}",
                                         std::string(8, '\0')),
             "'a' (data bytes 0 to 8) and 'b' (4 to 8) overlap");
  expect_bad("gap", safetensors_file(R"({"a":{)" + f32 + "}" + b_at + "[8,12]}}", std::string(12, '\0')),
             "the data bytes 4 to 8 belong to no tensor: a gap before 'b'");
  expect_bad("not from 0", one(R"("dtype":"F32","shape":[1],"data_offsets":[4,8])", std::string(8, '\0')),
             "the data bytes 0 to 4 belong to no tensor");
  expect_bad("past the end", one(f32, "12"), "ends at byte 4 but the file holds 2 bytes of data: the file is truncated");
  expect_bad("after the data", one(f32, four + "xyz"), "3 bytes after the last tensor's data");
  expect_bad("boolean 2", one(R"("dtype":"BOOL","shape":[3],"data_offsets":[0,3])", std::string("\x01\x00\x02", 3)),
             "holds the byte 2 at data byte 2");
  std::filesystem::remove(path);
  expect_format_error("missing", [&] { io::load_safetensors(path, d); }, "cannot open the file");
  expect_format_error("a directory", [&] { io::load_safetensors(scratch.dir.string(), d); }, "not a regular file");
  expect_format_error("metadata of a bad file", [&] { io::load_safetensors_metadata(scratch.dir.string()); },
                      "load_safetensors_metadata");
}

TEST_CASE("save_safetensors refuses what the format cannot hold and leaves the old file intact", "[safetensors]") {
  const Device d = test::device();
  const test::Scratch scratch;
  const std::string path = scratch / "kept.safetensors";
  const nn::StateDict good = {{"w", ones({2}, d)}};
  io::save_safetensors(path, good);
  const std::string before = test::read_bytes(path);
  const auto expect_refused = [&](const std::string& what, const nn::StateDict& sd, const std::string& needle,
                                  const std::map<std::string, std::string>& metadata = {}) {
    CAPTURE(what);
    CHECK_THROWS_WITH(io::save_safetensors(path, sd, metadata), ContainsSubstring(needle));
    CHECK(test::read_bytes(path) == before);
  };
  expect_refused("undefined", {{"w", ones({2}, d)}, {"v", Tensor()}}, "the tensor 'v' is undefined");
  expect_refused("twice", {{"w", ones({2}, d)}, {"w", ones({2}, d)}}, "the name 'w' is given twice");
  expect_refused("reserved", {{"__metadata__", ones({2}, d)}}, "no tensor may be named \"__metadata__\"");
  expect_refused("not UTF-8", {{"\xff", ones({2}, d)}}, "is not UTF-8 text");
  expect_refused("metadata not UTF-8", good, "is not UTF-8 text", {{"k", "\xc0\xaf"}});
  CHECK_THROWS_WITH(io::save_safetensors(scratch / "no-such-folder/x.safetensors", good),
                    ContainsSubstring("cannot create"));
  std::vector<std::string> names;  // no temporary left behind
  for (const auto& entry : std::filesystem::directory_iterator(scratch.dir)) names.push_back(entry.path().filename().string());
  CHECK(names == std::vector<std::string>{"kept.safetensors"});
}
