// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-op-tests: every row of the op and layer tables against kten itself on cpu() in float64, on
// the device under test (CTest's KTEN_TEST_RUN, as for the Catch2 suite). No libtorch: it runs in
// every build, the CUDA and HIP ones included, on a real GPU and in GPGPU-Sim.
#include "cli.hpp"
#include "engine.hpp"

namespace kten::harness {
namespace {

/// The reference: the row's kten side (or its kten_reference) on cpu(), in float64.
struct KtenReference {
  using Tensor = kten::Tensor;
  using Args = KtenArgs;
  static Tensor from(const std::vector<double>& v, const Shape& shape, DType dtype) {
    return engine::kten_from(v, shape, cpu(), dtype);
  }
  static Tensor leaf(const Tensor& t) {
    Tensor l = t.detach();
    l.requires_grad_();
    return l;
  }
  static Tensor call(const Row& row, const Args& x) { return row.kten_reference ? row.kten_reference(x) : row.kten(x); }
  static std::vector<double> values(const Tensor& t) { return engine::values_of(t); }
  static Shape shape(const Tensor& t) { return t.shape(); }
  static DType dtype(const Tensor& t) { return t.dtype(); }
  static Tensor cast(const Tensor& t, DType dtype) { return t.detach().astype(dtype); }
  static Tensor detach(const Tensor& t) { return t.detach(); }
  static void backward(const Tensor& out, const Tensor& w) { kten::sum(out * w).backward(); }
  static Tensor grad(const Tensor& t) { return t.grad(); }
  static Tensor abs(const Tensor& t) { return kten::abs(t.detach()); }
  static Tensor expand_leaf(const Tensor& t, const Shape& shape) { return leaf(t.detach().expand(shape).contiguous()); }
  // g summed over the axes `shape` lacks or has as 1 (broadcasting undone).
  static Tensor sum_to(const Tensor& g, const Shape& shape) {
    const int lead = g.ndim() - static_cast<int>(shape.size());
    std::vector<int> axes;
    for (int d = 0; d < g.ndim(); ++d)
      if (d < lead || (shape[static_cast<std::size_t>(d - lead)] == 1 && g.shape()[static_cast<std::size_t>(d)] != 1)) axes.push_back(d);
    return (axes.empty() ? g : kten::sum(g, axes, true)).reshape(shape);
  }
  static Tensor zeros_like(const Tensor& t) { return kten::zeros(t.shape(), cpu(), t.dtype()); }
  static DType reference_dtype(const Row&, DType) { return DType::float64; }
};

}  // namespace

Summary run_rows(const std::vector<Row>& rows, const Config& config, std::ostream& out) {
  return engine::run_rows_with<KtenReference>(rows, config, out);
}

}  // namespace kten::harness

int main(int argc, char* argv[]) { return kten::harness::run_main(argc, argv, "kten-op-tests", "kten on cpu() in float64"); }
