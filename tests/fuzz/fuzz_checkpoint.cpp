// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer target for load_checkpoint. Each input is written to a file and loaded into the models
// of fuzz_models.hpp (eager and lazily shaped, float32 and float64) with an SGD (momentum) and an
// Adam optimiser; then, when the input is a readable safetensors file, the same again with its
// checksum made right, so that the fuzzer also reaches the checks behind it (metadata, names,
// shapes, the optimiser state). A load must either succeed or throw kten::FormatError and leave
// model and optimiser exactly as they were. Anything else is a finding: an exception of another
// type escapes (std::terminate), a change aborts, and ASan / UBSan report memory errors and
// undefined behaviour. `make fuzz` seeds the corpus with files from save_checkpoint() and runs this.
#include <cstdint>
#include <vector>

#include "fuzz_models.hpp"
#include "io/checkpoint.hpp"   // kten's internal checksum of the format
#include "io/safetensors.hpp"  // tensors and metadata in one read

namespace {

constexpr const char* kSuffix = ".ckpt";

void load_everywhere(const std::string& path) {
  for (kten::DType dtype : {kten::float32, kten::float64})
    for (bool lazy : {false, true})
      for (bool adam : {false, true}) {
        auto model = lazy ? kten::fuzz::lazy_model(dtype) : kten::fuzz::eager_model(dtype);
        auto optimizer = kten::fuzz::optimizer(adam);
        kten::fuzz::load_or_unchanged(model, *optimizer, [&] { kten::load_checkpoint(path, model, *optimizer, kten::cpu()); });
      }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = kten::fuzz::input_path(kSuffix);  // the first call starts Kokkos
  kten::fuzz::write_file(path, std::vector<std::uint8_t>(data, data + size));
  load_everywhere(path);
  // Almost every mutation breaks the checksum: a readable file is written again with it made right.
  kten::detail::SafetensorsContents contents;
  try {
    contents = kten::detail::read_safetensors(path, kten::cpu(), "fuzz");
  } catch (const kten::FormatError&) {
    return 0;
  }
  contents.metadata[kten::detail::kCheckpointChecksumKey] = kten::detail::checkpoint_checksum(contents.tensors, contents.metadata);
  kten::io::save_safetensors(path, contents.tensors, contents.metadata);
  load_everywhere(path);
  return 0;
}
