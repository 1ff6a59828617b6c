// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The Communicator's collectives on tensors. Each one runs in two phases:
//  1. agreement: every rank contributes a fingerprint of its call (operation, dtype, shape,
//     reduction, root, or a local problem) to one small nonblocking allreduce, polled so that a
//     stall can be reported; any difference throws CollectiveMismatch on every rank;
//  2. payload: the data moves (directly, or staged through host memory); from here on a failure
//     aborts the job, because the other ranks are committed to the collective.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <kten/dist.hpp>

#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "io/files.hpp"  // detail::Fnv1a
#include "core/runtime_internal.hpp"
#include "state.hpp"
#include "ops/transfer.hpp"

namespace kten::dist {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

// all_reduce_async is a collective of its own: MPI matches no blocking call with a nonblocking one.
enum class Collective : std::int64_t { all_reduce = 1, broadcast, all_gather, reduce_scatter, barrier, all_reduce_async };

const char* collective_name(std::int64_t collective) {
  switch (static_cast<Collective>(collective)) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::barrier: return "barrier";
    case Collective::all_reduce_async: return "all_reduce_async";
  }
  return "unknown collective";
}

constexpr int kShownDims = 8;

// What one rank passed to a collective. Plain bytes, zero-initialised, so equal calls hash equally.
struct Fingerprint {
  std::int64_t op = 0;
  std::int64_t reduce = -1;  // ReduceOp, or -1
  std::int64_t root = -1;    // broadcast's root, or -1
  std::int64_t dtype = -1;   // DType, or -1 without a tensor
  std::int64_t ndim = -1;
  std::int64_t shape_hash = 0;         // every extent, also beyond kShownDims
  std::int64_t extents[kShownDims] = {};
  char problem[256] = {};              // this rank's arguments are invalid: why
};

std::string describe(const Fingerprint& f) {
  std::string s = collective_name(f.op);
  if (f.reduce >= 0) s += std::string("(") + reduce_op_name(static_cast<ReduceOp>(f.reduce)) + ")";
  if (f.root >= 0) s += "(root " + std::to_string(f.root) + ")";
  if (f.problem[0] != '\0') return s + ": " + f.problem;
  if (f.dtype < 0) return s;
  s += std::string(" ") + dtype_name(static_cast<DType>(f.dtype)) + " ";
  Shape shown(f.extents, f.extents + std::min<std::int64_t>(f.ndim, kShownDims));
  s += shape_str(shown);
  if (f.ndim > kShownDims) s += "x...";
  return s;
}

