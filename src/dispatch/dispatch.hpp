// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: everything a kernel needs to run, one header per concern under dispatch/ (the lint,
// cmake/KtenLint.cmake, keeps Kokkos policies, launches and typed pointers there):
//   backends.hpp         runtime Device -> backend (execution-space instance + memory space)
//   dtypes.hpp           runtime DType -> element type
//   host_threads.hpp     Kokkos 3.4's thread-pool and scratch rules for launches from any thread
//   emulated_access.hpp  an emulated GPU's trapped memory opened around its kernels
//   gpu_vendor.hpp       the GPU vendor the kernels are shaped for (a compile error for an unknown one)
//   policies.hpp         range and team policies, the serial grain
//   launch.hpp           launch(), run(), run_reduce(), for_each_index(), data_ptr(), Region

#include "core/backends.hpp"
#include "dtypes.hpp"
#include "emulated_access.hpp"
#include "gpu_vendor.hpp"
#include "host_threads.hpp"
#include "launch.hpp"
#include "policies.hpp"
