// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file dist/process_group.hpp
/// \brief kten::dist::ProcessGroup: the processes (ranks) that train one model together and the
/// collectives they run on tensors, as PyTorch's ProcessGroup. kten::dist::Communicator
/// (<kten/dist.hpp>, builds with MPI) is the MPI implementation; DistributedDataParallel and the
/// Trainer use only this interface, so they need no MPI header.

#include <memory>

#include <kten/errors.hpp>
#include <kten/tensor.hpp>

namespace kten::dist {

/// \brief How all_reduce and reduce_scatter combine the ranks' elements. NaN propagates through
/// every one (max and min included), as in kten's own reductions.
enum class ReduceOp {
  sum,   ///< \brief the sum over ranks
  mean,  ///< \brief the sum divided by the number of ranks
  max,   ///< \brief the largest value
  min    ///< \brief the smallest value
};

/// \brief "sum", "mean", "max" or "min".
const char* reduce_op_name(ReduceOp op);

/// \brief Ranks called a collective with different operations, dtypes, shapes or roots, or one
/// rank's arguments were invalid. Thrown on every rank of the group (none is left waiting); the
/// message names the ranks and what each of them passed.
class CollectiveMismatch : public Error {
 public:
  using Error::Error;
};

/// \brief A collective in flight (PyTorch's Work): until it has finished, its tensor must be
/// neither read nor written. Destroying an unfinished Work waits for it.
class Work {
 public:
  virtual ~Work() = default;
  /// \brief Lets the collective advance without blocking (MPI moves data only inside its calls);
  /// true once it has finished and its result is in the tensor.
  virtual bool test() = 0;
  /// \brief Returns once the collective has finished and its result is in the tensor.
  virtual void wait() = 0;
};

/// \brief A group of ranks and the collectives on tensors they run together.
///
/// Every rank of the group must call the same collectives in the same order, with tensors of the
/// same dtype and shape (each on its own rank's device). Collectives work on the tensor's device
/// and synchronise the host with it (MPI is driven by the host). Calls on one group must come
/// from one thread at a time.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  /// \brief This process's index in the group, 0 to size() - 1.
  virtual int rank() const = 0;
  /// \brief Number of ranks in the group.
  virtual int size() const = 0;

  /// \brief In place: every rank's `t` becomes the reduction over all ranks' `t`.
  virtual void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum) const = 0;
  /// \brief all_reduce that returns once every rank has entered it (argument mismatches are
  /// thrown here, as by all_reduce), and moves the data while the caller goes on; the result is in
  /// `t` once the returned Work has finished. Every rank starts its collectives in the same order,
  /// and all_reduce and all_reduce_async are different collectives (MPI matches no blocking call
  /// with a nonblocking one): where ranks mix them, the Communicator throws CollectiveMismatch. The
  /// default runs all_reduce and returns a finished Work.
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum) const;
  /// \brief In place: every rank's `t` becomes rank `root`'s `t`.
  virtual void broadcast(const Tensor& t, int root = 0) const = 0;
  /// \brief A new tensor on `t`'s device, of shape (size(), t's shape...): row r is rank r's `t`.
  virtual Tensor all_gather(const Tensor& t) const = 0;
  /// \brief The reverse of all_gather: `t` has shape (size(), rest...); the reduction over ranks
  /// of row r goes to rank r, returned as a new tensor of shape (rest...) on `t`'s device.
  virtual Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum) const = 0;
  /// \brief Returns once every rank has called barrier().
  virtual void barrier() const = 0;
};

/// \brief kten::dist's world communicator while kten::dist is initialised (dist::Guard or
/// dist::init, in builds with MPI); nullptr otherwise. The Trainer trains data-parallel over it
/// when it has more than one rank.
std::shared_ptr<const ProcessGroup> default_group();

}  // namespace kten::dist
