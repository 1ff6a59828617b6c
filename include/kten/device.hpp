// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file device.hpp
/// \brief Devices (cpu(), gpu(i)), their discovery, and the Kokkos lifetime guard.

#include <iosfwd>
#include <string>
#include <vector>

namespace kten {

/// \brief Whether a Device is the host or a GPU.
enum class DeviceKind { cpu, gpu };

/// \brief Where a tensor lives and computes: the host (all cores, host memory) or one GPU.
///
/// A value type: comparable and printable as `cpu(0)` or `gpu(i)`. Creating a Device never
/// fails; *using* a GPU that does not exist throws kten::DeviceUnavailable.
class Device {
 public:
  /// \brief The host device, cpu(0).
  constexpr Device() = default;
  /// \brief A device of the given kind; every CPU index names the one host device, cpu(0).
  constexpr Device(DeviceKind kind, int index)
      : kind_(kind), index_(kind == DeviceKind::cpu ? 0 : index) {}

  /// \brief CPU or GPU.
  constexpr DeviceKind kind() const { return kind_; }
  /// \brief The GPU ordinal (0 for the CPU).
  constexpr int index() const { return index_; }
  /// \brief True for cpu().
  constexpr bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  /// \brief True for any gpu(i), real or emulated.
  constexpr bool is_gpu() const { return kind_ == DeviceKind::gpu; }
  /// \brief "cpu(0)" or "gpu(i)".
  std::string str() const;

  /// \brief Same kind and index.
  friend constexpr bool operator==(const Device& a, const Device& b) {
    return a.kind_ == b.kind_ && a.index_ == b.index_;
  }
  /// \brief Different kind or index.
  friend constexpr bool operator!=(const Device& a, const Device& b) { return !(a == b); }

 private:
  DeviceKind kind_ = DeviceKind::cpu;
  int index_ = 0;
};

/// \brief Prints "cpu(0)" or "gpu(i)".
std::ostream& operator<<(std::ostream& os, const Device& d);

/// \brief The host: all host cores and host memory. cpu(i) for any i is the same device.
constexpr Device cpu(int index = 0) { return Device(DeviceKind::cpu, index); }
/// \brief GPU number `index` (gpu() == gpu(0)). Never throws; using a missing GPU does.
constexpr Device gpu(int index = 0) { return Device(DeviceKind::gpu, index); }

/// \brief How many GPUs kten can use in this process: 0 in a host-only build or without GPUs.
/// With KTEN_EMULATE_GPUS=N set, N host-memory stand-ins (see gpus_are_emulated()).
int num_gpus();
/// \brief gpu(index) if it exists, else cpu(). Never throws.
Device try_gpu(int index = 0);
/// \brief Every usable GPU, or {cpu()} when there is none.
std::vector<Device> try_all_gpus();
/// \brief True when KTEN_EMULATE_GPUS makes gpu(i) host-memory stand-ins (for testing device rules).
bool gpus_are_emulated();
/// \brief Throws kten::DeviceUnavailable unless `device` can hold data in this process.
void require_available(const Device& device);
/// \brief Blocks the host until all work queued on `device` has finished (an explicit fence).
void synchronize(const Device& device);

/// \brief Initialises Kokkos unless the application already did, and finalises only what it
/// initialised. Optional: without one, kten starts Kokkos on first use and finalises it at exit;
/// construct one at the top of main() to pass Kokkos' --kokkos-* flags or to end Kokkos earlier.
class ScopeGuard {
 public:
  /// \brief Initialises Kokkos with the command line (Kokkos' own --kokkos-* flags are honoured).
  ScopeGuard(int& argc, char* argv[]);
  /// \brief Initialises Kokkos with default settings.
  ScopeGuard();
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

  /// \brief True when this guard initialised Kokkos (and so will finalise it).
  bool owns_kokkos() const { return owns_; }

 private:
  bool owns_ = false;
};

}  // namespace kten
