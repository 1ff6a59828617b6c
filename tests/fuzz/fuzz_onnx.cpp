// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target for kten::onnx::load. Each input is written to a file and loaded, which must
// either succeed or throw kten::FormatError: a hostile file never crashes and never throws
// anything else. A model that loads then runs once on zeros of its declared input shapes
// (symbolic extents 2; a graph past 4096 elements per input is not run), so that the grid,
// normalisation, gather and attention kernels run (before, 2 x 3 inputs reached none of them),
// and its outputs are read back, so that a GPU's deferred index errors are raised here: any
// kten::Error is fine, nothing else is. KTEN_FUZZ_GPU=1 (with KTEN_EMULATE_GPUS=1) loads and runs
// on gpu(0), the emulated GPU's code paths. Findings: an exception of another type escapes
// (std::terminate), and ASan / UBSan report memory errors and undefined behaviour.
//
// The mutator is structure-aware (issue 47): an input that parses as an ONNX model is changed as
// a model (an attribute's value, a dimension of an initializer or of a graph input, a constant's
// element, a node's op type) and written again, so that a mutant still parses and reaches the op
// it targets; anything else goes to libFuzzer's byte mutations. `make fuzz` seeds the corpus with
// files from kten::onnx::save(), one per op family (fuzz_seeds.cpp).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <kten/onnx.hpp>

#include "fuzz_models.hpp"
#include "onnx/graph.hpp"

namespace {
constexpr const char* kSuffix = ".onnx";
constexpr std::int64_t kMaxInputElements = 4096;

const kten::Device& fuzz_device() {
  static const kten::Device device = std::getenv("KTEN_FUZZ_GPU") ? kten::gpu(0) : kten::cpu();
  return device;
}

// Zeros of each declared input's dtype and shape (-1: 2), or nothing when one is too large.
std::optional<std::vector<kten::Tensor>> inputs_of(const kten::onnx::Model& net) {
  std::vector<kten::Tensor> inputs;
  for (const kten::onnx::detail::Input& in : net.graph()->inputs) {
    kten::Shape shape = in.shape;
    std::int64_t n = 1;
    for (std::int64_t& d : shape) {
      if (d < 0) d = 2;
      if (d > kMaxInputElements || (n *= d) > kMaxInputElements) return std::nullopt;
    }
    inputs.push_back(kten::zeros(shape, fuzz_device(), in.dtype));
  }
  return inputs;
}

// --- the structure-aware mutator ---------------------------------------------------------------

using Rng = std::minstd_rand;

std::int64_t pick(Rng& rng, std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); }

// An integer near `v` or at an edge: what attributes and dimensions are checked against.
std::int64_t mutate_int(Rng& rng, std::int64_t v) {
  constexpr std::int64_t big = std::int64_t{1} << 40, most = std::numeric_limits<std::int64_t>::max(),
                         least = std::numeric_limits<std::int64_t>::min();
  const std::int64_t edges[] = {0, 1, -1, 2, 3, 4, 7, -2, 64, big, -big, most, least, most - 1, least + 1};
  const auto u = static_cast<std::uint64_t>(v);  // wrapping arithmetic: the fuzzer's own UB would be a finding
  switch (pick(rng, 4)) {
    case 0: return static_cast<std::int64_t>(u + 1);
    case 1: return static_cast<std::int64_t>(u - 1);
    case 2: return static_cast<std::int64_t>(u * 2);
    default: return edges[pick(rng, static_cast<std::int64_t>(std::size(edges)))];
  }
}

