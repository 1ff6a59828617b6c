// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the GPU path must get right, checked without a GPU: emulated GPUs take the device code
// paths and their memory traps host access; every kernel checks all operands' devices; Views
// must match a tensor's memory space exactly; pinned buffers are not reused while a copy may
// still read them; transfers fence only where the host reads next.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <limits>
#include <type_traits>

#include <kten/kokkos.hpp>

#include "dispatch/dispatch.hpp"
#include "core/emulated_memory.hpp"
#include "ops/linalg.hpp"
#include "core/runtime_internal.hpp"
#include "support.hpp"

using namespace kten;

TEST_CASE("emulated GPUs take the device code path, cpu() the host one", "[gpu-path]") {
  const auto takes_host_path = [](const Device& d) {
    return detail::with_backend(d, [](auto backend) { return decltype(backend)::is_host; });
  };
  CHECK(takes_host_path(cpu()));
  if (num_gpus() > 0) CHECK_FALSE(takes_host_path(gpu(0)));
  if (gpus_are_emulated()) {
    const bool emulated = detail::with_backend(
        gpu(0), [](auto backend) { return decltype(backend)::emulated; });
    CHECK(emulated);
  }
}

// Kokkos 3.4 would put a closure of 512 bytes or more in constant memory, waiting on the host
// before each launch for the kernel that used it before (dispatch/launch.hpp): a GPU's policies
// ask for the functor as a kernel argument, host ones stay as they are.
TEST_CASE("a GPU launch passes its functor as a kernel argument", "[gpu-path]") {
  using Light = Kokkos::Experimental::WorkItemProperty::HintLightWeight_t;
  using Gpu = decltype(detail::as_kernel_argument<detail::GpuBackend>(detail::RangePolicy<detail::GpuBackend>()));
  using GpuTeams = decltype(detail::as_kernel_argument<detail::GpuBackend>(detail::BoundedTeamPolicy<detail::GpuBackend, 256>()));
  using Emulated = decltype(detail::as_kernel_argument<detail::EmulatedGpuBackend>(detail::RangePolicy<detail::EmulatedGpuBackend>()));
  STATIC_REQUIRE(std::is_same_v<Gpu::work_item_property, Light>);
  STATIC_REQUIRE(std::is_same_v<GpuTeams::work_item_property, Light>);
  STATIC_REQUIRE(std::is_same_v<Emulated, detail::RangePolicy<detail::EmulatedGpuBackend>>);
  STATIC_REQUIRE(detail::kMaxFunctorBytes + 512 <= 4096);  // the closure's policy and reducer fit beside it
}

TEST_CASE("matrix-vector and vector-matrix products skip the tiling and stay exact", "[gpu-path][matmul]") {
  const Device d = test::device();
  for (std::int64_t k : {3, 64, 300}) {  // short rows, and rows long enough for a GPU's warp per row
    CAPTURE(k);
    auto A = uniform({37, k}, -1, 1, d, 1, float64), x = uniform({k}, -1, 1, d, 2, float64);
    auto row = uniform({1, k}, -1, 1, d, 3, float64), B = uniform({k, 29}, -1, 1, d, 4, float64);
    const auto ha = A.to_vector<double>(), hx = x.to_vector<double>(), hr = row.to_vector<double>(),
               hb = B.to_vector<double>();
    std::vector<double> want_y(37, 0.0), want_z(29, 0.0);
    for (std::int64_t i = 0; i < 37; ++i)
      for (std::int64_t p = 0; p < k; ++p) want_y[i] += ha[i * k + p] * hx[p];
    for (std::int64_t j = 0; j < 29; ++j)
      for (std::int64_t p = 0; p < k; ++p) want_z[j] += hr[p] * hb[p * 29 + j];
    test::require_allclose<double>(matmul(A, x), want_y);
    test::require_allclose<double>(matmul(A, x.reshape({k, 1})), want_y);
    test::require_allclose<double>(matmul(row, B), want_z);
    // Linear with a batch of one: the bias goes along the output row.
    nn::Linear layer(k, 29, {true, float64, 5});
    layer.to(d);
    const auto w = layer.weight().to_vector<double>(), b = layer.bias().to_vector<double>();
    std::vector<double> want_out(29);
    for (std::int64_t j = 0; j < 29; ++j) {
      want_out[j] = b[j];
      for (std::int64_t p = 0; p < k; ++p) want_out[j] += hr[p] * w[j * k + p];  // W is (out, in)
    }
    test::require_allclose<double>(layer(row), want_out);
  }
}

