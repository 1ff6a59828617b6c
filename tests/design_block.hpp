// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// DESIGN 1c's composed model (Block), shared by the ONNX cases and the torch label's interchange
// program: circular Conv2d, BatchNorm2d, a registered parameter and an int64 buffer. The contract
// test keeps its own copy, written exactly as DESIGN.md has it.
#include <cstdint>
#include <memory>
#include <string>

#include <kten/kten.hpp>

namespace kten::test {

class DesignBlock : public kten::nn::Module {
 public:
  /// `seed` initialises the convolution, `gain` the learnable gain.
  DesignBlock(std::int64_t ch, std::uint64_t seed, double gain) {
    kten::nn::ConvOptions o;
    o.padding = {1};
    o.padding_mode = kten::nn::PaddingMode::circular;
    o.seed = seed;
    conv_ = register_module("conv", kten::nn::Conv2d(ch, ch, {3, 3}, o));
    norm_ = register_module("norm", kten::nn::BatchNorm2d(ch));
    gain_ = register_parameter("gain", kten::full({1}, gain));
    register_buffer("calls", kten::zeros({1}, kten::cpu(), kten::int64));
  }
  kten::Tensor forward(const kten::Tensor& x) override { return x + gain_ * kten::relu((*norm_)((*conv_)(x))); }
  std::string name() const override { return "Block"; }

 private:
  std::shared_ptr<kten::nn::Conv2d> conv_;
  std::shared_ptr<kten::nn::BatchNorm2d> norm_;
  kten::Tensor gain_;
};

}  // namespace kten::test