// "0", "0,2", "1-3": the ranks in a readable form.
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string ranks_word(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

// --- waiting for the other ranks, with Horovod's stall check -------------------------------------

constexpr int kQueryTag = 1, kAnswerTag = 2;

// While this rank waits in a collective for longer than the warning time, it asks every other
// rank which collective it is in; ranks that wait too (in this loop) answer at once, ranks that
// have not arrived cannot. The lowest waiting rank prints the report.
class StallWatch {
 public:
  StallWatch(CommState& s, const Fingerprint& call) : s_(s), call_(call), start_(Clock::now()) {
    next_check_ = next_due(0);
    grace_ = std::min(0.5, 0.5 * next_check_);  // time for waiting ranks to answer a query
  }

  void poll() {
    answer_queries();
    collect_answers();
    complete_sends();
    if (next_check_ <= 0) return;  // no warning and no abort time: wait for ever
    const double waited = seconds(Clock::now() - start_);
    if (query_ == 0 && waited >= next_check_) ask();
    if (query_ != 0 && waited >= asked_at_ + grace_) report(waited);
  }

 private:
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  // The wait (in seconds) at which the next warning or the abort is due after `after`; 0: never.
  double next_due(double after) const {
    const double warn = s_.stall.warning_seconds, abort_at = s_.stall.abort_seconds;
    double due = warn > 0 ? (std::floor(after / warn) + 1) * warn : 0;
    if (abort_at > after) due = due > 0 ? std::min(due, abort_at) : abort_at;
    return due;
  }

  void send(int to, int tag, std::int64_t a, std::int64_t b) {
    auto& pending = s_.sends.emplace_back();  // the message lives until the send completes
    pending.message[0] = a;
    pending.message[1] = b;
    check_mpi(MPI_Isend(pending.message, 2, MPI_INT64_T, to, tag, s_.control, &pending.request), "MPI_Isend");
  }

  // Only this loop receives control messages, so a send completes once its peer waits somewhere.
  void complete_sends() {
    for (auto it = s_.sends.begin(); it != s_.sends.end();) {
      int done = 0;
      check_mpi(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? s_.sends.erase(it) : std::next(it);
    }
  }

  bool receive(int tag, std::int64_t (&message)[2], int& from) {
    int flag = 0;
    MPI_Status status;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, tag, s_.control, &flag, &status), "MPI_Iprobe");
    if (!flag) return false;
    from = status.MPI_SOURCE;
    check_mpi(MPI_Recv(message, 2, MPI_INT64_T, from, tag, s_.control, MPI_STATUS_IGNORE), "MPI_Recv");
    return true;
  }

  void answer_queries() {
    std::int64_t q[2];
    int from = 0;
    while (receive(kQueryTag, q, from)) send(from, kAnswerTag, q[0], static_cast<std::int64_t>(s_.sequence));
  }

  void collect_answers() {
    std::int64_t a[2];
    int from = 0;
    while (receive(kAnswerTag, a, from))
      if (query_ != 0 && a[0] == query_) where_[from] = a[1];  // answers to older queries are dropped
  }

  void ask() {
    query_ = ++s_.last_query;
    where_.clear();
    asked_at_ = seconds(Clock::now() - start_);
    for (int r = 0; r < s_.size; ++r)
      if (r != s_.rank) send(r, kQueryTag, query_, static_cast<std::int64_t>(s_.sequence));
  }

  void report(double waited) {
    std::vector<int> here{s_.rank}, missing;
    std::map<std::int64_t, std::vector<int>> elsewhere;
    for (int r = 0; r < s_.size; ++r) {
      if (r == s_.rank) continue;
      auto it = where_.find(r);
      if (it == where_.end()) missing.push_back(r);
      else if (it->second == static_cast<std::int64_t>(s_.sequence)) here.push_back(r);
      else elsewhere[it->second].push_back(r);
    }
    std::sort(here.begin(), here.end());
    std::ostringstream os;
    os << "collective #" << s_.sequence << " (" << describe(call_) << ") on a communicator of " << s_.size
       << " ranks has waited " << static_cast<long>(waited) << " s: " << ranks_word(here) << (here.size() == 1 ? " is" : " are")
       << " in it";
    if (!missing.empty()) os << "; " << ranks_word(missing) << (missing.size() == 1 ? " has" : " have") << " not arrived";
    for (const auto& [sequence, ranks] : elsewhere)
      os << "; " << ranks_word(ranks) << (ranks.size() == 1 ? " is" : " are") << " in collective #" << sequence;
    const bool abort_now = s_.stall.abort_seconds > 0 && waited >= s_.stall.abort_seconds;
    if (abort_now) abort(os.str() + " (KTEN_STALL_ABORT_SECONDS / StallOptions::abort_seconds)");
    if (s_.rank == here.front()) {  // one report per stall, from the lowest waiting rank
      std::ostream& log = s_.stall.log ? *s_.stall.log : std::cerr;
      log << kten::detail::error_message("", "warning: stall: ", os.str(),
                                         " (KTEN_STALL_WARNING_SECONDS / StallOptions::warning_seconds)")
          << std::endl;
    }
    query_ = 0;
    next_check_ = next_due(waited);
  }

  CommState& s_;
  const Fingerprint& call_;
  Clock::time_point start_;
  double grace_ = 0.5, next_check_ = 0, asked_at_ = 0;
  std::int64_t query_ = 0;  // the open query, 0 when none
  std::map<int, std::int64_t> where_;  // rank -> the collective it answered from
};

