// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten inside a simulation, on a grid: Gray-Scott reaction-diffusion on a periodic 2-D domain, solved
// by Kokkos kernels on fields the simulation owns (one View of the device's default layout), and a
// small U-Net surrogate of `stride` solver steps, trained online from those fields wrapped as
// tensors without a copy.
//
//   build/cpu/examples/insitu-unet                        on cpu()
//   KTEN_EMULATE_GPUS=1 build/cpu/examples/insitu-unet    on an emulated GPU (a GPU in a CUDA build)
// An argument sets the optimiser steps per training phase (40; the debug builds' tests use fewer).
//
// The U-Net: two 3x3 convolutions with circular padding (the domain is periodic) at full and half
// resolution, GroupNorm and ReLU after each, max pooling down, bilinear upsampling up, a skip
// connection through cat, and a 1x1 convolution out. It predicts the change of both species over
// `stride` solver steps. Every training phase first measures the surrogate on the newest pair of
// states, which it has not seen (the one-step error), then trains on it; kten enqueues on the
// simulation's own execution-space instance (StreamGuard), and a phase reads its loss once, at its
// end: no host synchronisation inside a training step. At the end the surrogate replaces the
// solver for a few steps. Exits 1 when a check fails.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <kten/kokkos.hpp>
#include <kten/kten.hpp>

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Field = Kokkos::View<double***, Exec::memory_space>;  // both species, the device's default layout

constexpr int n = 32;                 // grid points per side, periodic
constexpr double Du = 0.16, Dv = 0.08, feed = 0.060, kill = 0.062;  // Gray-Scott, dt = h = 1
constexpr int stride = 10;            // solver steps per surrogate step
constexpr int warmup = 400;           // solver steps before the first training phase (patterns form)
constexpr int phases = 12;            // training phases, one per surrogate step of the solver
constexpr int rollout = 3;            // surrogate steps at the end, against the solver
constexpr double one_step_threshold = 0.25;   // the last phase's one-step error, relative (docs)

// Channels first, whatever the layout: on LayoutRight the View is (species, i, j); on LayoutLeft
// (CUDA's default) it is (j, i, species), whose axes reversed are (species, i, j) and contiguous.
constexpr bool kLeft = std::is_same_v<Field::array_layout, Kokkos::LayoutLeft>;
Field make_field(const char* name) {
  constexpr std::size_t side = n, species = 2;
  return kLeft ? Field(std::string(name), side, side, species) : Field(std::string(name), species, side, side);
}
KOKKOS_INLINE_FUNCTION double& at(const Field& f, int s, int i, int j) {
  if constexpr (kLeft) return f(j, i, s);
  else return f(s, i, j);
}

// The fields as a batch of one, (1, 2, n, n): the simulation's memory, no copy.
kten::Tensor as_batch(const Field& f, const kten::Device& d) {
  const kten::Tensor t = kten::from_view(f, d);
  return (kLeft ? t.permute({2, 1, 0}) : t).unsqueeze(0);
}

// One explicit Euler step with the periodic 5-point Laplacian.
struct GrayScottStep {
  Field u, next;
  KOKKOS_INLINE_FUNCTION void operator()(int i, int j) const {
    const int im = (i + n - 1) % n, ip = (i + 1) % n, jm = (j + n - 1) % n, jp = (j + 1) % n;
    double lap[2];
    for (int s = 0; s < 2; ++s)
      lap[s] = at(u, s, im, j) + at(u, s, ip, j) + at(u, s, i, jm) + at(u, s, i, jp) - 4 * at(u, s, i, j);
    const double a = at(u, 0, i, j), b = at(u, 1, i, j), reaction = a * b * b;
    at(next, 0, i, j) = a + Du * lap[0] - reaction + feed * (1 - a);
    at(next, 1, i, j) = b + Dv * lap[1] + reaction - (feed + kill) * b;
  }
};

// u = 1, v = 0, with three seeded squares of v (a fixed pattern: the run is reproducible).
struct InitialField {
  Field u;
  KOKKOS_INLINE_FUNCTION void operator()(int i, int j) const {
    const bool seed = (i >= 6 && i < 12 && j >= 8 && j < 14) || (i >= 18 && i < 23 && j >= 16 && j < 24) ||
                      (i >= 24 && i < 28 && j >= 3 && j < 7);
    at(u, 0, i, j) = seed ? 0.5 : 1.0;
    at(u, 1, i, j) = seed ? 0.25 : 0.0;
  }
};

void solver_steps(const Exec& space, Field& u, Field& next, int count) {
  for (int k = 0; k < count; ++k) {
    Kokkos::parallel_for("gray-scott step", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>(space, {0, 0}, {n, n}),
                         GrayScottStep{u, next});
    std::swap(u, next);
  }
}

