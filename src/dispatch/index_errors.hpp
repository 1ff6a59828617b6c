// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: index checks without a host synchronisation. A kernel that reads indices checks each
// one against its extent as it reads it; one out of range is skipped (never read or written
// through) and recorded in a small int64 flag in the device's memory. On cpu() the op reads its
// flag right after its kernels return (host memory, nothing to wait for) and throws. On a GPU
// (real or emulated) the flag is read at the next synchronisation the program makes anyway: a
// read of device values to the host (item(), to(cpu()), copies) or synchronize(), which then
// throw the IndexError naming the op, the shapes and the bad index.

#include <cstdint>
#include <string>

#include <Kokkos_Core.hpp>

#include <kten/device.hpp>
#include <kten/tensor.hpp>

#include "core/fail.hpp"

namespace kten::detail {

/// \brief In a kernel: records `index` as out of range in `flag` (two int64: {0, 0} until the
/// first report, then {1, that index}). Integer atomics only; which bad index is kept when several
/// threads find one is not fixed, that there is one is.
KOKKOS_INLINE_FUNCTION void report_bad_index(std::int64_t* flag, std::int64_t index) {
  if (Kokkos::atomic_compare_exchange(&flag[0], std::int64_t(0), std::int64_t(1)) == 0) flag[1] = index;
}

/// \brief In a kernel: whether 0 <= index < extent; reports it to `flag` when not.
KOKKOS_INLINE_FUNCTION bool index_in_range(std::int64_t* flag, std::int64_t index, std::int64_t extent) {
  if (index >= 0 && index < extent) return true;
  report_bad_index(flag, index);
  return false;
}

/// \brief The parts formatted as fail() formats them (shapes as [2, 3]): an IndexCheck's context.
template <class... Parts>
std::string index_context(const Parts&... parts) {
  std::ostringstream out;
  (write_part(out, parts), ...);
  return out.str();
}

/// \brief One checked launch: the flag its kernels report to and what the error will say.
///
///   IndexCheck check("kten::scatter_add", x.device(), "for axis 0 of extent 5 (x [5, 3], index [4, 3])");
///   launch_views(label, ..., Fixed<std::int64_t>{check.flag()});   // kernels call index_in_range
///   check.launched();   // cpu(): throws now; a GPU: at its next synchronisation
class IndexCheck {
 public:
  /// \brief A flag for `op` on `device`; `context` follows "index N is out of range " in the message.
  IndexCheck(const char* op, const Device& device, std::string context);
  /// \brief The flag (int64, two elements, on the device) to hand the kernels.
  const Tensor& flag() const { return flag_; }
  /// \brief After the kernels are queued: on cpu() reads the flag and throws IndexError when a
  /// kernel found an index out of range; on a GPU leaves that to the next synchronisation.
  void launched();

 private:
  const char* op_;
  Device device_;
  std::string context_;
  Tensor flag_;
};

/// \brief At a synchronisation with `device` (after its queued work has finished): throws the
/// IndexError of the first checked launch since the last report whose kernels found an index out
/// of range, and forgets every pending check either way. Costs nothing when none is pending.
void report_index_errors(const Device& device);

}  // namespace kten::detail
