// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// LSTM and GRU as PyTorch computes them, written with kten's differentiable ops (one GEMM for a
// whole layer's input projection, then per step one GEMM for the state's and a few elementwise
// ops), so that autograd derives the backward and every device runs them.
#include <cmath>
#include <string>
#include <utility>

#include <kten/nn/layers.hpp>
#include <kten/nn/rnn.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "core/checks.hpp"
#include "functional.hpp"
#include "ops/dropout.hpp"
#include "ops/linalg.hpp"

namespace kten::detail {

namespace {

Tensor linear_or_not(const Tensor& x, const Tensor& w, const Tensor& b) {
  return detail::linear(x, w, b.defined() ? &b : nullptr);
}

std::vector<Tensor> lstm_cell(const Tensor& xw, const std::vector<Tensor>& state, const Tensor& w_hh,
                              const Tensor& b_hh) {
  const std::int64_t h = w_hh.size(1);
  const Tensor gates = xw + linear_or_not(state[0], w_hh, b_hh);
  const Tensor i = sigmoid(gates.narrow(1, 0, h)), f = sigmoid(gates.narrow(1, h, h));
  const Tensor g = tanh(gates.narrow(1, 2 * h, h)), o = sigmoid(gates.narrow(1, 3 * h, h));
  const Tensor c = f * state[1] + i * g;
  return {o * tanh(c), c};
}

std::vector<Tensor> gru_cell(const Tensor& xw, const std::vector<Tensor>& state, const Tensor& w_hh,
                             const Tensor& b_hh) {
  const std::int64_t h = w_hh.size(1);
  const Tensor hw = linear_or_not(state[0], w_hh, b_hh);
  const Tensor r = sigmoid(xw.narrow(1, 0, h) + hw.narrow(1, 0, h));
  const Tensor z = sigmoid(xw.narrow(1, h, h) + hw.narrow(1, h, h));
  const Tensor n = tanh(xw.narrow(1, 2 * h, h) + r * hw.narrow(1, 2 * h, h));
  return {n + z * (state[0] - n)};  // (1 - z) n + z h
}

}  // namespace

std::pair<Tensor, std::vector<Tensor>> recurrent_direction(bool lstm, const Tensor& x, std::vector<Tensor> state,
                                                           const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                                           const Tensor& b_hh, bool reverse) {
  const std::int64_t steps = x.size(0), batch = x.size(1);
  // Every step's input projection in one GEMM.
  const Tensor xw =
      linear_or_not(x.reshape({steps * batch, x.size(2)}), w_ih, b_ih).reshape({steps, batch, w_ih.size(0)});
  std::vector<Tensor> outputs(static_cast<std::size_t>(steps));
  for (std::int64_t k = 0; k < steps; ++k) {
    const std::int64_t t = reverse ? steps - 1 - k : k;
    state = (lstm ? lstm_cell : gru_cell)(xw.select(0, t), state, w_hh, b_hh);
    outputs[static_cast<std::size_t>(t)] = state[0];
  }
  return {stack(outputs, 0), state};
}

}  // namespace kten::detail

