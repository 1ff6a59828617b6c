// libFuzzer target for Module::load. Each input is written to a file and loaded into the models of
// fuzz_models.hpp, eager and lazily shaped, float32 and float64; then the same again with the
// checksum made right. A load must either succeed or throw kten::FormatError and leave the model
// exactly as it was. Anything else is a finding: an exception of another type escapes
// (std::terminate), a changed model aborts, and ASan / UBSan report memory errors and undefined
// behaviour. `make fuzz` seeds the corpus and runs this.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "fuzz_models.hpp"

namespace {

// Every parameter's shape and values, on the host (nothing for a lazy layer not yet shaped).
std::vector<std::vector<double>> state(kten::nn::Module& model) {
  std::vector<std::vector<double>> out;
  for (const kten::Tensor& p : model.parameters()) {
    out.emplace_back(p.shape().begin(), p.shape().end());
    if (p.dtype() == kten::float32) {
      const auto v = p.to_vector<float>();
      out.emplace_back(v.begin(), v.end());
    } else {
      out.push_back(p.to_vector<double>());
    }
  }
  return out;
}

void load_into(kten::nn::Module& model, const std::string& path) {
  const auto before = state(model);
  try {
    model.load(path, kten::cpu());
  } catch (const kten::FormatError&) {
    if (state(model) != before) {
      std::fprintf(stderr, "kten fuzz: a load that threw FormatError changed the model\n");
      std::abort();
    }
  }
}

void load_everywhere(const std::string& path) {
  for (kten::DType dtype : {kten::float32, kten::float64}) {
    auto eager = kten::fuzz::eager_model(dtype);
    load_into(eager, path);
    auto lazy = kten::fuzz::lazy_model(dtype);
    load_into(lazy, path);
  }
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

// The format's checksum: FNV-1a (64-bit) of every byte before the last 8, stored there little-endian.
void set_checksum(std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i + 8 < bytes.size(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<std::uint8_t>(h >> (8 * i));
}

// The one file each input is written to, removed when the fuzzer exits normally.
const std::string& input_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("kten-fuzz-load-" + std::to_string(::getpid()) + ".kten")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static kten::ScopeGuard guard;  // finalises Kokkos when the fuzzer exits normally
  input_path();  // built before the handler below is registered, so it is destroyed after it runs
  std::atexit([] { std::remove(input_path().c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = input_path();
  std::vector<std::uint8_t> bytes(data, data + size);
  write_file(path, bytes);
  load_everywhere(path);
  // Almost every mutation breaks the checksum, which load() verifies only after parsing: with it
  // made right, the fuzzer also reaches the model checks and the building of tensors.
  if (bytes.size() >= 8) {
    set_checksum(bytes);
    write_file(path, bytes);
    load_everywhere(path);
  }
  return 0;
}
