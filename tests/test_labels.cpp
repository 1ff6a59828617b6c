// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every kernel, allocation and profiling region kten produces carries a kten:: label, so Kokkos
// Tools profilers show kten's work by name (ArborX's tstKokkosToolsAnnotations does the same).
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "dispatch/dispatch.hpp"
#include "support.hpp"

namespace {
std::mutex labels_mutex;
std::set<std::string>& labels() {
  static std::set<std::string> seen;
  return seen;
}
void note(const char* kind, const char* label) {
  std::lock_guard<std::mutex> lock(labels_mutex);
  labels().insert(std::string(kind) + " " + label);
}
void on_kernel(const char* label, std::uint32_t, std::uint64_t*) { note("kernel", label); }
void on_region(const char* label) { note("region", label); }
std::vector<std::pair<std::string, std::uint32_t>>& launches() {
  static std::vector<std::pair<std::string, std::uint32_t>> seen;
  return seen;
}
void on_launch(const char* label, std::uint32_t device_id, std::uint64_t*) {
  std::lock_guard<std::mutex> lock(labels_mutex);
  launches().emplace_back(label, device_id);
}
void on_allocation(Kokkos::Profiling::SpaceHandle, const char* label, const void*, std::uint64_t) {
  note("allocation", label);
}
}  // namespace

TEST_CASE("every kernel, allocation and region kten produces is labelled kten::", "[labels]") {
  using namespace kten;
  namespace tools = Kokkos::Tools::Experimental;
  const Device d = test::device();
  empty_cache();  // fresh allocations, so the allocation callback sees them
  tools::set_begin_parallel_for_callback(on_kernel);
  tools::set_begin_parallel_reduce_callback(on_kernel);
  tools::set_begin_parallel_scan_callback(on_kernel);
  tools::set_push_region_callback(on_region);
  tools::set_allocate_data_callback(on_allocation);
  {
    // A bit of everything: factories, elementwise, reductions, matmul, transfers, training.
    auto x = rand({33, 17}, d, 1), y = randn({17, 5}, d, 2);
    auto z = (matmul(x, y) + 1.0).exp() * 2.0;
    (void)sum(z).item<float>();
    (void)max(z, 1).to_vector<float>();
    (void)norm(z.transpose(), 0).to_vector<float>();
    (void)mean(fma(x, x, x)).item<float>();
    (void)arange(0, 10, 1, d, float64).astype(float32).to(cpu()).to_vector<float>();
    // int64 and boolean: comparisons, where, argmax, index_select (with its bounds check), gather.
    const Tensor labels = argmax(x, 1), mask = gt(x, 0.5);
    (void)where(mask, x, 0.0).to_vector<float>();
    (void)index_select(x, 0, labels).sum().item<float>();
    (void)gather(x, 1, labels.unsqueeze(1)).to_vector<float>();
    (void)argmax(x).item<std::int64_t>();
    (void)eq(labels, labels).to_vector<bool>();
    data::SyntheticRegression data({2.f, -3.4f}, 4.2f, 0.01f, 64, 32, 0);
    nn::Sequential model;
    model.add(nn::Linear(4));
    model.add(nn::ReLU());
    model.add(nn::Linear(1));
    optim::SGD sgd(0.01f);
    Trainer trainer(1, d.is_gpu() ? 1 : 0);
    trainer.set_progress_stream(nullptr);
    trainer.fit(model, nn::MSELoss(), sgd, data, 16);
  }
  tools::set_begin_parallel_for_callback(nullptr);
  tools::set_begin_parallel_reduce_callback(nullptr);
  tools::set_begin_parallel_scan_callback(nullptr);
  tools::set_push_region_callback(nullptr);
  tools::set_allocate_data_callback(nullptr);
  std::lock_guard<std::mutex> lock(labels_mutex);
  CHECK(labels().size() > 10);
  // Module calls name their regions only while a tool listens, as one does here.
  CHECK(labels().count("region kten::Linear::forward") == 1);
  CHECK(labels().count("region kten::Sequential::forward") == 1);
  CHECK(labels().count("region kten::backward") == 1);
  // Kokkos grows its own team scratch pools: OpenMP's per thread without a label (Kokkos 3) or
  // under its own name (Kokkos 5), Serial's (small products run there) under its own name.
  labels().erase("allocation [unlabeled]");
  labels().erase("allocation Kokkos::OpenMP::scratch_mem");
  labels().erase("allocation Kokkos::Serial::scratch_mem");
  for (const auto& entry : labels()) {
    INFO(entry);
    CHECK(entry.find(" kten::") != std::string::npos);
  }
}

TEST_CASE("small cpu() kernels run on the calling thread, large ones on every host thread", "[labels][dispatch]") {
  using namespace kten;
  namespace tools = Kokkos::Tools::Experimental;
  const Device d = test::device();
  auto small = ones({100}, d), large = ones({1 << 20}, d);
  auto A = ones({8, 8}, d), B = ones({256, 256}, d);
  synchronize(d);
  launches().clear();
  tools::set_begin_parallel_for_callback(on_launch);
  tools::set_begin_parallel_reduce_callback(on_launch);
  (void)(small + small);
  (void)(large + large);
  (void)matmul(A, A);
  (void)matmul(B, B);
  (void)sum(small);
  synchronize(d);
  tools::set_begin_parallel_for_callback(nullptr);
  tools::set_begin_parallel_reduce_callback(nullptr);
  std::vector<std::pair<std::string, std::uint32_t>> seen;
  {
    std::lock_guard<std::mutex> lock(labels_mutex);
    seen = launches();
  }
  REQUIRE(seen.size() >= 5);
  const std::uint32_t host = tools::device_id(Kokkos::DefaultHostExecutionSpace());
#ifdef KOKKOS_ENABLE_SERIAL
  const std::uint32_t serial = tools::device_id(Kokkos::Serial());
#else
  const std::uint32_t serial = host;  // nowhere else to go
#endif
  // In order: the small add, the large add, the small and large products, then the small sum.
  CHECK(seen[0].first == "kten::add");
  CHECK(seen[1].first == "kten::add");
  CHECK(seen[2].first == "kten::gemm");
  CHECK(seen[3].first == "kten::gemm");
  if (d.is_cpu()) {
    CHECK(seen[0].second == serial);
    CHECK(seen[1].second == host);
    CHECK(seen[2].second == serial);
    CHECK(seen[3].second == host);
    for (std::size_t i = 4; i < seen.size(); ++i) CHECK(seen[i].second == serial);
  } else {  // GPUs, emulated ones included, launch everything on the device's instance
    for (const auto& [label, id] : seen) CHECK(id == seen[1].second);
  }
}
