// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten::dist's lifetime: MPI initialisation (respecting an application's own), the world
// communicator, the GPU binding of ranks, aborting the job, and the communicators' MPI state.
#include <sched.h>  // sched_getaffinity (Linux)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda/rocm_support (after mpi.h, which it needs)
#endif

#include <kten/dist.hpp>
#include <kten/dist_mpi.hpp>

#include "core/fail.hpp"
#include "backend_glue.hpp"
#include "hooks.hpp"
#include "state.hpp"

namespace kten::dist {
namespace {

struct Runtime {
  std::mutex mutex;
  bool initialised = false;  // between init() and finalize()
  bool owns_mpi = false;     // init() called MPI_Init_thread, so finalize() calls MPI_Finalize
  std::shared_ptr<Communicator> world;
  std::terminate_handler previous_terminate = nullptr;
  std::mutex states_mutex;  // guards states
  std::vector<std::weak_ptr<detail::CommState>> states;  // for dropping staging at Kokkos finalize
};

Runtime& runtime() {
  static Runtime* r = new Runtime;  // never destroyed: communicators may outlive static destruction
  return *r;
}

bool mpi_is_running() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

double seconds_from_environment(const char* name, double fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (*end != '\0' || !(v >= 0))
    kten::detail::fail("", name, " must be a number of seconds >= 0, got '", env, "'");
  return v;
}

bool has_argument(int argc, char* argv[], std::initializer_list<const char*> flags) {
  for (const char* flag : flags)
    for (int i = 1; i < argc; ++i)
      if (argv[i] && std::strncmp(argv[i], flag, std::strlen(flag)) == 0) return true;
  return false;
}

// The user chose a GPU for this process already: Kokkos' flags or environment variables.
bool device_chosen_by_user(int argc, char* argv[]) {
  if (has_argument(argc, argv, {"--kokkos-device-id", "--device-id", "--kokkos-device", "--kokkos-num-devices",
                                "--num-devices", "--kokkos-map-device-id-by"}))
    return true;
  for (const char* env : {"KOKKOS_DEVICE_ID", "KOKKOS_NUM_DEVICES", "KOKKOS_RAND_DEVICES", "KOKKOS_MAP_DEVICE_ID_BY",
                          "KOKKOS_VISIBLE_DEVICES"})
    if (std::getenv(env)) return true;
  return false;
}

// Ranks on one node that share cores must not each start a thread per core: each gets its share
// of the cores in its affinity mask (divided among the ranks of the node whose masks overlap it),
// unless the user chose a thread count. Kokkos reads KOKKOS_NUM_THREADS when it starts.
void share_cores(MPI_Comm world, int argc, char* argv[]) {
  if (Kokkos::is_initialized() || std::getenv("OMP_NUM_THREADS") || std::getenv("KOKKOS_NUM_THREADS") ||
      has_argument(argc, argv, {"--kokkos-threads", "--threads", "--kokkos-num-threads"}))
    return;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return;
  MPI_Comm node = MPI_COMM_NULL;
  detail::check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int ranks = 1;
  MPI_Comm_size(node, &ranks);
  std::vector<cpu_set_t> masks(static_cast<std::size_t>(ranks));
  detail::check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, masks.data(), sizeof mine, MPI_BYTE, node),
                    "MPI_Allgather");
  MPI_Comm_free(&node);
  int sharing = 0;
  for (auto& other : masks) {
    cpu_set_t both;
    CPU_AND(&both, &mine, &other);
    sharing += CPU_COUNT(&both) > 0;
  }
  const int threads = std::max(1, CPU_COUNT(&mine) / std::max(1, sharing));
  if (sharing > 1) setenv("KOKKOS_NUM_THREADS", std::to_string(threads).c_str(), 1);
}

// Rank r uses GPU local_rank % (GPUs visible to it); Kokkos reads KOKKOS_DEVICE_ID when it starts.
void bind_gpu(int local_rank, int argc, char* argv[]) {
  if (Kokkos::is_initialized() || gpus_are_emulated() || device_chosen_by_user(argc, argv)) return;
  const int gpus = kten::detail::gpu_device_count();  // honours CUDA_VISIBLE_DEVICES; 0 without a GPU
  if (gpus > 0) setenv("KOKKOS_DEVICE_ID", std::to_string(local_rank % gpus).c_str(), 1);
}

