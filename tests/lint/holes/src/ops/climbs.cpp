// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Not compiled: an op file may use core, dispatch and the tape, never a module (1 report).
#include "core/storage.hpp"
#include "dispatch/launch.hpp"
#include "autograd/autograd.hpp"
#include "nn/functional.hpp"         // 1: nn is above ops
