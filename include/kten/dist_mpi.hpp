// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file dist_mpi.hpp
/// \brief kten::dist with MPI types: wrap an application's MPI communicator (builds with
/// KTEN_ENABLE_MPI=ON). Includes mpi.h.

#include <memory>

#include <mpi.h>

#include <kten/dist.hpp>

namespace kten::dist {

/// \brief A Communicator over the application's own `comm` (MPI_COMM_WORLD, a sub-communicator
/// from MPI_Comm_split, ...). kten duplicates `comm` (MPI_Comm_dup, so this is a collective over
/// `comm`: every rank of it must call wrap) and communicates only on the duplicate; the
/// application keeps `comm`. MPI must be initialised (by the application or by dist::init).
std::shared_ptr<Communicator> wrap(MPI_Comm comm);

/// \brief kten's duplicate of the communicator (for MPI calls of your own on the same ranks,
/// prefer your own communicator: messages on this one interleave with kten's collectives).
MPI_Comm native_handle(const Communicator& comm);

}  // namespace kten::dist
