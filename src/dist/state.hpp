// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal (builds with MPI): the MPI state behind a kten::dist::Communicator.

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include <kten/dist.hpp>

#include "core/storage.hpp"

namespace kten::dist::detail {

/// \brief Throws kten::Error naming the MPI call and MPI's own message when `rc` is not MPI_SUCCESS.
void check_mpi(int rc, const char* call);

/// \brief The MPI side of one Communicator: kten's duplicates of the application's communicator,
/// the node-local ranks, the stall settings and the host staging buffer.
struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;     // fingerprints and payloads
  MPI_Comm control = MPI_COMM_NULL;  // stall queries and answers, never mixed with collectives
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::uint64_t sequence = 0;        // collectives entered on this communicator
  std::int64_t last_query = 0;       // stall queries this rank has sent
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::int64_t message[2] = {};    // MPI reads it until the send completes
  };
  std::list<PendingSend> sends;      // control messages still in flight (stable addresses)
  StallOptions stall;
  std::shared_ptr<kten::detail::Storage> staging;  // page-locked where a GPU backend exists
  std::vector<std::shared_ptr<kten::detail::Storage>> spare_staging;  // free buffers of collectives in flight

  /// \brief Duplicates `parent` (a collective over it) and reads the stall settings from the
  /// environment.
  explicit CommState(MPI_Comm parent);
  /// \brief Frees the duplicates, unless MPI is finalised already.
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  /// \brief At least `bytes` of host staging memory, reused across collectives.
  char* staging_buffer(std::size_t bytes);
  /// \brief Host staging memory of at least `bytes` for one collective in flight, free of copies
  /// still reading it; hand it back with give_back_staging() once the collective has finished.
  std::shared_ptr<kten::detail::Storage> take_staging(std::size_t bytes);
  /// \brief Keeps a buffer of take_staging() for the next collective in flight.
  void give_back_staging(std::shared_ptr<kten::detail::Storage> buffer);
};

/// \brief A Communicator over a new state duplicating `parent`.
std::shared_ptr<Communicator> make_communicator(MPI_Comm parent);

/// \brief Runs f(); any exception aborts the job with its message. For the part of a collective
/// after every rank agreed to it, where a failure on one rank would leave the others waiting.
template <class F>
void or_abort(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    abort(std::string("dist::") + what + " failed after every rank had entered it: " + e.what());
  }
}

}  // namespace kten::dist::detail