float mutate_float(Rng& rng, float v) {
  const float edges[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 2.f, 1e-30f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  return pick(rng, 3) == 0 ? v * -2.f : edges[pick(rng, static_cast<std::int64_t>(std::size(edges)))];
}

// The strings ONNX attributes of kten's operators take, valid and not.
const char* a_string(Rng& rng) {
  const char* words[] = {"NOTSET", "SAME_UPPER", "VALID", "constant", "reflect", "edge", "wrap", "nearest", "linear",
                         "cubic", "half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "floor",
                         "round_prefer_floor", "none", "add", "mul", "max", ""};
  return words[pick(rng, static_cast<std::int64_t>(std::size(words)))];
}

void mutate_attribute(Rng& rng, ::onnx::AttributeProto& a) {
  switch (a.type()) {
    case ::onnx::AttributeProto_AttributeType_INT: a.set_i(mutate_int(rng, a.i())); break;
    case ::onnx::AttributeProto_AttributeType_FLOAT: a.set_f(mutate_float(rng, a.f())); break;
    case ::onnx::AttributeProto_AttributeType_STRING: a.set_s(a_string(rng)); break;
    case ::onnx::AttributeProto_AttributeType_INTS:
      if (a.ints_size() == 0 || pick(rng, 5) == 0) a.add_ints(mutate_int(rng, 1));
      else if (pick(rng, 5) == 0) a.mutable_ints()->RemoveLast();
      else {
        const int i = static_cast<int>(pick(rng, a.ints_size()));
        a.set_ints(i, mutate_int(rng, a.ints(i)));
      }
      break;
    case ::onnx::AttributeProto_AttributeType_TENSOR:
      if (a.t().dims_size() > 0) a.mutable_t()->set_dims(0, mutate_int(rng, a.t().dims(0)));
      else a.mutable_t()->add_dims(mutate_int(rng, 1));
      break;
    default: a.set_type(::onnx::AttributeProto_AttributeType_INTS); break;
  }
}

// One element or one dimension of a constant (an initializer or a Constant's tensor).
void mutate_tensor(Rng& rng, ::onnx::TensorProto& t) {
  if (t.dims_size() > 0 && pick(rng, 3) == 0) {
    const int d = static_cast<int>(pick(rng, t.dims_size()));
    t.set_dims(d, mutate_int(rng, t.dims(d)));
    return;
  }
  if (t.int64_data_size() > 0) {
    const int i = static_cast<int>(pick(rng, t.int64_data_size()));
    t.set_int64_data(i, mutate_int(rng, t.int64_data(i)));
  } else if (t.float_data_size() > 0) {
    const int i = static_cast<int>(pick(rng, t.float_data_size()));
    t.set_float_data(i, mutate_float(rng, t.float_data(i)));
  } else if (t.has_raw_data() && !t.raw_data().empty()) {
    std::string raw = t.raw_data();
    std::size_t width = t.data_type() == ::onnx::TensorProto_DataType_INT64 ? 8 : t.data_type() == ::onnx::TensorProto_DataType_FLOAT ? 4 : 1;
    if (raw.size() < width) width = 1;
    const std::size_t at = static_cast<std::size_t>(pick(rng, static_cast<std::int64_t>(raw.size() / width))) * width;
    if (width == 8) {
      std::int64_t v = 0;
      std::memcpy(&v, raw.data() + at, 8);
      v = mutate_int(rng, v);
      std::memcpy(raw.data() + at, &v, 8);
    } else if (width == 4) {
      float v = 0;
      std::memcpy(&v, raw.data() + at, 4);
      v = mutate_float(rng, v);
      std::memcpy(raw.data() + at, &v, 4);
    } else {
      raw[at] = static_cast<char>(rng());
    }
    t.set_raw_data(raw);
  } else {
    t.set_data_type(static_cast<std::int32_t>(pick(rng, 17)));
  }
}

// One change to a parsed model; false when the model offers nothing to change.
bool mutate_model(Rng& rng, ::onnx::ModelProto& m) {
  ::onnx::GraphProto& g = *m.mutable_graph();
  switch (pick(rng, 6)) {
    case 0:
    case 1: {  // an attribute of a node (or a new one from the node's family)
      if (g.node_size() == 0) return false;
      ::onnx::NodeProto& n = *g.mutable_node(static_cast<int>(pick(rng, g.node_size())));
      if (n.attribute_size() == 0 || pick(rng, 6) == 0) {
        const char* names[] = {"axis", "axes", "strides", "pads", "kernel_shape", "dilations", "group", "ceil_mode",
                               "keepdims", "perm", "split", "epsilon", "alpha", "mode", "training_mode", "to"};
        auto* a = n.add_attribute();
        a->set_name(names[pick(rng, static_cast<std::int64_t>(std::size(names)))]);
        a->set_type(pick(rng, 2) ? ::onnx::AttributeProto_AttributeType_INT : ::onnx::AttributeProto_AttributeType_INTS);
        mutate_attribute(rng, *a);
      } else {
        mutate_attribute(rng, *n.mutable_attribute(static_cast<int>(pick(rng, n.attribute_size()))));
      }
      return true;
    }
    case 2:
    case 3: {  // a constant: an initializer or a Constant node's value
      if (g.initializer_size() == 0) return false;
      mutate_tensor(rng, *g.mutable_initializer(static_cast<int>(pick(rng, g.initializer_size()))));
      return true;
    }
    case 4: {  // a dimension of a graph input (small: the run stays fast)
      if (g.input_size() == 0) return false;
      auto* shape = g.mutable_input(static_cast<int>(pick(rng, g.input_size())))->mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() == 0 || pick(rng, 8) == 0) shape->add_dim()->set_dim_value(pick(rng, 4));
      else shape->mutable_dim(static_cast<int>(pick(rng, shape->dim_size())))->set_dim_value(pick(rng, 5));
      return true;
    }
    default: {  // another operator of kten's table on the same inputs
      if (g.node_size() == 0) return false;
      const auto& table = kten::onnx::detail::op_table();
      g.mutable_node(static_cast<int>(pick(rng, g.node_size())))
          ->set_op_type(table[static_cast<std::size_t>(pick(rng, static_cast<std::int64_t>(table.size())))].op_type);
      return true;
    }
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  Rng rng(seed);
  ::onnx::ModelProto m;
  if (pick(rng, 8) != 0 && m.ParseFromArray(data, static_cast<int>(size)) && m.has_graph()) {
    for (std::int64_t k = 0, changes = 1 + pick(rng, 2); k < changes; ++k) mutate_model(rng, m);
    std::string bytes;
    if (m.SerializeToString(&bytes) && bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = kten::fuzz::input_path(kSuffix);  // the first call starts Kokkos
  kten::fuzz::write_file(path, std::vector<std::uint8_t>(data, data + size));
  std::optional<kten::onnx::Model> net;
  try {
    net.emplace(kten::onnx::load(path, fuzz_device()));
  } catch (const kten::FormatError&) {
    return 0;
  }
  try {
    const auto inputs = inputs_of(*net);
    if (!inputs) return 0;
    for (const kten::Tensor& y : net->run(*inputs))
      if (y.defined()) (void)y.to(kten::cpu());  // a GPU's index errors are raised at this read
  } catch (const kten::Error&) {
  }
  return 0;
}