// Polls done() like a blocking MPI call for the first millisecond (the other ranks are usually about
// to arrive, and giving the core away costs a scheduler time slice on a busy node), then yields the
// core, then sleeps between polls, so that ranks sharing cores with the late ones let them run.
template <class Done>
void poll_until(Done done, StallWatch* watch) {
  const auto start = Clock::now();
  for (long spin = 0;; ++spin) {
    if (done()) return;
    if (spin % 64 != 0) continue;  // read the clock now and then only
    const auto waited = Clock::now() - start;
    if (waited < std::chrono::milliseconds(1)) continue;
    if (watch) watch->poll();
    if (waited < std::chrono::milliseconds(20)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void wait_for_ranks(CommState& s, MPI_Request& request, const Fingerprint& call) {
  StallWatch watch(s, call);
  poll_until([&] {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }, &watch);
}

// --- phase 1: agreement ------------------------------------------------------------------------

Fingerprint fingerprint(Collective op, const Tensor* t, std::string problem) {
  Fingerprint f;
  f.op = static_cast<std::int64_t>(op);
  if (t && problem.empty() && !t->defined()) problem = "the tensor is undefined (default-constructed)";
  if (t && problem.empty()) {
    try {
      require_available(t->device());
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  // Collectives read and write [0, numel) in place (and MPI takes the memory as it is): a strided
  // view is refused on every rank rather than made contiguous, whose result would be lost.
  if (t && problem.empty() && !t->is_contiguous())
    problem = "the tensor is a strided view (shape " + shape_str(t->shape()) + ", strides " + shape_str(t->strides()) +
              "); collectives need contiguous memory: pass a contiguous tensor (t.contiguous() is a copy)";
  // MPI reduces numbers: the collectives take the float dtypes only (refused on every rank).
  if (t && problem.empty() && !is_floating(t->dtype()))
    problem = std::string("collectives take float32 or float64 tensors, this one is ") + dtype_name(t->dtype()) +
              "; convert it first, e.g. t.astype(kten::float32), and back after";
  if (!problem.empty()) {
    std::strncpy(f.problem, problem.c_str(), sizeof f.problem - 1);
    return f;
  }
  if (!t) return f;
  f.dtype = static_cast<std::int64_t>(t->dtype());
  f.ndim = t->ndim();
  f.shape_hash = static_cast<std::int64_t>(kten::detail::Fnv1a::of(t->shape().data(), t->shape().size() * sizeof(std::int64_t)));
  for (int i = 0; i < std::min(t->ndim(), kShownDims); ++i) f.extents[i] = t->shape()[static_cast<std::size_t>(i)];
  return f;
}

// Every rank learns whether all ranks passed the same fingerprint; when not, every rank throws the
// same CollectiveMismatch naming the ranks and what each passed.
void agree(CommState& s, const Fingerprint& mine) {
  ++s.sequence;
  const auto hash = static_cast<std::int64_t>(kten::detail::Fnv1a::of(&mine, sizeof mine));
  // min(hash) == max(hash) == mine iff all equal; ~x is decreasing, so min(~hash) = ~max(hash).
  std::int64_t in[3] = {hash, ~hash, mine.problem[0] == '\0' ? 1 : 0}, out[3] = {};
  or_abort("agreement", [&] {
    MPI_Request request;
    check_mpi(MPI_Iallreduce(in, out, 3, MPI_INT64_T, MPI_MIN, s.comm, &request), "MPI_Iallreduce");
    wait_for_ranks(s, request, mine);
  });
  if (out[0] == hash && ~out[1] == hash && out[2] == 1) return;

  std::vector<Fingerprint> all(static_cast<std::size_t>(s.size));
  or_abort("agreement", [&] {
    check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, s.comm),
              "MPI_Allgather");
  });
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // description -> ranks, first seen first
  for (int r = 0; r < s.size; ++r) {
    const std::string d = describe(all[static_cast<std::size_t>(r)]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d; });
    if (it == groups.end()) groups.push_back({d, {r}});
    else it->second.push_back(r);
  }
  std::string passed;
  for (const auto& [d, ranks] : groups) passed += "\n  " + ranks_word(ranks) + ": " + d;
  kten::detail::fail<CollectiveMismatch>("dist", "the ranks do not agree on collective #", s.sequence,
                                         "; every rank must call the same collective with the same dtype, shape, "
                                         "reduction and root, and valid arguments:", passed);
}

// --- phase 2: payload ---------------------------------------------------------------------------

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::float32 ? MPI_FLOAT : MPI_DOUBLE; }

// max and min where NaN wins (MPI_MAX and MPI_MIN leave NaN to chance).
template <class T, bool Max>
void nan_aware(const T* in, T* inout, int n) {
  for (int i = 0; i < n; ++i) {
    const T a = in[i], b = inout[i];
    if (b != b) continue;
    if (a != a || (Max ? a > b : a < b)) inout[i] = a;
  }
}

template <bool Max>
void nan_aware_op(void* in, void* inout, int* n, MPI_Datatype* type) {
  if (*type == MPI_FLOAT) nan_aware<float, Max>(static_cast<const float*>(in), static_cast<float*>(inout), *n);
  else nan_aware<double, Max>(static_cast<const double*>(in), static_cast<double*>(inout), *n);
}

MPI_Op mpi_op(ReduceOp op) {
  static MPI_Op max_op = MPI_OP_NULL, min_op = MPI_OP_NULL;
  static std::once_flag created;
  std::call_once(created, [] {
    check_mpi(MPI_Op_create(&nan_aware_op<true>, 1, &max_op), "MPI_Op_create");
    check_mpi(MPI_Op_create(&nan_aware_op<false>, 1, &min_op), "MPI_Op_create");
  });
  switch (op) {
    case ReduceOp::max: return max_op;
    case ReduceOp::min: return min_op;
    default: return MPI_SUM;  // mean divides afterwards
  }
}

// MPI counts are ints: larger buffers go in pieces.
template <class F>
void in_pieces(void* data, std::int64_t count, DType dtype, F call) {
  const std::int64_t piece = INT_MAX;
  for (std::int64_t done = 0; done < count; done += piece)
    call(static_cast<char*>(data) + done * static_cast<std::int64_t>(dtype_size(dtype)),
         static_cast<int>(std::min(piece, count - done)));
}

// GPU memory goes to MPI directly only with a CUDA-aware MPI; emulated GPUs model the other case
// (their memory may even be unreadable from the host outside kten's kernels and copies).
bool staged(const Device& d) { return d.is_gpu() && (gpus_are_emulated() || !gpu_aware()); }

kten::detail::Storage bytes_of(const Tensor& t) { return {t.data(), t.nbytes(), t.device(), nullptr}; }
kten::detail::Storage host_bytes(char* p, std::size_t n) { return {p, n, cpu(), nullptr}; }

// Host staging memory for a collective on `device`, or nullptr when MPI takes the tensors' own;
// free of copies still reading it, since MPI may write it next.
char* staging_for(CommState& s, const Device& device, std::size_t bytes) {
  if (!staged(device)) return nullptr;
  char* staging = s.staging_buffer(bytes);
  kten::detail::wait_for_pending_reader(*s.staging);
  return staging;
}

// The memory MPI works on for `t`: its own, or `staging` (filled from it when `fill`).
char* mpi_buffer(const Tensor& t, char* staging, bool fill) {
  if (!staged(t.device())) return kten::detail::data_ptr<char>(t);
  if (fill) kten::detail::copy_bytes(bytes_of(t), host_bytes(staging, t.nbytes()), t.nbytes());
  return staging;
}

// After MPI wrote `buffer`: copy it into `t` when it was staged. The copy may still read the buffer
// after this returns; its next writer is a later collective's device-to-host copy, queued after it on
// the same GPU (a process drives one), or MPI after that collective's fence, so no one waits here.
void copy_from_staging(char* buffer, const Tensor& t) {
  if (buffer != kten::detail::data_ptr<char>(t)) kten::detail::copy_bytes(host_bytes(buffer, t.nbytes()), bytes_of(t), t.nbytes());
}

// Where a collective from `in` into `out` sends and receives: the tensors' own memory, or one
// staging buffer for both (`in` copied into its first part); fenced, so that MPI may read them.
struct SendReceive {
  char* send;
  char* receive;
};
SendReceive send_receive(CommState& s, const Tensor& in, const Tensor& out, const char* op) {
  kten::detail::note_host_sync(in.device(), op, /*implicit=*/false);
  char* staging = staging_for(s, in.device(), in.nbytes() + out.nbytes());
  const SendReceive buffers{mpi_buffer(in, staging, true), mpi_buffer(out, staging ? staging + in.nbytes() : nullptr, false)};
  kten::detail::fence(in.device());
  return buffers;
}

template <class T>
struct DivideBy {
  T* x;
  T divisor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { x[i] /= divisor; }
};

void divide(const Tensor& t, int by) {
  kten::detail::launch_each_index("kten::dist::mean", t.numel(), [by](auto* x) {
    using T = std::remove_pointer_t<decltype(x)>;
    return DivideBy<T>{x, static_cast<T>(by)};
  }, t);
}

// The end of an all_reduce whose payload MPI has reduced in `buffer`.
void finish_all_reduce(char* buffer, const Tensor& t, ReduceOp op, int ranks) {
  copy_from_staging(buffer, t);
  if (op == ReduceOp::mean) divide(t, ranks);
}

// An all_reduce whose payload is in flight: MPI_Iallreduce on the tensor's memory or on a staging
// buffer of its own; the first test() or wait() that finds MPI done finishes it.
class AllReduceWork final : public Work {
 public:
  AllReduceWork(std::shared_ptr<CommState> s, const Tensor& t, ReduceOp op) : s_(std::move(s)), t_(t), op_(op) {
    finished_ = t.numel() == 0;  // nothing to move
    if (finished_) return;
    if (staged(t.device())) staging_ = s_->take_staging(t.nbytes());
    buffer_ = mpi_buffer(t, staging_ ? static_cast<char*>(staging_->data) : nullptr, true);
    kten::detail::fence(t.device());  // the kernels that wrote `t` have finished
    in_pieces(buffer_, t.numel(), t.dtype(), [&](char* p, int n) {
      MPI_Request& request = requests_.emplace_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, p, n, mpi_type(t.dtype()), mpi_op(op), s_->comm, &request), "MPI_Iallreduce");
    });
  }
  ~AllReduceWork() override { wait(); }  // MPI owns the buffer until then

  bool test() override {
    if (finished_) return true;
    or_abort("all_reduce", [&] {
      int done = 0;
      check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
                "MPI_Testall");
      if (!done) return;
      finish_all_reduce(buffer_, t_, op_, s_->size);
      if (staging_) s_->give_back_staging(std::move(staging_));
      finished_ = true;
    });
    return finished_;
  }
  void wait() override { poll_until([&] { return test(); }, nullptr); }

 private:
  std::shared_ptr<CommState> s_;
  Tensor t_;
  ReduceOp op_;
  std::shared_ptr<kten::detail::Storage> staging_;
  char* buffer_ = nullptr;
  std::vector<MPI_Request> requests_;
  bool finished_ = false;
};

