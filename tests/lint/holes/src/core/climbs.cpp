// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Not compiled: includes the layers lint (cmake/KtenLint.cmake) must reject in a core/ file; each
// is a way core once reached above itself (the tensor core recorded on the tape and launched ops'
// kernels). 4 reports here, 1 in ../ops/climbs.cpp and 1 for ../widgets/.
#include <kten/ops.hpp>              // the public API: fine from any layer
#include "core/fail.hpp"             // its own layer: fine
#include "storage.hpp"               // its own folder: fine
#include "dispatch/dispatch.hpp"     // 1: dispatch is above core
#include "autograd/autograd.hpp"     // 2: the tape is above core
#  include "ops/elementwise.hpp"     // 3: spaced, still an include
#include "../ops/views.hpp"          // 4: a relative climb
