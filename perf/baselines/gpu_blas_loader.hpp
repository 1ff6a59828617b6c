// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What a GPU vendor's baseline shares with the others: its BLAS opened at run time (cuBLAS and
// rocBLAS have the same C shape for creating a handle, binding a stream and a column-major gemm),
// the timer of the raw floors, and the skeleton of the pinned copy floor. Included by the GPU
// backends' perf/baselines/<backend>.cpp and by gpu_blas.cpp, which defines vendor_baseline.hpp's
// BLAS entry points on the backend's vendor_blas().

#include <dlfcn.h>

#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

namespace kten::perf {

/// \brief Where a vendor's BLAS lives and what its entry points are called.
struct BlasNames {
  std::vector<const char*> libraries;  ///< \brief tried in order with dlopen
  const char* create;
  const char* set_stream;
  const char* sgemm;
  const char* dgemm;
  int no_transpose;       ///< \brief the library's code for "no transpose"
  const char* not_found;  ///< \brief the error when no library loads, with what to do
};

/// \brief A GPU BLAS' gemm entry points once opened on a stream, or why it could not be.
struct LoadedBlas {
  using Handle = void*;
  using SgemmFn = int (*)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
                          const float*, float*, int);
  using DgemmFn = int (*)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int,
                          const double*, double*, int);
  void* library = nullptr;
  Handle handle = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  int no_transpose = 0;
  std::string error;

  /// \brief Whether it loaded; `why` says why not.
  bool available(std::string* why) const {
    if (!handle && why) *why = error;
    return handle != nullptr;
  }

  /// \brief Row-major C (m x n) = A (m x k) B (k x n): column-major C^T = B^T A^T, so B goes first.
  template <class T>
  void gemm(const T* A, const T* B, T* C, long m, long n, long k) const {
    const T one = 1, zero = 0;
    if constexpr (std::is_same_v<T, float>)
      sgemm(handle, no_transpose, no_transpose, int(n), int(m), int(k), &one, B, int(n), A, int(k), &zero, C, int(n));
    else
      dgemm(handle, no_transpose, no_transpose, int(n), int(m), int(k), &one, B, int(n), A, int(k), &zero, C, int(n));
  }
};

/// \brief Opens the first of `names.libraries` that loads and binds a new handle to `stream`.
template <class Stream>
LoadedBlas load_blas(const BlasNames& names, Stream stream) {
  LoadedBlas blas;
  blas.no_transpose = names.no_transpose;
  for (const char* name : names.libraries)
    if ((blas.library = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  if (!blas.library) {
    blas.error = names.not_found;
    return blas;
  }
  using CreateFn = int (*)(void**);
  using SetStreamFn = int (*)(void*, Stream);
  auto create = reinterpret_cast<CreateFn>(dlsym(blas.library, names.create));
  auto set_stream = reinterpret_cast<SetStreamFn>(dlsym(blas.library, names.set_stream));
  blas.sgemm = reinterpret_cast<LoadedBlas::SgemmFn>(dlsym(blas.library, names.sgemm));
  blas.dgemm = reinterpret_cast<LoadedBlas::DgemmFn>(dlsym(blas.library, names.dgemm));
  if (!create || !set_stream || !blas.sgemm || !blas.dgemm || create(&blas.handle) != 0) {
    blas.error = std::string(names.libraries.front()) + " lacks the expected entry points or " + names.create + " failed";
    blas.handle = nullptr;
    return blas;
  }
  set_stream(blas.handle, stream);
  return blas;
}

/// \brief The backend's BLAS, opened once on Kokkos' stream: defined by the GPU backend's
/// perf/baselines/<backend>.cpp (one per build).
const LoadedBlas& vendor_blas();

/// \brief Seconds per call of f, after one warm-up call.
template <class F>
double seconds_per(int repetitions, F f) {
  f();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repetitions; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repetitions;
}

/// \brief vendor_baseline.hpp's raw_pinned_h2d_seconds on a vendor runtime's calls: seconds per
/// copy(device, host, bytes) from pinned host memory, 0 when alloc_host or alloc_device (each
/// `bool (void**, std::size_t)`) fails; free_host and free_device release the buffers.
template <class AllocHost, class AllocDevice, class Copy, class FreeHost, class FreeDevice>
double pinned_h2d_seconds(std::size_t bytes, int repetitions, AllocHost alloc_host, AllocDevice alloc_device, Copy copy,
                          FreeHost free_host, FreeDevice free_device) {
  void *host = nullptr, *device = nullptr;
  if (!alloc_host(&host, bytes)) return 0;
  if (!alloc_device(&device, bytes)) {
    free_host(host);
    return 0;
  }
  const double s = seconds_per(repetitions, [&] { copy(device, host, bytes); });
  free_device(device);
  free_host(host);
  return s;
}

}  // namespace kten::perf
