// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::dist in a build without MPI (KTEN_ENABLE_MPI=OFF): only kten-info's line.
#include "hooks.hpp"

namespace kten::detail {

std::string mpi_report() { return "not built (configure with -DKTEN_ENABLE_MPI=ON for kten::dist)"; }

}  // namespace kten::detail