// A result tensor like `t` (device, dtype); a failure (out of memory, overflow) becomes `problem`,
// so that every rank learns of it in the agreement instead of waiting for this one.
Tensor try_empty(const Shape& shape, const Tensor& t, std::string& problem) {
  try {
    return empty(shape, t.device(), t.dtype());
  } catch (const Error& e) {
    problem = e.what();
    return {};
  }
}

std::string count_problem(std::int64_t count, const char* what) {
  if (count <= INT_MAX) return {};
  return std::string(what) + " needs at most 2^31-1 elements per rank (an MPI count), got " + std::to_string(count);
}

}  // namespace
}  // namespace detail

using detail::Collective;

Communicator::Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}

int Communicator::rank() const { return state_->rank; }
int Communicator::size() const { return state_->size; }
int Communicator::local_rank() const { return state_->local_rank; }
int Communicator::local_size() const { return state_->local_size; }
void Communicator::set_stall_options(const StallOptions& options) { state_->stall = options; }
StallOptions Communicator::stall_options() const { return state_->stall; }

void Communicator::all_reduce(const Tensor& t, ReduceOp op) const {
  auto f = detail::fingerprint(Collective::all_reduce, &t, {});
  f.reduce = static_cast<std::int64_t>(op);
  detail::agree(*state_, f);
  if (t.numel() == 0) return;
  detail::or_abort("all_reduce", [&] {
    kten::detail::note_host_sync(t.device(), "dist::all_reduce", /*implicit=*/false);
    char* buffer = detail::mpi_buffer(t, detail::staging_for(*state_, t.device(), t.nbytes()), true);
    kten::detail::fence(t.device());  // the kernels that wrote `t` have finished
    detail::in_pieces(buffer, t.numel(), t.dtype(), [&](char* p, int n) {
      detail::check_mpi(MPI_Allreduce(MPI_IN_PLACE, p, n, detail::mpi_type(t.dtype()), detail::mpi_op(op), state_->comm),
                        "MPI_Allreduce");
    });
    detail::finish_all_reduce(buffer, t, op, state_->size);
  });
}

