// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten inside a simulation: a 2-D heat equation solved by Kokkos kernels on fields the simulation
// owns (Views of the default memory space, in its default layout: LayoutLeft on CUDA), and an MLP
// surrogate of its time step trained online from those fields, wrapped as tensors without a copy.
//
//   build/cpu/examples/insitu-surrogate                        on cpu()
//   KTEN_EMULATE_GPUS=1 build/cpu/examples/insitu-surrogate    on an emulated GPU (a GPU in a CUDA build)
//   mpirun -np 2 build/cpu/examples/insitu-surrogate           two simulations, one surrogate (DDP)
// The checkpoint goes to the first argument, by default insitu_surrogate.ckpt in the current folder;
// a second argument sets the optimiser steps per training phase (200; the debug builds' tests use
// fewer).
//
// Every `train_every` steps the simulation hands kten its last two fields: the surrogate learns to
// map the 5-point stencil of u(t) to the change (u(t + dt) - u(t)) / r at every interior point,
// with Adam and a cosine schedule. kten enqueues on the simulation's own execution-space instance (StreamGuard), so its
// kernels run in order with the solver's without a fence, and a training phase never waits for
// the device: the loss is read once, at the end of the phase. Each phase is checkpointed; at the
// end the checkpoint is restored into fresh objects, and the surrogate replaces the solver for a
// few steps under NoGradGuard. Exits 1 when a check fails.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <kten/kokkos.hpp>
#include <kten/kten.hpp>
#if KTEN_WITH_MPI
#include <kten/dist.hpp>
#endif

namespace {

// exp(-r2 / width) on the host and the device.
KOKKOS_INLINE_FUNCTION double gaussian(double r2, double width) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::exp(-r2 / width);  // Kokkos 3.7 and later
#else
  return Kokkos::Experimental::exp(-r2 / width);
#endif
}

using Exec = Kokkos::DefaultExecutionSpace;
using Field = Kokkos::View<double**, Exec::memory_space>;  // the simulation's field, in the device's default layout

constexpr int n = 48;               // grid points per side
constexpr double r = 0.2;           // alpha * dt / h^2 (explicit scheme: stable up to 0.25)
constexpr int steps = 200;          // solver steps
constexpr int train_every = 50;     // a training phase after every 50 solver steps
constexpr int rollout = 10;         // surrogate steps at the end, against the solver

// u(t + dt) from u(t): explicit finite differences, the boundary held at 0.
struct HeatStep {
  Field u, next;
  KOKKOS_INLINE_FUNCTION void operator()(int i, int j) const {
    const bool boundary = i == 0 || j == 0 || i == n - 1 || j == n - 1;
    next(i, j) = boundary ? 0.0 : u(i, j) + r * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1) - 4 * u(i, j));
  }
};

// Two warm blobs, placed by the rank (each rank simulates its own field).
struct InitialField {
  Field u;
  double x0, y0, x1, y1;
  KOKKOS_INLINE_FUNCTION void operator()(int i, int j) const {
    const double x = i / double(n - 1), y = j / double(n - 1);
    const bool boundary = i == 0 || j == 0 || i == n - 1 || j == n - 1;
    const double blobs = gaussian((x - x0) * (x - x0) + (y - y0) * (y - y0), 0.01) +
                         0.5 * gaussian((x - x1) * (x - x1) + (y - y1) * (y - y1), 0.02);
    u(i, j) = boundary ? 0.0 : blobs;
  }
};

void solver_step(const Exec& space, const Field& u, const Field& next) {
  Kokkos::parallel_for("heat step", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>(space, {0, 0}, {n, n}), HeatStep{u, next});
}

// The interior of a field shifted by (di, dj): a view, no copy.
kten::Tensor interior(const kten::Tensor& u, int di, int dj) { return u.narrow(0, 1 + di, n - 2).narrow(1, 1 + dj, n - 2); }

// One row per interior point: its value and its four neighbours'.
kten::Tensor stencils(const kten::Tensor& u) {
  return kten::stack({interior(u, 0, 0), interior(u, -1, 0), interior(u, 1, 0), interior(u, 0, -1), interior(u, 0, 1)}, 2)
      .reshape({(n - 2) * (n - 2), 5});
}

