// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the one way to launch a kernel. launch() checks the operands, picks the backend and
// element type and hands the kernel typed pointers; run() / run_reduce() are the only calls of
// Kokkos::parallel_for / parallel_reduce; for_each_index() runs a functor over a 64-bit range.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include <kten/tensor.hpp>

#include "core/checks.hpp"
#include "core/backends.hpp"
#include "dtypes.hpp"
#include "emulated_access.hpp"
#include "host_threads.hpp"
#include "policies.hpp"
#include "core/storage.hpp"

namespace kten::detail {

/// \brief The largest kernel functor kten launches: CUDA passes kernel arguments of up to 4 KB, and
/// Kokkos' closure around the functor (policy, reducer, result pointers) takes the rest.
inline constexpr std::size_t kMaxFunctorBytes = 3584;

/// \brief Every build refuses a functor that would not fit a GPU's kernel arguments (the host's
/// functors have the GPU's layout: typed pointers, extents and strides).
template <class Functor>
constexpr void check_functor_size() {
  static_assert(sizeof(Functor) <= kMaxFunctorBytes,
                "a kernel's functor must fit CUDA's 4 KB of kernel arguments (kMaxFunctorBytes): "
                "keep its tables on the device or pass fewer of them");
}

/// \brief On a GPU, the policy with Kokkos' light-weight launch: the functor goes as a kernel
/// argument. By default Kokkos 3.4 puts any closure of 512 bytes or more in constant memory (kten's
/// convolutions, scatters and comparisons: functors of 448 to 632 bytes), and before each such
/// launch the host waits for the kernel that used that buffer before (cudaEventSynchronize): a host
/// synchronisation between two kernels of a training step, and a call GPGPU-Sim lacks
/// (cudaMemcpyToSymbolAsync). Host backends are unaffected.
template <class Backend, class Policy>
auto as_kernel_argument(const Policy& policy) {
  if constexpr (Backend::is_host || Backend::emulated) {
    return policy;
  } else {
    return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
  }
}

/// \brief The only place kten calls Kokkos::parallel_for: on the backend's policy, with an
/// emulated GPU's memory open while the kernel runs.
template <class Backend, class Policy, class Functor>
void run(const char* label, const Backend&, const Policy& policy, const Functor& functor) {
  check_launch_thread<Backend, Policy>(false);
  check_functor_size<Functor>();
  const auto lock = lock_shared_scratch<Backend, Policy, false>();
  KernelAccess<Backend> access;
  Kokkos::parallel_for(label, as_kernel_argument<Backend>(policy), functor);
}

/// \brief The only place kten calls Kokkos::parallel_reduce (result in `reducer`'s View).
template <class Backend, class Policy, class Functor, class Reducer>
void run_reduce(const char* label, const Backend&, const Policy& policy, const Functor& functor,
                const Reducer& reducer) {
  check_launch_thread<Backend, Policy>(true);
  check_functor_size<Functor>();
  const auto lock = lock_shared_scratch<Backend, Policy, true>();
  KernelAccess<Backend> access;
  Kokkos::parallel_reduce(label, as_kernel_argument<Backend>(policy), functor, reducer);
}

/// \brief functor(i) for i = first, first + stride, ... below n: one GPU thread's share of a range
/// larger than the threads the GPU holds at once (adjacent threads, adjacent indices: coalesced).
template <class Functor>
struct GridStride {
  Functor functor;
  std::int64_t n, stride;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t first) const {
    for (std::int64_t i = first; i < n; i += stride) functor(i);
  }
};

/// \brief The threads a GPU backend runs a range on at once: its resident threads (SMs x threads
/// per SM, Kokkos' concurrency()); an emulated GPU stands in with 2^16, so that the tests take the
/// grid-stride path on large tensors as a GPU does.
template <class Backend>
std::int64_t gpu_range_threads(const Backend& backend) {
  if constexpr (Backend::emulated) {
    (void)backend;
    return std::int64_t(1) << 16;
  } else {
    return backend.space.concurrency();
  }
}