TEST_CASE("host code that dereferences emulated GPU memory crashes", "[gpu-path][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  if (!gpus_are_emulated() || !detail::emulated_memory_trapped())
    SKIP("needs emulated GPUs with KTEN_TRAP_HOST_ACCESS=1 (the emulated test run sets both)");
  auto t = ones({16}, gpu(0));
  CHECK(t.to_vector<float>()[3] == 1.f);  // explicit copies may read it
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // die of the fault, not of Catch2's handler
    volatile float v = static_cast<const float*>(t.data())[3];  // a host read of device memory
    (void)v;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGSEGV);
}

TEST_CASE("the matrix product checks every operand's device", "[gpu-path][multidevice]") {
  KTEN_REQUIRE_GPUS(2);
  auto a = ones({3, 4}, gpu(0)), b = ones({4, 2}, gpu(0)), c = empty({3, 2}, gpu(0));
  auto bias_elsewhere = ones({2}, gpu(1)), c_elsewhere = empty({3, 2}, gpu(1));
  CHECK_THROWS_AS(detail::gemm(a, false, b, false, c, &bias_elsewhere, false), DeviceMismatch);
  CHECK_THROWS_AS(detail::gemm(a, false, b, false, c_elsewhere, nullptr, false), DeviceMismatch);
  CHECK_THROWS_AS(detail::gemm(a, false, ones({4, 2}, gpu(1)), false, c, nullptr, false), DeviceMismatch);
  CHECK_NOTHROW(detail::gemm(a, false, b, false, c, nullptr, false));
}

TEST_CASE("Linear checks its input and gradient against its parameters' device", "[gpu-path][multidevice]") {
  KTEN_REQUIRE_GPUS(2);
  nn::Linear eager(4, 2);
  eager.to(gpu(0));
  // forward() itself, not only Module::operator(), must check (Sequential and users call it).
  CHECK_THROWS_AS(eager.forward(ones({3, 4}, gpu(1))), DeviceMismatch);
  nn::Linear lazy(2);
  lazy.to(gpu(0));
  CHECK_THROWS_AS(lazy.forward(ones({3, 4}, gpu(1))), DeviceMismatch);
  CHECK(lazy.in_features() == -1);  // still lazy: nothing was initialised on the wrong device
  auto y = eager(ones({3, 4}, gpu(0)));
  CHECK_THROWS_AS(y.backward(ones({3, 2}, gpu(1))), DeviceMismatch);
}

TEST_CASE("a View must be in exactly the tensor's memory space", "[gpu-path]") {
  const Device d = test::device();
  auto t = ones({4}, d);
  // AnonymousSpace is reachable from everywhere, like CudaUVMSpace from the host: not enough.
  CHECK_THROWS_AS((t.view<float*, Kokkos::AnonymousSpace>()), Error);
  Kokkos::View<float*, Kokkos::AnonymousSpace> anonymous(static_cast<float*>(nullptr), 0);
  CHECK_THROWS_AS(from_view(anonymous, d), Error);
  using Exact = detail::RawView<detail::HostBackend, float>::memory_space;
  if (d.is_cpu()) CHECK_NOTHROW(t.view<float*, Exact>());
}