// How the ranks train together: the model they call (the surrogate, or its DDP wrapper) and what
// they do after each backward pass and before reading a file another rank wrote.
struct Ranks {
  int rank = 0, size = 1;
  std::function<kten::nn::Module*(kten::nn::Module&)> wrap = [](kten::nn::Module& m) { return &m; };
  std::function<void()> synchronize_gradients = [] {};
  std::function<void()> barrier = [] {};
};

kten::nn::Sequential make_surrogate() {
  kten::nn::Sequential net;
  net.add(kten::nn::Linear(5, 32, {true, kten::float64, 1}));
  net.add(kten::nn::Tanh());
  net.add(kten::nn::Linear(32, 1, {true, kten::float64, 2}));
  return net;
}

int run(const Ranks& ranks, const std::string& checkpoint, int steps_per_phase) {
  const bool root = ranks.rank == 0;
  const kten::Device d = kten::num_gpus() > 0 ? kten::gpu(0) : kten::cpu();
  // The simulation's own queue: on a GPU a new stream (kten's default instance uses another), on
  // the host the host space. An application with a stream of its own wraps it instead:
  // Kokkos::Cuda(its_stream).
  const auto simulation = kten::new_stream_instance();
  const Exec space = *simulation;
  const kten::StreamGuard on_simulation_instance(space);  // kten enqueues on it from here on

  Field a("u", n, n), b("u next", n, n);
  const double shift = 0.1 * ranks.rank;
  Kokkos::parallel_for("initial field", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>(space, {0, 0}, {n, n}),
                       InitialField{a, 0.35 + shift, 0.4, 0.7 - shift, 0.65});
  // The simulation's fields as tensors on d: the same memory, shape (n, n), the View's strides.
  kten::Tensor u = kten::from_view(a, d), next = kten::from_view(b, d);
  if (root)
    std::printf("%d rank(s) on %s: a %dx%d heat equation in Views of %s (strides [%lld, %lld]), surrogate MLP 5-32-1\n",
                ranks.size, d.str().c_str(), n, n, Exec::memory_space::name(), static_cast<long long>(u.strides()[0]),
                static_cast<long long>(u.strides()[1]));

  kten::nn::Sequential surrogate = make_surrogate();
  surrogate.to(d);
  kten::nn::Module* trained = ranks.wrap(surrogate);  // the surrogate itself, or its DDP wrapper
  kten::optim::Adam adam(1e-2);
  kten::optim::CosineAnnealingLR schedule(adam, (steps / train_every) * steps_per_phase, 1e-4);
  kten::nn::MSELoss mse;
  bool ok = true;

  for (int step = 1; step <= steps; ++step) {
    solver_step(space, a, b);
    std::swap(a, b);
    std::swap(u, next);  // u: the new field, next: the one before it
    if (step % train_every != 0) continue;
    // Samples from the fields as they are now: inputs from the previous field, targets the change.
    const kten::Tensor X = stencils(next), Y = ((interior(u, 0, 0) - interior(next, 0, 0)) / r).reshape({(n - 2) * (n - 2), 1});
    const kten::Stats before = kten::stats();
    kten::Tensor loss;
    for (int k = 0; k < steps_per_phase; ++k) {
      adam.zero_grad(surrogate);
      loss = mse((*trained)(X), Y);
      loss.backward();
      ranks.synchronize_gradients();
      adam.step(surrogate);
      schedule.step();
    }
    const std::uint64_t syncs = kten::stats().host_syncs - before.host_syncs;
    const double value = loss.item<double>();  // the phase's one chosen read
    if (root) {
      std::printf("step %3d: %d optimiser steps, loss %.3e, lr %.2e, host synchronisations %llu\n", step,
                  steps_per_phase, value, adam.lr(), static_cast<unsigned long long>(syncs));
      kten::save_checkpoint(checkpoint, surrogate, adam, step);
    }
    if (ranks.size == 1 && syncs != 0) ok = false;  // with DDP the gradients' all-reduce waits for the device
  }

  // The checkpoint restored into fresh objects predicts the same bits.
  ranks.barrier();  // rank 0 wrote the file
  kten::nn::Sequential restored = make_surrogate();
  kten::optim::Adam fresh(1.0);
  const std::int64_t saved_at = kten::load_checkpoint(checkpoint, restored, fresh, d);
  kten::NoGradGuard inference;  // records nothing, keeps no activations
  const kten::Tensor X = stencils(u);
  const bool same = kten::max(kten::abs(restored(X) - surrogate(X))).item<double>() == 0 && fresh.lr() == adam.lr();
  if (root) std::printf("checkpoint of step %lld restored into a fresh model and Adam: %s\n",
                        static_cast<long long>(saved_at), same ? "same predictions and learning rate" : "DIFFERENT");
  ok = ok && same;

  // The surrogate replaces the solver for a few steps: its field (sur) against the solver's (u).
  Field s("surrogate field", n, n), s_next("surrogate next", n, n);
  Kokkos::deep_copy(space, s, a);
  Kokkos::deep_copy(space, s_next, s);  // its boundary stays 0
  kten::Tensor sur = kten::from_view(s, d), sur_next = kten::from_view(s_next, d);
  for (int k = 0; k < rollout; ++k) {
    interior(sur_next, 0, 0).copy_from(interior(sur, 0, 0) + r * surrogate(stencils(sur)).reshape({n - 2, n - 2}));
    std::swap(sur, sur_next);
    solver_step(space, a, b);
    std::swap(a, b);
    std::swap(u, next);
  }
  const double error = kten::max(kten::abs(sur - u)).item<double>();
  const double scale = kten::max(kten::abs(u)).item<double>();
  if (root) std::printf("surrogate for %d steps instead of the solver: largest error %.2e (field up to %.2e), %.2f%%\n",
                        rollout, error, scale, 100 * error / scale);
  ok = ok && error <= 0.05 * scale;
  return ok ? 0 : 1;
}

