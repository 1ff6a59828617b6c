// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what the code built in every configuration needs from kten::dist, whose MPI part
// (src/dist/) is built only with KTEN_ENABLE_MPI.

#include <memory>
#include <string>

#include <kten/dist/process_group.hpp>

namespace kten::detail {

/// \brief kten-info's MPI line: the library and its state, or "not built" (src/dist/).
std::string mpi_report();
/// \brief Sets what dist::default_group() returns (src/dist/data_parallel.cpp); kten::dist's init and
/// finalize call it.
void set_default_group(std::shared_ptr<const dist::ProcessGroup> group);

}  // namespace kten::detail