namespace kten::nn {

RNNBase::RNNBase(const char* name, std::int64_t gates, std::int64_t input_size, std::int64_t hidden_size,
                 RNNOptions options)
    : name_(name), gates_(gates), input_size_(input_size), hidden_size_(hidden_size), options_(options) {
  if (input_size < 1 || hidden_size < 1)
    detail::fail<ShapeError>(name, "input_size and hidden_size must be >= 1, got ", input_size, " and ", hidden_size);
  if (options.num_layers < 1) detail::fail(name, "num_layers must be >= 1, got ", options.num_layers);
  if (!(options.dropout >= 0 && options.dropout <= 1))
    detail::fail(name, "dropout must lie in [0, 1], got ", options.dropout);
  if (!is_floating(options.dtype))
    detail::fail<DTypeError>(name, "the parameters are float32 or float64, not ", options.dtype);
  if (!options_.seed) options_.seed = next_seed();
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  const int directions = options.bidirectional ? 2 : 1;
  std::uint64_t stream = 0;  // each parameter its own stream of the seed
  const auto add = [&](const std::string& parameter, Shape shape) {
    Tensor value = uniform(shape, -bound, bound, device(), *options_.seed + 0x9E3779B97F4A7C15ull * stream++,
                           options.dtype);
    weights_.push_back(register_parameter(parameter, Parameter{value, {}, std::move(shape), options.dtype}));
  };
  for (std::int64_t layer = 0; layer < options.num_layers; ++layer)
    for (int d = 0; d < directions; ++d) {
      const std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      const std::int64_t in = layer == 0 ? input_size : hidden_size * directions;
      add("weight_ih" + suffix, {gates * hidden_size, in});
      add("weight_hh" + suffix, {gates * hidden_size, hidden_size});
      if (options.bias) {
        add("bias_ih" + suffix, {gates * hidden_size});
        add("bias_hh" + suffix, {gates * hidden_size});
      }
    }
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::run(const Tensor& input, std::vector<Tensor> states) {
  detail::check_defined(input, name_);
  detail::check_same_device(name_, input.device(), device());
  const DType dtype = weights_[0]->value.dtype();  // to(float64) changes it
  if (input.dtype() != dtype)
    detail::fail<DTypeError>(name_, "the input is ", input.dtype(), " but the parameters are ", dtype,
                             "; convert with .astype(...)");
  if ((input.ndim() != 2 && input.ndim() != 3) || input.size(-1) != input_size_)
    detail::fail<ShapeError>(name_, "expects (L, N, ", input_size_, ")", options_.batch_first ? " (batch_first: (N, L, " : "",
                             options_.batch_first ? std::to_string(input_size_) + "))" : "", " or unbatched (L, ",
                             input_size_, "), got shape ", input.shape());
  const bool batched = input.ndim() == 3;
  Tensor x = !batched ? input.unsqueeze(1) : options_.batch_first ? input.transpose(0, 1) : input;
  const std::int64_t steps = x.size(0), batch = x.size(1);
  if (steps < 1) detail::fail<ShapeError>(name_, "the sequence is empty (shape ", input.shape(), ")");
  const int directions = options_.bidirectional ? 2 : 1;
  const std::int64_t layers_x_directions = options_.num_layers * directions;
  const Shape state_shape = batched ? Shape{layers_x_directions, batch, hidden_size_} : Shape{layers_x_directions, hidden_size_};
  for (Tensor& s : states) {
    if (!s.defined()) {
      s = zeros({layers_x_directions, batch, hidden_size_}, x.device(), x.dtype());
      continue;
    }
    detail::check_compatible(name_, input, s);
    if (s.shape() != state_shape)
      detail::fail<ShapeError>(name_, "an initial state has shape ", s.shape(), ", expected ", state_shape);
    if (!batched) s = s.unsqueeze(1);
  }
  std::vector<std::vector<Tensor>> finals(states.size());
  const std::size_t per_direction = options_.bias ? 4 : 2;
  for (std::int64_t layer = 0; layer < options_.num_layers; ++layer) {
    std::vector<Tensor> outputs_by_direction;
    for (int d = 0; d < directions; ++d) {
      const std::size_t at = static_cast<std::size_t>(layer * directions + d) * per_direction;
      const Tensor& w_ih = weights_[at]->value;
      const Tensor& w_hh = weights_[at + 1]->value;
      const Tensor b_ih = options_.bias ? weights_[at + 2]->value : Tensor();
      const Tensor b_hh = options_.bias ? weights_[at + 3]->value : Tensor();
      std::vector<Tensor> initial;
      for (const Tensor& s : states) initial.push_back(s.select(0, layer * directions + d));
      auto [outputs, last] =
          detail::recurrent_direction(gates_ == 4, x, std::move(initial), w_ih, w_hh, b_ih, b_hh, d == 1);
      for (std::size_t i = 0; i < last.size(); ++i) finals[i].push_back(last[i]);
      outputs_by_direction.push_back(outputs);
    }
    x = directions == 1 ? outputs_by_direction[0] : cat(outputs_by_direction, 2);
    if (layer + 1 < options_.num_layers && is_training() && options_.dropout > 0)
      x = options_.dropout == 1 ? zeros_like(x) : detail::dropout(x, options_.dropout, *options_.seed, dropout_calls_++);
  }
  std::vector<Tensor> final_states;
  for (auto& f : finals) final_states.push_back(batched ? stack(f, 0) : stack(f, 0).squeeze(1));
  if (!batched) x = x.squeeze(1);
  else if (options_.batch_first) x = x.transpose(0, 1);
  return {x, final_states};
}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options)
    : RNNBase("LSTM", 4, input_size, hidden_size, options) {}

Tensor LSTM::forward(const Tensor& input) { return run(input, {Tensor(), Tensor()}).first; }

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward_state(const Tensor& input,
                                                                   const std::tuple<Tensor, Tensor>& state) {
  auto [y, s] = run(input, {std::get<0>(state), std::get<1>(state)});
  return {y, {s[0], s[1]}};
}

GRU::GRU(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options)
    : RNNBase("GRU", 3, input_size, hidden_size, options) {}

Tensor GRU::forward(const Tensor& input) { return run(input, {Tensor()}).first; }

std::tuple<Tensor, Tensor> GRU::forward_state(const Tensor& input, const Tensor& h0) {
  auto [y, s] = run(input, {h0});
  return {y, s[0]};
}

}  // namespace kten::nn
