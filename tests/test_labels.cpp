// Every kernel, allocation and profiling region kten produces carries a kten:: label, so Kokkos
// Tools profilers show kten's work by name (ArborX's tstKokkosToolsAnnotations does the same).
#include <mutex>
#include <set>
#include <string>

#include <Kokkos_Core.hpp>

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
  // Kokkos' OpenMP backend grows its own per-thread team scratch pool without a label.
  labels().erase("allocation [unlabeled]");
  for (const auto& entry : labels()) {
    INFO(entry);
    CHECK(entry.find(" kten::") != std::string::npos);
  }
}
