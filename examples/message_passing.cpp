// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Message passing on an unstructured mesh: the pattern of mesh-based graph networks
// (MeshGraphNet, the GNNs coupled to CFD codes), small enough to read in one go.
//
//   build/cpu/examples/message-passing                        on cpu()
//   KTEN_EMULATE_GPUS=1 build/cpu/examples/message-passing    on an emulated GPU (a GPU in a GPU build)
//
// The mesh is a jittered grid cut into triangles; each triangle side is an edge both ways. A layer
// gathers the features of each edge's two nodes (index_select), runs an MLP on every edge, and adds
// the edges' messages into their destination nodes (scatter_add, deterministic: the same bits on
// every run and device), divided by the node's degree. It learns the mesh's graph Laplacian of a
// field, mean over neighbours j of (u_j - u_i), from random smooth fields u drawn on the device, so
// a training step never waits for the host: the mean loss of each 50 steps is read once. The
// optional argument sets the number of steps (300). Exits 1 unless the last 50 steps' mean loss is
// below a tenth of the first 50's.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <kten/kten.hpp>

namespace {

/// A jittered side x side grid of nodes in the unit square, each cell cut into two triangles.
struct Mesh {
  std::int64_t nodes = 0;
  std::vector<double> px, py;          // node positions
  std::vector<std::int64_t> src, dst;  // directed edges
};

Mesh make_mesh(std::int64_t side) {
  Mesh m;
  m.nodes = side * side;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> jitter(-0.3, 0.3);
  const double h = 1.0 / static_cast<double>(side - 1);
  for (std::int64_t i = 0; i < side; ++i)
    for (std::int64_t j = 0; j < side; ++j) {
      const bool inside = i > 0 && j > 0 && i + 1 < side && j + 1 < side;
      m.px.push_back(h * (static_cast<double>(j) + (inside ? jitter(rng) : 0.0)));
      m.py.push_back(h * (static_cast<double>(i) + (inside ? jitter(rng) : 0.0)));
    }
  const auto connect = [&](std::int64_t a, std::int64_t b) {
    m.src.push_back(a), m.dst.push_back(b);
    m.src.push_back(b), m.dst.push_back(a);
  };
  for (std::int64_t i = 0; i < side; ++i)
    for (std::int64_t j = 0; j < side; ++j) {
      const std::int64_t n = i * side + j;
      if (j + 1 < side) connect(n, n + 1);                             // right
      if (i + 1 < side) connect(n, n + side);                          // up
      if (i + 1 < side && j + 1 < side) connect(n, n + side + 1);      // the cell's diagonal
    }
  return m;
}

/// One message-passing layer: messages m_ij = MLP(u_i, u_j, x_j - x_i, y_j - y_i) on every edge
/// i -> j, summed into j and divided by j's degree.
class MessagePassing : public kten::nn::Module {
 public:
  MessagePassing(const Mesh& mesh, const kten::Device& d) {
    kten::nn::Sequential mlp;
    mlp.add(kten::nn::Linear(4, 32, {true, kten::float32, 1}));
    mlp.add(kten::nn::Tanh());
    mlp.add(kten::nn::Linear(32, 1, {true, kten::float32, 2}));
    mlp_ = register_module("edge_mlp", std::move(mlp));
    to(d);
    const auto edges = static_cast<std::int64_t>(mesh.src.size());
    src_ = kten::tensor(mesh.src, d);
    dst_ = kten::tensor(mesh.dst, d);
    std::vector<float> degree(static_cast<std::size_t>(mesh.nodes), 0.0f), dx, dy;
    for (std::int64_t e = 0; e < edges; ++e) {
      degree[mesh.dst[e]] += 1.0f;
      dx.push_back(static_cast<float>(mesh.px[mesh.src[e]] - mesh.px[mesh.dst[e]]));
      dy.push_back(static_cast<float>(mesh.py[mesh.src[e]] - mesh.py[mesh.dst[e]]));
    }
    degree_ = kten::tensor(degree, {mesh.nodes, 1}, d);
    geometry_ = kten::cat({kten::tensor(dx, {edges, 1}, d), kten::tensor(dy, {edges, 1}, d)}, 1);
    scatter_index_ = dst_.reshape({edges, 1});  // one destination per edge (and per message feature)
  }

  /// u: (nodes, 1) -> (nodes, 1).
  kten::Tensor forward(const kten::Tensor& u) override {
    const kten::Tensor edge_in = kten::cat({kten::index_select(u, 0, src_), kten::index_select(u, 0, dst_), geometry_}, 1);
    const kten::Tensor messages = (*mlp_)(edge_in);
    return kten::scatter_add(kten::zeros(u.shape(), u.device(), u.dtype()), 0, scatter_index_, messages) / degree_;
  }
  std::string name() const override { return "MessagePassing"; }

  /// The target: mean over neighbours of u_j - u_i, from the same gather and scatter.
  kten::Tensor laplacian(const kten::Tensor& u) const {
    const kten::Tensor diff = kten::index_select(u, 0, src_) - kten::index_select(u, 0, dst_);
    return kten::scatter_add(kten::zeros(u.shape(), u.device(), u.dtype()), 0, scatter_index_, diff) / degree_;
  }

 private:
  std::shared_ptr<kten::nn::Sequential> mlp_;
  kten::Tensor src_, dst_, degree_, geometry_, scatter_index_;
};

}  // namespace

int main(int argc, char** argv) {
  kten::ScopeGuard kokkos(argc, argv);
  const kten::Device d = kten::try_gpu();
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const Mesh mesh = make_mesh(32);
  std::printf("mesh: %lld nodes, %zu directed edges, on %s\n", static_cast<long long>(mesh.nodes), mesh.src.size(),
              d.str().c_str());
  MessagePassing layer(mesh, d);
  const kten::Tensor px = kten::tensor(std::vector<float>(mesh.px.begin(), mesh.px.end()), {mesh.nodes, 1}, d);
  const kten::Tensor py = kten::tensor(std::vector<float>(mesh.py.begin(), mesh.py.end()), {mesh.nodes, 1}, d);
  kten::optim::Adam adam(1e-3);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> wave(-6.0, 6.0), phase(0.0, 6.283);
  // Each step's field is new, so single losses vary: the mean over each window of 50 steps is
  // kept on the device and read once per window.
  constexpr int window = 50;
  kten::Tensor window_sum = kten::zeros({}, d);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    // A random smooth field sin(a x + b y + c), made on the device.
    const kten::Tensor u = kten::sin(px * wave(rng) + py * wave(rng) + phase(rng));
    const kten::Tensor loss = kten::nn::MSELoss()(layer(u), layer.laplacian(u)) * 1e4;
    adam.zero_grad(layer);
    loss.backward();
    adam.step(layer);
    window_sum = window_sum + loss.detach();
    if ((step + 1) % window == 0 || step + 1 == steps) {
      last = window_sum.item<double>() / ((step % window) + 1);  // the only host read: once per window
      if (step < window) first = last;
      std::printf("steps %4d-%4d  mean loss %.5f\n", step - step % window, step, last);
      window_sum = kten::zeros({}, d);
    }
  }
  const bool ok = std::isfinite(last) && last < 0.1 * first;
  std::printf("mean loss %.5f -> %.5f: %s\n", first, last, ok ? "fell below a tenth" : "did NOT fall below a tenth");
  return ok ? 0 : 1;
}