// The command line: [checkpoint] [optimiser steps per phase].
struct Options {
  std::string checkpoint = "insitu_surrogate.ckpt";
  int steps_per_phase = 200;
};

// False, having printed the usage, when the command line is not that.
bool parse(int argc, char* argv[], Options& options) {
  if (argc > 1) options.checkpoint = argv[1];
  if (argc > 2) options.steps_per_phase = std::atoi(argv[2]);
  if (argc <= 3 && options.steps_per_phase > 0) return true;
  std::fprintf(stderr, "usage: %s [checkpoint] [optimiser steps per phase, > 0]\n", argv[0]);
  return false;
}

}  // namespace

int main(int argc, char* argv[]) {
#if KTEN_WITH_MPI
  kten::dist::Guard guard(argc, argv);  // MPI (a single process needs no mpirun), then Kokkos
  Options options;
  if (!parse(argc, argv, options)) return 2;
  const auto world = kten::dist::world();
  try {
    // With more than one rank the surrogate trains data-parallel, each rank on its own simulation.
    Ranks ranks{world->rank(), world->size()};
    std::unique_ptr<kten::dist::DistributedDataParallel> ddp;
    if (world->size() > 1) {
      ranks.wrap = [&](kten::nn::Module& m) {
        ddp = std::make_unique<kten::dist::DistributedDataParallel>(m, world);
        return ddp.get();
      };
      ranks.synchronize_gradients = [&] { ddp->synchronize_gradients(); };
      ranks.barrier = [&] { world->barrier(); };
    }
    return run(ranks, options.checkpoint, options.steps_per_phase);
  } catch (const kten::Error& e) {
    kten::dist::abort(e.what());  // the other ranks may be waiting for this one
  }
#else
  try {  // the guard too: a GPU build on a node without a usable GPU throws here, and says why
    kten::ScopeGuard guard(argc, argv);
    Options options;
    if (!parse(argc, argv, options)) return 2;
    return run(Ranks{}, options.checkpoint, options.steps_per_phase);
  } catch (const kten::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
#endif
}
