// Writes the loader fuzzer's seed corpus into the directory given: files made by save() from the
// models in fuzz_models.hpp (float32 and float64, eager and lazily shaped by a first input).
#include <filesystem>
#include <iostream>
#include <string>

#include "fuzz_models.hpp"

int main(int argc, char* argv[]) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CORPUS_DIR\n";
    return 2;
  }
  kten::ScopeGuard guard;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  for (kten::DType dtype : {kten::float32, kten::float64}) {
    const std::string name = kten::dtype_name(dtype);
    kten::fuzz::eager_model(dtype).save((dir / ("seed-eager-" + name + ".kten")).string());
    auto lazy = kten::fuzz::lazy_model(dtype);
    lazy(kten::ones({1, 5}, kten::cpu(), dtype));  // shapes it: in_features 5, then 4
    lazy.save((dir / ("seed-lazy-" + name + ".kten")).string());
  }
  return 0;
}
