// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file nn/rnn.hpp
/// \brief Recurrent layers: nn::LSTM and nn::GRU, PyTorch's gate orders, shapes and parameter names.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <kten/nn/module.hpp>

namespace kten::nn {

/// \brief torch.nn.LSTM's and GRU's options after input_size and hidden_size (PyTorch's defaults).
struct RNNOptions {
  std::int64_t num_layers = 1;        ///< \brief stacked layers, each reading the previous one's outputs
  bool bias = true;                   ///< \brief learn bias_ih and bias_hh
  bool batch_first = false;           ///< \brief input and output (N, L, features) instead of (L, N, features)
  double dropout = 0.0;               ///< \brief dropout on each layer's outputs but the last, in training mode
  bool bidirectional = false;         ///< \brief a second direction per layer, reading the sequence backwards
  DType dtype = DType::float32;       ///< \brief parameter dtype
  std::optional<std::uint64_t> seed;  ///< \brief initialisation and dropout seed; default: next_seed()
};

/// \brief What LSTM and GRU share: their parameters ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
/// "bias_hh_l0", then "_reverse" ones for a second direction, layer by layer, as PyTorch; each
/// uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]), the checks of an input, and the walk
/// over layers and directions. An input is (L, N, input_size) ((N, L, input_size) with batch_first)
/// or unbatched (L, input_size); states are (num_layers x directions, N, hidden_size), or
/// (num_layers x directions, hidden_size) for an unbatched input, even with batch_first.
class RNNBase : public Module {
 public:
  /// \brief Features of each input step.
  std::int64_t input_size() const { return input_size_; }
  /// \brief Features of the state and of each output step (per direction).
  std::int64_t hidden_size() const { return hidden_size_; }
  /// \brief The options the layer was made with (its seed resolved; to(dtype) changes the parameters', not these).
  const RNNOptions& options() const { return options_; }
  /// \brief "LSTM" or "GRU".
  std::string name() const override { return name_; }

 protected:
  /// \brief Registers the parameters of `gates` gates (LSTM 4, GRU 3); kten::Error naming `name`
  /// for sizes below 1, no layers, dropout outside [0, 1] or an integer dtype.
  RNNBase(const char* name, std::int64_t gates, std::int64_t input_size, std::int64_t hidden_size,
          RNNOptions options);
  /// \brief The outputs and the final states (one per kind of state: h, and c for an LSTM), from
  /// the initial ones (undefined: zeros).
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& input, std::vector<Tensor> states);

 private:
  const char* name_;
  std::int64_t gates_, input_size_, hidden_size_;
  RNNOptions options_;
  std::uint64_t dropout_calls_ = 0;
  std::vector<std::shared_ptr<Parameter>> weights_;  // per layer and direction: w_ih, w_hh, b_ih, b_hh
};

/// \brief torch.nn.LSTM: per step i, f, g, o = gates of x W_ih^T + b_ih + h W_hh^T + b_hh (in that
/// order, each hidden_size wide; sigmoid, sigmoid, tanh, sigmoid), c = f c + i g, h = o tanh(c).
/// Written with kten's differentiable ops: autograd derives the backward.
class LSTM : public RNNBase {
 public:
  /// \brief A layer reading input_size features per step into a state of hidden_size.
  LSTM(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options = {});
  /// \brief The outputs (L, N, directions x hidden_size), from a zero initial state.
  Tensor forward(const Tensor& input) override;
  /// \brief The outputs and the final (h, c), from `state` (h0, c0; undefined ones are zeros).
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward_state(const Tensor& input,
                                                               const std::tuple<Tensor, Tensor>& state = {});
};

/// \brief torch.nn.GRU: per step r, z, n from x W_ih^T + b_ih and h W_hh^T + b_hh (gates in that
/// order): r = sigmoid(.), z = sigmoid(.), n = tanh(xn + r (hn)), h = (1 - z) n + z h.
class GRU : public RNNBase {
 public:
  /// \brief A layer reading input_size features per step into a state of hidden_size.
  GRU(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options = {});
  /// \brief The outputs (L, N, directions x hidden_size), from a zero initial state.
  Tensor forward(const Tensor& input) override;
  /// \brief The outputs and the final h, from `h0` (undefined: zeros).
  std::tuple<Tensor, Tensor> forward_state(const Tensor& input, const Tensor& h0 = {});
};

}  // namespace kten::nn
