// The one test main: Kokkos is initialised once for all test cases, then Catch2 runs. Listing the
// tests (what CTest does to discover them) needs no Kokkos, so it works where the build's GPU
// backend cannot start (a CUDA build on a machine without a GPU).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <catch2/catch_session.hpp>

#include <kten/kten.hpp>

// AddressSanitizer checks emulated-GPU kernels' bounds itself, and ThreadSanitizer cannot map the
// trap's address-space reservation: under either, emulated memory is left untrapped.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KTEN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KTEN_TEST_SANITIZED 1
#endif
#endif
#ifndef KTEN_TEST_SANITIZED
#define KTEN_TEST_SANITIZED 0
#endif

namespace {
// CTest names the run in KTEN_TEST_RUN; what each run means is set here, before kten first reads
// its environment:
//  cpu       tests cpu() with GPUs present (emulated ones in a host-only build), so nothing may
//            silently pick a GPU;
//  emulated  tests gpu(0) on two emulated GPUs, which take the GPU code paths, with host access
//            to their memory trapped (except under AddressSanitizer, which then watches the
//            bounds of every emulated-GPU kernel instead, and ThreadSanitizer);
//  gpu       tests gpu(0) on a real GPU.
void configure_run() {
  setenv("OMP_PROC_BIND", "false", 0);
  const char* run = std::getenv("KTEN_TEST_RUN");
  if (run == nullptr) return;
  const std::string name = run;
  const bool gpu_build = kten::config::gpu_backend != nullptr;
  if (name == "cpu") {
    setenv("KTEN_TEST_DEVICE", "cpu", 1);
    if (!gpu_build) setenv("KTEN_EMULATE_GPUS", "2", 1);
  } else if (name == "emulated") {
    setenv("KTEN_TEST_DEVICE", "gpu", 1);
    setenv("KTEN_EMULATE_GPUS", "2", 1);
#if !KTEN_TEST_SANITIZED
    setenv("KTEN_TRAP_HOST_ACCESS", "1", 1);
#endif
  } else if (name == "gpu") {
    setenv("KTEN_TEST_DEVICE", "gpu", 1);
  }
}
}  // namespace

int main(int argc, char* argv[]) {
  configure_run();
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  std::unique_ptr<kten::ScopeGuard> guard;
  if (!listing) guard = std::make_unique<kten::ScopeGuard>(argc, argv);
  return Catch::Session().run(argc, argv);
}