std::unique_ptr<Work> Communicator::all_reduce_async(const Tensor& t, ReduceOp op) const {
  auto f = detail::fingerprint(Collective::all_reduce_async, &t, {});
  f.reduce = static_cast<std::int64_t>(op);
  detail::agree(*state_, f);
  std::unique_ptr<Work> work;
  detail::or_abort("all_reduce", [&] {
    if (t.numel() > 0) kten::detail::note_host_sync(t.device(), "dist::all_reduce", /*implicit=*/false);
    work = std::make_unique<detail::AllReduceWork>(state_, t, op);
  });
  return work;
}

void Communicator::broadcast(const Tensor& t, int root) const {
  std::string problem;
  if (root < 0 || root >= state_->size)
    problem = "root " + std::to_string(root) + " is not a rank of this communicator (0 to " +
              std::to_string(state_->size - 1) + ")";
  auto f = detail::fingerprint(Collective::broadcast, &t, problem);
  f.root = root;
  detail::agree(*state_, f);
  if (t.numel() == 0) return;
  detail::or_abort("broadcast", [&] {
    kten::detail::note_host_sync(t.device(), "dist::broadcast", /*implicit=*/false);
    const bool sender = state_->rank == root;
    char* buffer = detail::mpi_buffer(t, detail::staging_for(*state_, t.device(), t.nbytes()), sender);
    kten::detail::fence(t.device());  // kernels still using `t` have finished before MPI writes it
    detail::in_pieces(buffer, t.numel(), t.dtype(), [&](char* p, int n) {
      detail::check_mpi(MPI_Bcast(p, n, detail::mpi_type(t.dtype()), root, state_->comm), "MPI_Bcast");
    });
    if (!sender) detail::copy_from_staging(buffer, t);
  });
}

