// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the memory of emulated GPUs (KTEN_EMULATE_GPUS). Emulated GPUs model device memory:
// kten's host code must reach it only through kernels and explicit copies, as on a real GPU. With
// KTEN_TRAP_HOST_ACCESS=1 (the test suite's emulated runs) every emulated-GPU block comes from one
// mmap arena that stays PROT_NONE except while an emulated-GPU kernel or copy runs (an
// EmulatedAccess is alive), so a host dereference of device memory crashes the test that does it.

#include <cstddef>
#include <memory>

namespace kten::detail {

/// \brief True when KTEN_TRAP_HOST_ACCESS=1 makes emulated-GPU memory unreadable outside kernels.
bool emulated_memory_trapped();

/// \brief `bytes` of emulated-GPU memory, owned by the returned pointer (freed with it); throws
/// std::bad_alloc when the arena is exhausted or the emulated GPUs' memory (KTEN_EMULATED_GPU_MIB)
/// is in use.
std::shared_ptr<void> allocate_emulated(std::size_t bytes, void** data);

/// \brief True when `p` points into the trapped arena of emulated-GPU memory (always false when
/// emulated_memory_trapped() is: untrapped emulated memory is ordinary host memory).
bool in_emulated_memory(const void* p);

}  // namespace kten::detail