[[noreturn]] void on_terminate() {
  std::string what = "std::terminate was called";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  abort(what);
}

void start(int* argc, char*** argv) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.initialised) return;
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised) kten::detail::fail("dist::init()", "MPI has been finalised already; it cannot start again");
  if (!initialised) {
    int provided = 0;
    detail::check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    r.owns_mpi = true;
  }
  r.world = detail::make_communicator(MPI_COMM_WORLD);
  bind_gpu(r.world->local_rank(), argc ? *argc : 0, argv ? *argv : nullptr);
  share_cores(MPI_COMM_WORLD, argc ? *argc : 0, argv ? *argv : nullptr);
  kten::detail::set_default_group(r.world);
  r.previous_terminate = std::set_terminate(on_terminate);
  r.initialised = true;
}

}  // namespace

void init(int& argc, char* argv[]) { start(&argc, &argv); }

void init() { start(nullptr, nullptr); }

void finalize() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.initialised) return;
  kten::detail::set_default_group(nullptr);
  r.world.reset();
  std::set_terminate(r.previous_terminate);
  r.initialised = false;
  if (r.owns_mpi && mpi_is_running()) MPI_Finalize();
  r.owns_mpi = false;
}

bool is_initialized() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.initialised;
}

std::shared_ptr<Communicator> world() {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.initialised)
    kten::detail::fail("dist::world()", "kten::dist is not initialised; construct a kten::dist::Guard at the top "
                       "of main() (or call kten::dist::init)");
  return r.world;
}

bool gpu_aware() {
  // KTEN_MPI_CUDA_AWARE: the deprecated name, read when the new one is not set.
  for (const char* name : {"KTEN_MPI_GPU_AWARE", "KTEN_MPI_CUDA_AWARE"}) {
    const char* env = std::getenv(name);
    if (!env || !*env) continue;
    if (std::strcmp(env, "1") == 0) return true;
    if (std::strcmp(env, "0") == 0) return false;
    kten::detail::fail("", name, " must be 1 or 0, got '", env, "'");
  }
  const char* gpu = ::kten::detail::gpu_backend_name();  // not dist::detail's
  [[maybe_unused]] const std::string backend = gpu ? gpu : "";
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (backend == "Cuda") return MPIX_Query_cuda_support() == 1;  // built CUDA-aware; asks whether it is at run time
#endif
  // Open MPI 5 and later with ROCm support; Debian 12's Open MPI 4.1 has no ROCm extension.
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
  if (backend == "HIP") return MPIX_Query_rocm_support() == 1;
#endif
  return false;
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string line(text, static_cast<std::size_t>(length));
  return line.substr(0, line.find_first_of("\r\n"));
}