Tensor Communicator::all_gather(const Tensor& t) const {
  std::string problem;
  Tensor out;
  if (t.defined()) {
    problem = detail::count_problem(t.numel(), "all_gather");
    Shape shape{state_->size};
    shape.insert(shape.end(), t.shape().begin(), t.shape().end());
    if (problem.empty()) out = detail::try_empty(shape, t, problem);
  }
  detail::agree(*state_, detail::fingerprint(Collective::all_gather, &t, problem));
  if (t.numel() == 0) return out;
  detail::or_abort("all_gather", [&] {
    const auto [send, receive] = detail::send_receive(*state_, t, out, "dist::all_gather");
    const auto type = detail::mpi_type(t.dtype());
    const int n = static_cast<int>(t.numel());
    detail::check_mpi(MPI_Allgather(send, n, type, receive, n, type, state_->comm), "MPI_Allgather");
    detail::copy_from_staging(receive, out);
  });
  return out;
}

Tensor Communicator::reduce_scatter(const Tensor& t, ReduceOp op) const {
  std::string problem;
  Tensor out;
  if (t.defined()) {
    if (t.ndim() < 1 || t.shape()[0] != state_->size) {
      problem = "reduce_scatter needs a tensor of shape (" + std::to_string(state_->size) +
                ", ...) with one row per rank, got " + shape_str(t.shape());
    } else {
      const Shape shape(t.shape().begin() + 1, t.shape().end());
      problem = detail::count_problem(t.numel() / state_->size, "reduce_scatter");
      if (problem.empty()) out = detail::try_empty(shape, t, problem);
    }
  }
  auto f = detail::fingerprint(Collective::reduce_scatter, &t, problem);
  f.reduce = static_cast<std::int64_t>(op);
  detail::agree(*state_, f);
  if (t.numel() == 0) return out;
  detail::or_abort("reduce_scatter", [&] {
    const auto [send, receive] = detail::send_receive(*state_, t, out, "dist::reduce_scatter");
    detail::check_mpi(MPI_Reduce_scatter_block(send, receive, static_cast<int>(out.numel()), detail::mpi_type(t.dtype()),
                                               detail::mpi_op(op), state_->comm),
                      "MPI_Reduce_scatter_block");
    detail::copy_from_staging(receive, out);
    if (op == ReduceOp::mean) detail::divide(out, state_->size);
  });
  return out;
}

void Communicator::barrier() const { detail::agree(*state_, detail::fingerprint(Collective::barrier, nullptr, {})); }

}  // namespace kten::dist
