// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file dist.hpp
/// \brief Scale-out over MPI (builds with KTEN_ENABLE_MPI=ON): initialisation, communicators and
/// their collectives on tensors, DistributedDataParallel, and the GPU binding of ranks.
///
/// This header needs neither mpi.h nor Kokkos; <kten/dist_mpi.hpp> adds what takes an MPI_Comm.

#include <iosfwd>
#include <memory>
#include <string>

#include <kten/device.hpp>
#include <kten/dist/ddp.hpp>
#include <kten/dist/process_group.hpp>

namespace kten::dist {

namespace detail {
struct CommState;
}

/// \brief What a collective does when other ranks are late (Horovod's stall check).
///
/// Defaults come from the environment: KTEN_STALL_WARNING_SECONDS (60) and
/// KTEN_STALL_ABORT_SECONDS (0).
struct StallOptions {
  /// \brief After this many seconds waiting in one collective, the lowest-ranked waiting rank
  /// prints which ranks have not arrived, and again every as many seconds; 0: never.
  double warning_seconds = 60;
  /// \brief After this many seconds waiting in one collective, the job is aborted (MPI_Abort)
  /// with that report; 0: wait for ever.
  double abort_seconds = 0;
  /// \brief Where warnings go; nullptr: std::cerr.
  std::ostream* log = nullptr;
};

/// \brief An MPI communicator with kten's collectives on tensors (the MPI ProcessGroup).
///
/// Before moving any data, every collective checks that all ranks called the same collective with
/// the same dtype, shape, reduction and root (one small allreduce of a fingerprint, as PyTorch's
/// distributed debug mode does); a mismatch throws CollectiveMismatch on every rank. Once every
/// rank agreed, a failure aborts the job (MPI_Abort) with its message instead of leaving the
/// other ranks waiting.
///
/// Data paths: cpu() tensors go to MPI directly; a GPU tensor goes to MPI directly when the MPI
/// library is GPU-aware (gpu_aware()), otherwise it is staged through a page-locked host buffer,
/// and those copies count in kten::stats() like any transfer. Emulated GPUs (KTEN_EMULATE_GPUS)
/// take the staged path. The tensor's device is fenced before MPI touches a buffer.
///
/// kten communicates on its own duplicate of the MPI communicator, so its messages never mix with
/// the application's. Copies share that duplicate.
class Communicator final : public ProcessGroup {
 public:
  int rank() const override;
  int size() const override;
  /// \brief This rank's index among the ranks of this communicator on the same node
  /// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED).
  int local_rank() const;
  /// \brief Number of ranks of this communicator on this node.
  int local_size() const;

  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum) const override;
  /// \brief MPI_Iallreduce after the agreement; a staged GPU tensor gets a staging buffer of its
  /// own, so several all_reduces can be in flight.
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum) const override;
  void broadcast(const Tensor& t, int root = 0) const override;
  Tensor all_gather(const Tensor& t) const override;
  Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum) const override;
  void barrier() const override;

  /// \brief Sets the stall warning and abort times of this communicator.
  void set_stall_options(const StallOptions& options);
  /// \brief The stall warning and abort times of this communicator.
  StallOptions stall_options() const;

  /// \brief Internal: a communicator over kten's state (see world() and dist_mpi.hpp's wrap()).
  explicit Communicator(std::shared_ptr<detail::CommState> state);
  /// \brief Internal: the MPI state.
  detail::CommState& state() const { return *state_; }

 private:
  std::shared_ptr<detail::CommState> state_;
};

/// \brief Initialises MPI unless the application already did (MPI_THREAD_FUNNELED), creates the
/// world communicator and binds this rank to a GPU; call it before Kokkos is initialised.
///
/// GPU binding: with GPUs, rank r uses GPU local_rank % (GPUs visible on the node), where
/// local_rank counts the ranks on the node. kten does so by setting KOKKOS_DEVICE_ID before Kokkos
/// starts, unless the user chose already (--kokkos-device-id, --kokkos-num-devices,
/// --kokkos-map-device-id-by or their KOKKOS_* environment variables) or Kokkos is already
/// initialised. With CUDA_VISIBLE_DEVICES set per rank (e.g. srun --gpus-per-task=1) each rank
/// sees one GPU and uses it.
///
/// Host threads: ranks of one node that share cores would each start a thread per core; unless
/// the user chose a count (OMP_NUM_THREADS, KOKKOS_NUM_THREADS, --kokkos-threads), each rank gets
/// the cores of its affinity mask divided by the ranks on the node whose masks overlap it (all of
/// them when unbound, none when each rank is bound to cores of its own), through
/// KOKKOS_NUM_THREADS.
///
/// Also installs a std::terminate handler that aborts the whole job with the uncaught exception's
/// message.
void init(int& argc, char* argv[]);
/// \brief init() without a command line.
void init();
/// \brief Releases the world communicator; finalises MPI only when init() initialised it.
void finalize();
/// \brief True between init() and finalize().
bool is_initialized();
/// \brief All ranks (a duplicate of MPI_COMM_WORLD); throws kten::Error before init().
std::shared_ptr<Communicator> world();
/// \brief True when GPU memory goes to MPI directly: KTEN_MPI_GPU_AWARE=1/0 when set, else the
/// MPI library's own answer for this build's GPU backend (Open MPI's MPIX_Query_cuda_support for
/// CUDA, MPIX_Query_rocm_support for HIP, where mpi-ext.h provides them), else false.
bool gpu_aware();
/// \brief Deprecated: the old name of gpu_aware() (KTEN_MPI_CUDA_AWARE is still read too).
[[deprecated("kten::dist::cuda_aware() is now gpu_aware()")]] inline bool cuda_aware() { return gpu_aware(); }
/// \brief The MPI library's version line, e.g. "Open MPI v4.1.4, ...".
std::string library_version();
/// \brief Prints "kten: rank r: message" to stderr and aborts every rank of the job (MPI_Abort):
/// for an application's error handler, when this rank cannot go on and others may be waiting.
[[noreturn]] void abort(const std::string& message, int exit_code = 1);

/// \brief kten::dist and Kokkos for the scope of main(), in the right order: init() (MPI and the
/// GPU binding), then Kokkos through a ScopeGuard; at the end, Kokkos is finalised before MPI.
/// Each is finalised only when this guard initialised it. If an exception leaves its scope while
/// the world has several ranks, the job is aborted (the other ranks could be waiting for this one).
class Guard {
 public:
  /// \brief init(argc, argv), then ScopeGuard(argc, argv).
  Guard(int& argc, char* argv[]);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  /// \brief True when this guard initialised MPI (and so finalises it).
  bool owns_mpi() const { return owns_mpi_; }
  /// \brief True when this guard initialised Kokkos (and so finalises it).
  bool owns_kokkos() const { return kokkos_->owns_kokkos(); }

 private:
  bool owns_dist_ = false;  // this guard called init() (kten::dist was not initialised yet)
  bool owns_mpi_ = false;
  std::unique_ptr<ScopeGuard> kokkos_;
};

}  // namespace kten::dist