/// \brief Runs functor(i) for i in [0, n) on the backend, asynchronously. `work` is the number of
/// elements the whole range touches (n when each index touches one), which decides whether a
/// cpu() kernel is worth waking every thread for.
///
/// On a GPU a range runs as a grid-stride loop over at most the resident threads (one iteration
/// each when n is smaller; one kernel per functor either way). Kokkos 3.4 launches a range as
/// blocks of the fewest threads that still reach full occupancy (64 on an H100), one index each:
/// 2^26 indices made a million short blocks, and the block scheduler, not memory, bounded every
/// elementwise kernel (25% achieved occupancy, 0.29 of cudaMemcpy's bandwidth, read from Nsight
/// Compute). With one resident wave of blocks, each thread streams its share and the kernel is
/// bound by memory bandwidth.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& backend, std::int64_t n, const Functor& functor,
                    std::int64_t work) {
  if constexpr (!Backend::is_host) {
    (void)work;
    const std::int64_t threads = std::min(n, gpu_range_threads(backend));
    run(label, backend, RangePolicy<Backend>(backend.space, 0, threads), GridStride<Functor>{functor, n, threads});
  } else {
    with_grain(backend, work, [&](const auto& on) {
      run(label, on, RangePolicy<std::decay_t<decltype(on)>>(on.space, 0, n), functor);
    });
  }
}

/// \brief Reduces functor(i, accumulator) over i in [0, n) on the backend into `reducer`'s View,
/// asynchronously.
template <class Backend, class Functor, class Reducer>
void reduce_each_index(const char* label, const Backend& backend, std::int64_t n, const Functor& functor,
                       const Reducer& reducer) {
  run_reduce(label, backend, RangePolicy<Backend>(backend.space, 0, n), functor, reducer);
}

/// \brief for_each_index over n indices that touch one element each.
template <class Backend, class Functor>
void for_each_index(const char* label, const Backend& backend, std::int64_t n, const Functor& functor) {
  for_each_index(label, backend, n, functor, n);
}

/// \brief The typed pointer to a tensor's first element, storage + offset (libtorch's
/// data_ptr<T>()); a pinned buffer that a queued copy may still read is waited for first, since the
/// kernel may write it. The other elements are where t.strides() say: only a contiguous tensor's
/// lie at [0, numel).
template <class T>
T* data_ptr(const Tensor& t) {
  const Storage& storage = *t.storage();
  if (storage.pinned) wait_for_pending_reader(storage);
  const auto offset = static_cast<std::size_t>(t.offset()) * dtype_size(t.dtype());
  return static_cast<T*>(static_cast<void*>(static_cast<char*>(storage.data) + offset));
}

/// \brief Throws kten::Error when `t` is a strided view: the guard of every kernel that reads or
/// writes its operands as [0, numel) (launch(), transfers, collectives).
inline void check_contiguous(const char* op, const Tensor& t) {
  if (!t.is_contiguous())
    fail(op, "this operation reads or writes its operands as contiguous memory, and one is a strided view (shape ",
         t.shape(), ", strides ", t.strides(), "); pass t.contiguous() (a copy) instead");
}