// The surrogate, composed as in libtorch: registered parts, forward() in plain C++.
class UNet : public kten::nn::Module {
 public:
  explicit UNet(std::int64_t ch) {
    kten::nn::ConvOptions same;  // 3x3, padding 1 on both axes, periodic
    same.padding = {1};
    same.padding_mode = kten::nn::PaddingMode::circular;
    kten::nn::UpsampleOptions twice;
    twice.scale_factor = {2.0, 2.0};
    twice.mode = kten::nn::InterpolateMode::bilinear;
    twice.align_corners = false;
    enc1_ = register_module("enc1", kten::nn::Conv2d(2, ch, {3, 3}, with_seed(same, 1)));
    norm1_ = register_module("norm1", kten::nn::GroupNorm(4, ch));
    pool_ = register_module("pool", kten::nn::MaxPool2d({2}));
    enc2_ = register_module("enc2", kten::nn::Conv2d(ch, 2 * ch, {3, 3}, with_seed(same, 2)));
    norm2_ = register_module("norm2", kten::nn::GroupNorm(4, 2 * ch));
    up_ = register_module("up", kten::nn::Upsample(twice));
    dec_ = register_module("dec", kten::nn::Conv2d(3 * ch, ch, {3, 3}, with_seed(same, 3)));
    norm3_ = register_module("norm3", kten::nn::GroupNorm(4, ch));
    head_ = register_module("head", kten::nn::Conv2d(ch, 2, {1, 1}, with_seed(kten::nn::ConvOptions{}, 4)));
  }
  kten::Tensor forward(const kten::Tensor& x) override {
    const kten::Tensor e1 = kten::relu((*norm1_)((*enc1_)(x)));
    const kten::Tensor e2 = kten::relu((*norm2_)((*enc2_)((*pool_)(e1))));
    const kten::Tensor d = kten::relu((*norm3_)((*dec_)(kten::cat({(*up_)(e2), e1}, 1))));
    return (*head_)(d);
  }
  std::string name() const override { return "UNet"; }

 private:
  static kten::nn::ConvOptions with_seed(kten::nn::ConvOptions o, std::uint64_t seed) {
    o.seed = seed;
    return o;
  }
  std::shared_ptr<kten::nn::Conv2d> enc1_, enc2_, dec_, head_;
  std::shared_ptr<kten::nn::GroupNorm> norm1_, norm2_, norm3_;
  std::shared_ptr<kten::nn::MaxPool2d> pool_;
  std::shared_ptr<kten::nn::Upsample> up_;
};

// |a - b| / |b| over every element (one host read).
double relative_error(const kten::Tensor& a, const kten::Tensor& b) {
  return std::sqrt(kten::sum((a - b) * (a - b)).item<double>() / kten::sum(b * b).item<double>());
}

int run(int steps_per_phase) {
  const kten::Device d = kten::num_gpus() > 0 ? kten::gpu(0) : kten::cpu();
  const auto simulation = kten::new_stream_instance();  // the simulation's own queue
  const Exec space = *simulation;
  const kten::StreamGuard on_simulation_instance(space);  // kten enqueues on it from here on

  Field a = make_field("state"), b = make_field("next state"), before = make_field("state a surrogate step ago");
  Kokkos::parallel_for("initial field", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>(space, {0, 0}, {n, n}), InitialField{a});
  solver_steps(space, a, b, warmup);
  const kten::Tensor x = as_batch(before, d);
  std::printf("Gray-Scott on a periodic %dx%d grid in a View of %s (%s), surrogate U-Net of %d solver steps on %s\n",
              n, n, Exec::memory_space::name(), kLeft ? "LayoutLeft" : "LayoutRight", stride, d.str().c_str());

  UNet surrogate(8);
  surrogate.to(kten::float64);  // the fields' dtype
  surrogate.to(d);
  kten::optim::Adam adam(1e-2);
  kten::nn::MSELoss mse;
  // The change over `stride` steps is small against the state: the surrogate learns it scaled up.
  const double scale = 10.0;
  bool ok = true;
  double one_step = 0;

  for (int phase = 1; phase <= phases; ++phase) {
    Kokkos::deep_copy(space, before, a);
    solver_steps(space, a, b, stride);
    // Views swap as the solver steps: wrap the current state now (no copy).
    const kten::Tensor now = as_batch(a, d);
    const kten::Tensor change = (now - x) * scale;
    {
      kten::NoGradGuard no_grad;
      surrogate.eval();
      one_step = relative_error(surrogate(x), change);
      surrogate.train();
    }
    const kten::Stats start = kten::stats();
    kten::Tensor loss;
    for (int k = 0; k < steps_per_phase; ++k) {
      adam.zero_grad(surrogate);
      loss = mse(surrogate(x), change);
      loss.backward();
      adam.step(surrogate);
    }
    const std::uint64_t syncs = kten::stats().host_syncs - start.host_syncs;
    std::printf("phase %2d (step %4d): one-step error before training %.3f, loss after %d steps %.3e, host synchronisations %llu\n",
                phase, warmup + phase * stride, one_step, steps_per_phase, loss.item<double>(),
                static_cast<unsigned long long>(syncs));
    ok = ok && syncs == 0;
  }
  std::printf("one-step error on unseen states: %.3f (threshold %.2f)\n", one_step, one_step_threshold);
  ok = ok && one_step <= one_step_threshold;

  // The surrogate replaces the solver: its state against the solver's after each surrogate step.
  kten::NoGradGuard inference;
  surrogate.eval();
  kten::Tensor state = as_batch(a, d).contiguous();
  for (int k = 1; k <= rollout; ++k) {
    state = state + surrogate(state) / scale;
    solver_steps(space, a, b, stride);
    const kten::Tensor solver = as_batch(a, d);
    std::printf("rollout step %d (%d solver steps): relative error %.2e\n", k, k * stride, relative_error(state, solver));
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  try {  // the guard too: a GPU build on a node without a usable GPU throws here, and says why
    kten::ScopeGuard guard(argc, argv);
    const int steps_per_phase = argc > 1 ? std::atoi(argv[1]) : 40;
    if (argc > 2 || steps_per_phase <= 0) {
      std::fprintf(stderr, "usage: %s [optimiser steps per phase, > 0]\n", argv[0]);
      return 2;
    }
    return run(steps_per_phase);
  } catch (const kten::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