TEST_CASE("max is -inf over -inf and NaN wherever a NaN is, on every device and axis", "[gpu-path][ops]") {
  const Device d = test::device();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(max(tensor({-inf, -inf, -inf}, d)).item<float>() == -inf);
  CHECK(max(full({5000}, -inf, d)).item<float>() == -inf);
  CHECK(std::isnan(max(tensor({1.f, nan}, d)).item<float>()));
  CHECK(std::isnan(max(tensor({nan, 1.f}, d)).item<float>()));
  std::vector<double> many(10000, 1.0);
  many[7777] = std::nan("");
  CHECK(std::isnan(max(tensor(many, d)).item<double>()));
  auto rows = tensor({{1.f, nan, 3.f}, {-inf, -inf, -inf}}, d);
  const auto by_row = max(rows, 1).to_vector<float>();
  CHECK(std::isnan(by_row[0]));
  CHECK(by_row[1] == -inf);
  const auto by_column = max(rows, 0).to_vector<float>();
  CHECK(by_column[0] == 1.f);
  CHECK(std::isnan(by_column[1]));
  CHECK(by_column[2] == 3.f);
  // Rows and columns long enough for the host's lanes and column blocks.
  const auto wide = full({3, 100}, -inf, d);
  std::vector<float> values(300, 1.f);
  values[77] = nan;          // row 0, column 77
  values[200 + 99] = -inf;   // row 2 is all 1 but its last element
  const auto grid = tensor(values, d).reshape({3, 100});
  const auto grid_rows = max(grid, 1).to_vector<float>();
  CHECK(std::isnan(grid_rows[0]));
  CHECK(grid_rows[1] == 1.f);
  CHECK(grid_rows[2] == 1.f);
  CHECK(max(wide, 1).to_vector<float>() == std::vector<float>(3, -inf));
  const auto grid_columns = max(grid, 0).to_vector<float>();
  CHECK(std::isnan(grid_columns[77]));
  CHECK(grid_columns[76] == 1.f);
  CHECK(grid_columns[99] == 1.f);
  CHECK(std::isnan(sum(grid, 0).to_vector<float>()[77]));
  CHECK(std::isnan(sum(grid, 1).to_vector<float>()[0]));
  // A NaN early in a long row stays NaN through every larger (for max) and smaller (for min)
  // number after it in its lane; one in a row's tail too; 20000 elements are several parts.
  for (DType dtype : {float32, float64}) {
    CAPTURE(dtype);
    std::vector<double> long_rows(3000);
    for (std::size_t i = 0; i < long_rows.size(); ++i) long_rows[i] = (i % 2 ? 1e30 : -1e30) * (1.0 + i);
    long_rows[5] = std::nan("");     // row 0, among the first lanes
    long_rows[1000 + 998] = std::nan("");  // row 1, in the tail after the last whole set of lanes
    const Tensor x = tensor(long_rows, d).reshape({3, 1000}).astype(dtype);
    for (const Tensor& folded : {max(x, 1), min(x, 1)}) {
      const auto v = folded.astype(float64).to_vector<double>();
      CHECK(std::isnan(v[0]));
      CHECK(std::isnan(v[1]));
      CHECK(std::isfinite(v[2]));
    }
    std::vector<double> parts(20000, 1.0);
    parts[3] = std::nan("");
    parts[19999] = 1e300;
    const Tensor whole = tensor(parts, d).astype(dtype);
    CHECK(std::isnan(max(whole).astype(float64).item<double>()));
    CHECK(std::isnan(min(-whole).astype(float64).item<double>()));
  }
}

TEST_CASE("a pinned buffer is not rewritten while a copy to a GPU may still read it", "[gpu-path][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  auto pinned = rand({1000}, cpu(), 1).pin_memory();
  REQUIRE(pinned.is_pinned());
  auto first = pinned.to(gpu(0));
  auto before = detail::gpu_fence_count();
  pinned.copy_from(zeros({1000}));  // the host rewrites the batch buffer: wait for the DMA first
  CHECK(detail::gpu_fence_count() == before + 1);
  CHECK(first.to_vector<float>() == rand({1000}, cpu(), 1).to_vector<float>());

  auto second = pinned.to(gpu(0));
  before = detail::gpu_fence_count();
  (void)pinned.data();  // the application may write through the pointer
  CHECK(detail::gpu_fence_count() == before + 1);
  (void)pinned.data();  // nothing is pending any more
  CHECK(detail::gpu_fence_count() == before + 1);

  before = detail::gpu_fence_count();
  { auto transient = ones({8}).pin_memory().to(gpu(0)); }  // freed right after its copy was queued
  CHECK(detail::gpu_fence_count() == before + 1);
}

TEST_CASE("copies to a GPU from ordinary host memory do not fence", "[gpu-path][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const auto before = detail::gpu_fence_count();
  auto t = tensor({1.f, 2.f, 3.f}, gpu(0));
  auto u = ones({100}).to(gpu(0));
  CHECK(detail::gpu_fence_count() == before);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});  // the host read fences
  CHECK(detail::gpu_fence_count() == before + 1);
}
