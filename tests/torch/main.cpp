// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-torch-harness: every row of the op and layer tables (tests/ops) against PyTorch on the
// device under test (CTest's KTEN_TEST_RUN, as for the Catch2 suite), or the self-test of planted
// faults; options as kten-op-tests' (tests/ops/cli.cpp).
#include <ATen/Parallel.h>
#include <torch/version.h>

#include "../ops/cli.hpp"
#include "../ops/engine.hpp"

namespace kten::harness {
namespace {

at::ScalarType torch_dtype(DType d) {
  switch (d) {
    case DType::float32: return at::kFloat;
    case DType::float64: return at::kDouble;
    case DType::int64: return at::kLong;
    case DType::boolean: return at::kBool;
  }
  return at::kDouble;
}

/// The reference: the row's ATen side, in the case's dtype (float64 where the row asks).
struct TorchReference {
  using Tensor = at::Tensor;
  using Args = TorchArgs;
  static Tensor from(const std::vector<double>& v, const Shape& shape, DType dtype) {
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kDouble));
    std::copy(v.begin(), v.end(), t.data_ptr<double>());
    return t.to(torch_dtype(dtype));
  }
  static Tensor leaf(const Tensor& t) { return t.detach().requires_grad_(true); }
  static Tensor call(const Row& row, const Args& x) { return row.torch(x); }
  static std::vector<double> values(const Tensor& t) {
    const at::Tensor d = t.detach().to(at::kDouble).contiguous();
    return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
  }
  static Shape shape(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }
  static DType dtype(const Tensor& t) {
    switch (t.scalar_type()) {
      case at::kFloat: return DType::float32;
      case at::kLong: return DType::int64;
      case at::kBool: return DType::boolean;
      default: return DType::float64;
    }
  }
  static Tensor cast(const Tensor& t, DType dtype) { return t.to(torch_dtype(dtype)); }
  static Tensor detach(const Tensor& t) { return t.detach(); }
  static void backward(const Tensor& out, const Tensor& w) { (out * w).sum().backward(); }
  static Tensor grad(const Tensor& t) { return t.grad(); }
  static Tensor abs(const Tensor& t) { return t.detach().abs(); }
  static Tensor expand_leaf(const Tensor& t, const Shape& shape) {
    return t.detach().expand(shape).contiguous().requires_grad_(true);
  }
  static Tensor sum_to(const Tensor& g, const Shape& shape) { return at::sum_to(g, shape); }
  static Tensor zeros_like(const Tensor& t) { return at::zeros_like(t); }
  static DType reference_dtype(const Row& row, DType dtype) { return row.torch64 ? DType::float64 : dtype; }
};

}  // namespace

Summary run_rows(const std::vector<Row>& rows, const Config& config, std::ostream& out) {
  return engine::run_rows_with<TorchReference>(rows, config, out);
}

}  // namespace kten::harness

int main(int argc, char* argv[]) {
  at::set_num_threads(1);  // kten's kernels have the cores; PyTorch is the slow, simple reference
  return kten::harness::run_main(argc, argv, "kten-torch-harness", std::string("PyTorch ") + TORCH_VERSION);
}
