// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target for io::load_safetensors and Module::load_state_dict. Each input is written to a
// file and read, which must either succeed or throw kten::FormatError; what it read is then loaded
// into the models of fuzz_models.hpp, eager and lazily shaped, float32 and float64, strictly and
// not, and each load must succeed or throw FormatError leaving the model exactly as it was.
// Anything else is a finding: an exception of another type escapes (std::terminate), a changed
// model aborts, and ASan / UBSan report memory errors and undefined behaviour. `make fuzz` seeds
// the corpus with files from save_safetensors() and runs this.
#include <cstdint>
#include <vector>

#include "fuzz_models.hpp"

namespace {
constexpr const char* kSuffix = ".safetensors";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = kten::fuzz::input_path(kSuffix);  // the first call starts Kokkos
  kten::fuzz::write_file(path, std::vector<std::uint8_t>(data, data + size));
  kten::nn::StateDict sd;
  try {
    sd = kten::io::load_safetensors(path);
  } catch (const kten::FormatError&) {
    return 0;
  }
  for (kten::DType dtype : {kten::float32, kten::float64})
    for (bool strict : {true, false}) {
      auto eager = kten::fuzz::eager_model(dtype);
      kten::fuzz::load_or_unchanged(eager, [&] { eager.load_state_dict(sd, strict); });
      auto lazy = kten::fuzz::lazy_model(dtype);
      kten::fuzz::load_or_unchanged(lazy, [&] { lazy.load_state_dict(sd, strict); });
    }
  return 0;
}
