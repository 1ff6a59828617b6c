// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What each CTest run means (KTEN_TEST_RUN), set before kten first reads its environment. Shared by
// the Catch2 suite's main and the PyTorch harness (tests/torch/), so a label means the same in both.
#include <cstdlib>
#include <string>

#include <kten/config.hpp>

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

namespace kten::test {

// CTest names the run in KTEN_TEST_RUN:
//  cpu       tests cpu() with GPUs present (emulated ones in a host-only build), so nothing may
//            silently pick a GPU;
//  emulated  tests gpu(0) on two emulated GPUs, which take the GPU code paths, with host access
//            to their memory trapped (except under AddressSanitizer, which then watches the
//            bounds of every emulated-GPU kernel instead, and ThreadSanitizer);
//  gpu       tests gpu(0) on a real GPU.
// The device under test is then named in KTEN_TEST_DEVICE ("cpu" or "gpu").
inline void configure_run() {
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

}  // namespace kten::test
