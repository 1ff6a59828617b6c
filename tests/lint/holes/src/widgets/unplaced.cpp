// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Not compiled: a folder of src/ that is in no layer is reported once, whatever it includes.
#include "core/fail.hpp"
