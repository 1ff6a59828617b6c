// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target for Module::load. Each input is written to a file and loaded into the models of
// fuzz_models.hpp, eager and lazily shaped, float32 and float64; then the same again with the
// checksum made right. A load must either succeed or throw kten::FormatError and leave the model
// exactly as it was. Anything else is a finding: an exception of another type escapes
// (std::terminate), a changed model aborts, and ASan / UBSan report memory errors and undefined
// behaviour. `make fuzz` seeds the corpus and runs this.
#include <cstdint>
#include <vector>

#include "fuzz_models.hpp"

namespace {

constexpr const char* kSuffix = ".kten";

void load_everywhere(const std::string& path) {
  for (kten::DType dtype : {kten::float32, kten::float64}) {
    auto eager = kten::fuzz::eager_model(dtype);
    kten::fuzz::load_or_unchanged(eager, [&] { eager.load(path, kten::cpu()); });
    auto lazy = kten::fuzz::lazy_model(dtype);
    kten::fuzz::load_or_unchanged(lazy, [&] { lazy.load(path, kten::cpu()); });
  }
}

// The format's checksum: FNV-1a (64-bit) of every byte before the last 8, stored there little-endian.
void set_checksum(std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i + 8 < bytes.size(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<std::uint8_t>(h >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = kten::fuzz::input_path(kSuffix);  // the first call starts Kokkos
  std::vector<std::uint8_t> bytes(data, data + size);
  kten::fuzz::write_file(path, bytes);
  load_everywhere(path);
  // Almost every mutation breaks the checksum, which load() verifies only after parsing: with it
  // made right, the fuzzer also reaches the model checks and the building of tensors.
  if (bytes.size() >= 8) {
    set_checksum(bytes);
    kten::fuzz::write_file(path, bytes);
    load_everywhere(path);
  }
  return 0;
}
