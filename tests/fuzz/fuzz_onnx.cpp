// libFuzzer target for kten::onnx::load. Each input is written to a file and loaded, which must
// either succeed or throw kten::FormatError: a hostile file never crashes and never throws
// anything else. A model that loads then runs on float32 zeros of shape 2 x 3 per input, where any
// kten::Error is fine (the graph may need other inputs) but nothing else is. Findings: an
// exception of another type escapes (std::terminate), and ASan / UBSan report memory errors and
// undefined behaviour. `make fuzz` seeds the corpus with files from kten::onnx::save().
#include <cstdint>
#include <optional>
#include <vector>

#include <kten/onnx.hpp>

#include "fuzz_models.hpp"

namespace {
constexpr const char* kSuffix = ".onnx";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = kten::fuzz::input_path(kSuffix);  // the first call starts Kokkos
  kten::fuzz::write_file(path, std::vector<std::uint8_t>(data, data + size));
  std::optional<kten::onnx::Model> net;
  try {
    net.emplace(kten::onnx::load(path));
  } catch (const kten::FormatError&) {
    return 0;
  }
  const std::vector<kten::Tensor> inputs(net->input_names().size(), kten::zeros({2, 3}));
  try {
    (void)net->run(inputs);
  } catch (const kten::Error&) {
  }
  return 0;
}