void abort(const std::string& message, int exit_code) {
  int rank = -1;
  if (mpi_is_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One write, so the line cannot interleave with the MPI library's own abort banner.
  const std::string line = kten::detail::error_message("", "rank ", rank, ": ", message, "; aborting the MPI job\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (mpi_is_running()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

Guard::Guard(int& argc, char* argv[]) {
  if (!is_initialized()) {
    init(argc, argv);
    owns_dist_ = true;
    owns_mpi_ = runtime().owns_mpi;
  }
  kokkos_ = std::make_unique<ScopeGuard>(argc, argv);
}

Guard::~Guard() {
  // Leaving main() through an exception: other ranks may be waiting for this one in a collective,
  // and MPI_Finalize would wait for them. End the job instead.
  if (std::uncaught_exceptions() > 0 && owns_dist_ && world()->size() > 1)
    abort("an exception is leaving the scope of kten::dist::Guard");
  kokkos_.reset();  // Kokkos before MPI
  if (owns_dist_) finalize();
}

std::shared_ptr<Communicator> wrap(MPI_Comm comm) {
  if (!mpi_is_running())
    kten::detail::fail("dist::wrap()", "MPI is not running; call MPI_Init (or kten::dist::init) first");
  if (comm == MPI_COMM_NULL) kten::detail::fail("dist::wrap()", "the communicator is MPI_COMM_NULL");
  return detail::make_communicator(comm);
}

MPI_Comm native_handle(const Communicator& comm) { return comm.state().comm; }

namespace detail {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  kten::detail::fail("", call, " failed: ", std::string_view(text, static_cast<std::size_t>(length)));
}

CommState::CommState(MPI_Comm parent) {
  check_mpi(MPI_Comm_dup(parent, &comm), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(parent, &control), "MPI_Comm_dup");
  for (MPI_Comm c : {comm, control}) check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  stall.warning_seconds = seconds_from_environment("KTEN_STALL_WARNING_SECONDS", stall.warning_seconds);
  stall.abort_seconds = seconds_from_environment("KTEN_STALL_ABORT_SECONDS", stall.abort_seconds);
}

CommState::~CommState() {
  if (!mpi_is_running()) return;
  for (PendingSend& send : sends) {  // stall messages nobody took: drop them
    int done = 0;
    MPI_Test(&send.request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&send.request);
      MPI_Request_free(&send.request);
    }
  }
  MPI_Comm_free(&control);
  MPI_Comm_free(&comm);
}

namespace {

// Page-locked host memory where a GPU may copy from it, else plain host memory. Staging buffers are
// Kokkos allocations: they are given back before Kokkos finalises.
std::shared_ptr<kten::detail::Storage> allocate_staging(std::size_t bytes) {
  static std::once_flag hook;
  std::call_once(hook, [] {
    Kokkos::push_finalize_hook([] {
      std::lock_guard<std::mutex> lock(runtime().states_mutex);
      for (auto& weak : runtime().states)
        if (auto s = weak.lock()) {
          s->staging.reset();
          s->spare_staging.clear();
        }
    });
  });
  auto buffer = kten::detail::allocate_pinned(bytes);
  return buffer ? buffer : kten::detail::allocate(cpu(), bytes, "dist::staging");
}

}  // namespace

char* CommState::staging_buffer(std::size_t bytes) {
  if (!staging || staging->bytes < bytes) {
    staging.reset();
    staging = allocate_staging(bytes);
  }
  return static_cast<char*>(staging->data);
}

std::shared_ptr<kten::detail::Storage> CommState::take_staging(std::size_t bytes) {
  const auto fits = std::find_if(spare_staging.begin(), spare_staging.end(), [&](const auto& b) { return b->bytes >= bytes; });
  if (fits == spare_staging.end()) return allocate_staging(bytes);
  auto buffer = std::move(*fits);
  spare_staging.erase(fits);
  kten::detail::wait_for_pending_reader(*buffer);
  return buffer;
}

void CommState::give_back_staging(std::shared_ptr<kten::detail::Storage> buffer) {
  spare_staging.push_back(std::move(buffer));
}

std::shared_ptr<Communicator> make_communicator(MPI_Comm parent) {
  auto state = std::make_shared<CommState>(parent);
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.states_mutex);
  r.states.erase(std::remove_if(r.states.begin(), r.states.end(), [](const auto& weak) { return weak.expired(); }),
                 r.states.end());
  r.states.push_back(state);
  return std::make_shared<Communicator>(state);
}

}  // namespace detail
}  // namespace kten::dist

namespace kten::detail {

std::string mpi_report() {
  const std::string library = dist::library_version();
  std::string line = library.substr(0, library.find(','));  // "Open MPI v4.1.4"
  if (!dist::is_initialized()) return line + " (kten::dist not initialised in this process)";
  const auto world = dist::world();
  return line + ", GPU-aware: " + (dist::gpu_aware() ? "yes" : "no") + "; rank " + std::to_string(world->rank()) +
         " of " + std::to_string(world->size()) + ", " + std::to_string(world->local_size()) + " on this node";
}

}  // namespace kten::detail