/// \brief A Kokkos profiling region for its lifetime (Kokkos 3.4 has no ScopedRegion): profilers
/// and Kokkos Tools show kten's operations, module calls and epochs by their kten:: names.
class Region {
 public:
  explicit Region(const char* name) { Kokkos::Profiling::pushRegion(name); }
  explicit Region(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~Region() { Kokkos::Profiling::popRegion(); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

/// \brief An operand whose element type is fixed by the operation rather than dispatched: a
/// boolean condition or result, int64 indices or an argmax result. launch() hands the kernel a U*
/// for it, after checking that the tensor's dtype is dtype_of<U>().
template <class U>
struct Fixed {
  const Tensor& tensor;
};

/// \brief Whether an operand is Fixed, and its element type.
template <class Operand>
struct FixedTraits {
  static constexpr bool fixed = false;
  using type = float;  // never used: nvcc 11.8 names it in the discarded `if constexpr` branch below
};
template <class U>
struct FixedTraits<Fixed<U>> {
  static constexpr bool fixed = true;
  using type = U;
};

/// \brief The tensor of an operand (a Tensor, or a Fixed one).
inline const Tensor& operand_tensor(const Tensor& t) { return t; }
template <class U>
const Tensor& operand_tensor(const Fixed<U>& f) { return f.tensor; }

/// \brief The typed pointer of an operand: T* for a dispatched one, U* for a Fixed<U>.
template <class T>
T* operand_data(const Tensor& t) { return data_ptr<T>(t); }
template <class T, class U>
U* operand_data(const Fixed<U>& f) { return data_ptr<U>(f.tensor); }

/// \brief Checks an operand against the lead one: one device, and the lead's dtype or, for a
/// Fixed<U>, dtype_of<U>().
inline void check_operand(const char* op, const Tensor& lead, const Tensor& t) { check_compatible(op, lead, t); }
template <class U>
void check_operand(const char* op, const Tensor& lead, const Fixed<U>& f) {
  check_defined(f.tensor, op);
  check_same_device(op, lead.device(), f.tensor.device());
  if (f.tensor.dtype() != dtype_of<U>())
    fail<DTypeError>(op, "an operand is ", f.tensor.dtype(), " where ", dtype_of<U>(), " is needed");
}

/// \brief launch() for kernels that index their operands through strides (views allowed): the
/// pointers are the operands' first elements, the kernel must use each operand's strides. The
/// element type T follows the first operand's dtype (float32 or float64 unless the kernel
/// `accepts` any), or is U when the first is a Fixed<U>; every operand is a T*, except Fixed<U>
/// ones (U*).
template <Accepts accepts = Accepts::floats, class Kernel, class First, class... Operands>
void launch_views(const char* op, Kernel&& kernel, const First& first, const Operands&... rest) {
  const Tensor& lead = operand_tensor(first);
  check_defined(lead, op);
  if constexpr (FixedTraits<First>::fixed) check_operand(op, lead, first);  // its dtype; a Tensor lead is the reference
  (check_operand(op, lead, rest), ...);
  Region region(op);
  const auto operands = std::forward_as_tuple(first, rest...);  // nvcc cannot capture a pack
  with_backend(lead.device(), [&](auto backend) {
    const auto call = [&](auto zero) {
      using T = decltype(zero);
      std::apply([&](const auto&... t) { kernel(backend, operand_data<T>(t)...); }, operands);
    };
    if constexpr (FixedTraits<First>::fixed) call(typename FixedTraits<First>::type{});
    else with_element_type<accepts>(op, lead.dtype(), call);
  });
}

/// \brief The one way to run a kernel over contiguous tensors: checks that every operand is
/// defined, contiguous (a strided view throws kten::Error, never reads the wrong elements) and that
/// all live on one device with one dtype (Fixed operands: their own), then calls
/// kernel(backend, T* first, T* rest...) as launch_views() does.
template <Accepts accepts = Accepts::floats, class Kernel, class First, class... Operands>
void launch(const char* op, Kernel&& kernel, const First& first, const Operands&... rest) {
  check_contiguous(op, operand_tensor(first));  // an undefined tensor counts as contiguous: launch_views says it is undefined
  (check_contiguous(op, operand_tensor(rest)), ...);
  launch_views<accepts>(op, std::forward<Kernel>(kernel), first, rest...);
}

/// \brief launch() of the common kind: one functor over n indices, made by make_kernel(T* first,
/// T* rest...) from the operands' typed pointers.
template <Accepts accepts = Accepts::floats, class MakeKernel, class First, class... Operands>
void launch_each_index(const char* op, std::int64_t n, MakeKernel&& make_kernel, const First& first,
                       const Operands&... rest) {
  launch<accepts>(op, [&](const auto& backend, auto*... data) { for_each_index(op, backend, n, make_kernel(data...)); },
                  first, rest...);
}

/// \brief launch() for a kernel from one dtype to another (a conversion, between any two dtypes):
/// checks both tensors are defined and on one device, then calls kernel(backend, From* from, To* to).
template <class Kernel>
void launch_conversion(const char* op, Kernel&& kernel, const Tensor& from, const Tensor& to) {
  check_defined(from, op);
  check_defined(to, op);
  check_same_device(op, from.device(), to.device());
  check_contiguous(op, from);
  check_contiguous(op, to);
  Region region(op);
  with_backend(from.device(), [&](auto backend) {
    with_any_dtype(from.dtype(), [&](auto from_zero) {
      with_any_dtype(to.dtype(), [&](auto to_zero) {
        kernel(backend, data_ptr<decltype(from_zero)>(from), data_ptr<decltype(to_zero)>(to));
      });
    });
  });
}

}  // namespace kten::detail
