// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The workloads of kten-perf's *_vs_libtorch rows, and libtorch's side of them
// (perf/baselines/libtorch.cpp, built when find_package(Torch) succeeds in a host-only build). No
// torch header here: perf/models.cpp times these closures beside kten's own, in the same run.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kten::perf {

/// \brief An MLP in -> hidden -> ReLU -> hidden -> ReLU -> out, trained with MSE, and its batch.
struct MlpShape {
  std::string name;  ///< \brief tiny, medium or large
  std::int64_t in, hidden, out, batch;
};

/// \brief tiny: d2l's synthetic regressions (per-call overhead dominates); medium: kten's training
/// row; large: GEMM-bound. Smaller in quick mode.
inline std::vector<MlpShape> mlp_shapes(bool quick) {
  if (quick) return {{"tiny", 4, 32, 1, 16}, {"medium", 32, 64, 8, 64}, {"large", 128, 256, 128, 128}};
  return {{"tiny", 4, 32, 1, 16}, {"medium", 64, 256, 8, 256}, {"large", 512, 1024, 512, 256}};
}

/// \brief The optimiser of a training step.
enum class Optimizer { sgd, adam };

/// \brief Rows x columns of the softmax, LayerNorm and GELU rows (normalised over the columns).
inline std::int64_t activation_rows(bool quick) { return quick ? 256 : 4096; }
inline std::int64_t activation_cols(bool quick) { return quick ? 256 : 1024; }

// --- Convolutions (issue 31) ---
/// \brief A convolution row: x (batch, channels, spatial...) through a kernel of `kernel` per axis,
/// padding kernel / 2, channels in = channels out, with a bias.
struct ConvShape {
  std::string name;  ///< \brief "conv2d_8x32x64x64_3x3"
  std::int64_t batch, channels;
  std::vector<std::int64_t> spatial;
  std::int64_t kernel;
  /// \brief Multiply-adds of the forward (the input and weight gradients cost as much each).
  double macs() const {
    double pixels = 1, taps = 1;
    for (std::int64_t s : spatial) pixels *= static_cast<double>(s), taps *= static_cast<double>(kernel);
    return static_cast<double>(batch) * channels * channels * taps * pixels;
  }
};
/// \brief The U-Net sizes of issue 31 (8x32x64x64 3x3, 1x64x128x128 3x3, 2x16x32x32x32 3x3x3);
/// quarter-size grids in quick mode.
inline std::vector<ConvShape> conv_shapes(bool quick) {
  const std::int64_t q = quick ? 2 : 1;
  return {{"conv2d_8x32x64x64_3x3", 8, 32, {64 / q, 64 / q}, 3},
          {"conv2d_1x64x128x128_3x3", 1, 64, {128 / q, 128 / q}, 3},
          {"conv3d_2x16x32x32x32_3x3x3", 2, 16, {32 / q, 32 / q, 32 / q}, 3}};
}

namespace libtorch {

/// \brief "1.13.1".
std::string version();
/// \brief The BLAS libtorch's GEMMs call, as its build configuration names it.
std::string blas();
/// \brief Sets libtorch's intra-op threads (its OpenMP pool).
void set_threads(int threads);

/// \brief zero_grad, forward, MSE loss, backward, step (torch::optim::SGD(0.01) or Adam(1e-3)).
std::function<void()> mlp_step(const MlpShape& shape, Optimizer optimizer);
/// \brief The medium MLP's forward on `batch` rows under torch::InferenceMode.
std::function<void()> mlp_inference(const MlpShape& shape, std::int64_t batch);
/// \brief x + y of `n` float32 elements under torch::InferenceMode.
std::function<void()> add(std::int64_t n);
/// \brief softmax over the last axis, forward and backward to the input.
std::function<void()> softmax_forward_backward(std::int64_t rows, std::int64_t cols);
/// \brief nn::LayerNorm(cols), forward and backward to the input and its weight and bias.
std::function<void()> layer_norm_forward_backward(std::int64_t rows, std::int64_t cols);
/// \brief exact GELU, forward and backward to the input.
std::function<void()> gelu_forward_backward(std::int64_t rows, std::int64_t cols);
/// \brief The convolution's forward and backward to the input, weight and bias (convolutions, issue 31).
std::function<void()> conv_forward_backward(const ConvShape& shape);

}  // namespace libtorch
}  // namespace kten::perf
