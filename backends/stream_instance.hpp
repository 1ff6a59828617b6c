// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to backends/: kten::new_stream_instance's ownership, shared by the GPU vendors' glue.

#include <memory>

#include <Kokkos_Core.hpp>

namespace kten::detail {

/// \brief An instance of the default execution space on `stream` (a cudaStream_t, hipStream_t)
/// that owns it: the last copy fences the instance, destroys it, then `destroy_stream(stream)`.
template <class Stream, class Destroy>
std::shared_ptr<const Kokkos::DefaultExecutionSpace> instance_owning(Stream stream, Destroy destroy_stream) {
  return std::shared_ptr<const Kokkos::DefaultExecutionSpace>(
      new Kokkos::DefaultExecutionSpace(stream), [stream, destroy_stream](const Kokkos::DefaultExecutionSpace* instance) {
        instance->fence();  // the stream's work is done before it goes
        delete instance;
        destroy_stream(stream);
      });
}

}  // namespace kten::detail
