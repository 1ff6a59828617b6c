// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Index checks without a host synchronisation (index_errors.hpp). Each GPU keeps one buffer of
// kSlots flags; a checked launch takes the next slot and remembers its op and shapes on the host.
// The first synchronisation after it reads the whole buffer (one 1 KiB copy, made only when a
// check is pending, after the wait the synchronisation makes anyway; not counted in stats(), which
// counts the program's own transfers), throws for the first slot that holds a report and starts
// a fresh buffer.
#include "index_errors.hpp"

#include <iostream>
#include <map>
#include <mutex>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "dispatch/emulated_access.hpp"
#include "dispatch/launch.hpp"
#include "core/fail.hpp"

namespace kten::detail {

namespace {

constexpr std::int64_t kSlots = 64;

/// A check whose flag has not been read yet.
struct Pending {
  const char* op;
  std::string context;
};

/// One GPU's flags: slot i is elements 2i and 2i + 1 of `buffer`. Past kSlots pending checks, the
/// later ones share the last slot (an error there names the first of them and says how many
/// more), so a program that runs long without synchronising keeps kSlots records, not one per op.
struct GpuFlags {
  Tensor buffer;
  std::vector<Pending> pending;
  std::uint64_t sharing_last = 0;  // checks past kSlots
};

// Both are made on first use and never destroyed: Kokkos may be finalised during static
// destruction (a static ScopeGuard, or kten's own at-exit finalize), after a static map made at
// the first GPU index check would already be gone, and the finalize hook below clears the map.
// Before, that hook cleared a destroyed map: a double free (glibc's abort) or, under ASan, a
// heap-use-after-free, in every program that ran a checked GPU op and finalised at exit.
std::mutex& flags_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::map<int, GpuFlags>& gpu_flags() {
  static auto* flags = new std::map<int, GpuFlags>;
  return *flags;
}

// The two flag values of a cpu() flag, or all of a GPU buffer's: a plain device-to-host copy.
std::vector<std::int64_t> read_flags(const Tensor& flags) {
  std::vector<std::int64_t> host(static_cast<std::size_t>(flags.numel()));
  with_backend(flags.device(), [&](auto backend) {
    using B = decltype(backend);
    const std::size_t bytes = host.size() * sizeof(std::int64_t);
    RawView<B, char> from(data_ptr<char>(flags), bytes);
    RawView<HostBackend, char> to(reinterpret_cast<char*>(host.data()), bytes);
    KernelAccess<B> reading;
    Kokkos::deep_copy(backend.space, to, from);
    backend.space.fence();
  });
  return host;
}

[[noreturn]] void throw_index_error(const char* op, std::int64_t index, const std::string& context, const std::string& when) {
  fail<IndexError>(op, "index ", index, " is out of range ", context, "; indices must lie in [0, extent) ",
                   "(negative ones included). ", when);
}

// The finalize hook: an index error no synchronisation read (a program that ends without reading
// its results back) is said on stderr rather than lost; then the buffers go, before Kokkos does.
void report_at_finalize() {
  std::vector<int> gpus;
  {
    std::lock_guard<std::mutex> lock(flags_mutex());
    for (const auto& [index, flags] : gpu_flags())
      if (!flags.pending.empty()) gpus.push_back(index);
  }
  for (int index : gpus) {
    try {
      report_index_errors(gpu(index));
    } catch (const Error& e) {
      std::cerr << error_message("", "at Kokkos::finalize, an index error that no synchronisation reported: ", e.what())
                << '\n';
    }
  }
  std::lock_guard<std::mutex> lock(flags_mutex());
  gpu_flags().clear();
}

}  // namespace

IndexCheck::IndexCheck(const char* op, const Device& device, std::string context)
    : op_(op), device_(device), context_(std::move(context)) {
  if (device.is_cpu()) {
    flag_ = zeros({2}, device, DType::int64);
    return;
  }
  // The buffers are device memory: they go before Kokkos does (a tensor still alive after
  // Kokkos::finalize is left unfreed, which the leak checkers report).
  static std::once_flag hook;
  std::call_once(hook, [] { Kokkos::push_finalize_hook(report_at_finalize); });
  std::lock_guard<std::mutex> lock(flags_mutex());
  GpuFlags& gpu = gpu_flags()[device.index()];
  if (!gpu.buffer.defined()) gpu.buffer = zeros({2 * kSlots}, device, DType::int64);
  const auto slot = static_cast<std::int64_t>(gpu.pending.size());
  if (slot < kSlots) gpu.pending.push_back({op, context_});
  else ++gpu.sharing_last;
  flag_ = gpu.buffer.narrow(0, 2 * std::min(slot, kSlots - 1), 2);
}

void IndexCheck::launched() {
  if (!device_.is_cpu()) return;
  const std::vector<std::int64_t> flag = read_flags(flag_);
  if (flag[0] != 0) throw_index_error(op_, flag[1], context_, "The kernel skipped it.");
}

void report_index_errors(const Device& device) {
  if (device.is_cpu()) return;
  Tensor buffer;
  std::vector<Pending> pending;
  std::uint64_t sharing_last = 0;
  {
    std::lock_guard<std::mutex> lock(flags_mutex());
    auto found = gpu_flags().find(device.index());
    if (found == gpu_flags().end() || found->second.pending.empty()) return;
    pending.swap(found->second.pending);
    std::swap(sharing_last, found->second.sharing_last);
    buffer = found->second.buffer;
    found->second.buffer = zeros({2 * kSlots}, device, DType::int64);  // queued after the checked kernels
  }
  const std::vector<std::int64_t> flags = read_flags(buffer);
  for (std::size_t slot = 0; slot < pending.size(); ++slot) {
    if (flags[2 * slot] == 0) continue;
    const Pending& p = pending[slot];
    if (slot + 1 == static_cast<std::size_t>(kSlots) && sharing_last > 0)
      throw_index_error(p.op, flags[2 * slot + 1], p.context,
                        index_context("Found by this op's kernel or by one of the ", sharing_last,
                                      " indexed ops launched after it before this synchronisation (they share one "
                                      "check), and reported here; the kernel skipped it."));
    throw_index_error(p.op, flags[2 * slot + 1], p.context,
                      "Found by the op's kernel and reported at the next synchronisation (the kernel skipped it, so "
                      "values computed since may be wrong).");
  }
}

}  // namespace kten::detail
