# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The GPU backend of this build, decided once from what the Kokkos build enables (ggml's
# ggml_add_backend() pattern): every other CMake file reads the variables set here and never tests
# a Kokkos_ENABLE_<device> option itself. A new GPU vendor is a folder under backends/ (its glue),
# a file under perf/baselines/ (its vendor GEMM baseline) and one kten_gpu_backend() line below.
#
# kten_gpu_backend(<Kokkos device option> <folder> <name> [WARNING_OPTIONS ...] [HOST_ONLY_OPTIONS ...]
#                  [KOKKOS3_REQUIRES ...]) declares a backend; KOKKOS3_REQUIRES names Kokkos options
# (kokkos_check) that a user-provided Kokkos 3.x must have been built with for it. After kten_select_gpu_backend() the following are set for the whole project:
#   KTEN_GPU_BACKEND                 the folder under backends/ (none in a host-only build)
#   KTEN_GPU_BACKEND_NAME            Kokkos' name of the device space ("Cuda", "HIP"), or empty
#   KTEN_GPU_WARNING_OPTIONS         extra options of kten_warnings() for this backend's compiler
#   KTEN_GPU_HOST_ONLY_OPTIONS       options that make the backend's compiler build a plain host
#                                    file (the perf suite's OpenMP baselines)
# A Kokkos device backend with no glue here is a configure error, never a silent host-only build.

set(KTEN_KNOWN_GPU_BACKENDS "")

function(kten_gpu_backend kokkos_option folder name)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "WARNING_OPTIONS;HOST_ONLY_OPTIONS;KOKKOS3_REQUIRES")
  list(APPEND KTEN_KNOWN_GPU_BACKENDS ${kokkos_option})
  set(KTEN_KNOWN_GPU_BACKENDS ${KTEN_KNOWN_GPU_BACKENDS} PARENT_SCOPE)
  if(${kokkos_option})
    if(DEFINED KTEN_GPU_BACKEND)
      message(FATAL_ERROR "kten: Kokkos enables two GPU backends (${KTEN_GPU_BACKEND_NAME} and ${name}); "
                          "kten supports one per build.")
    endif()
    if(arg_KOKKOS3_REQUIRES AND NOT KTEN_KOKKOS_BUNDLED AND Kokkos_VERSION VERSION_LESS 4.0)
      kokkos_check(OPTIONS ${arg_KOKKOS3_REQUIRES} RETURN_VALUE kokkos_has_them)
      if(NOT kokkos_has_them)
        message(FATAL_ERROR "kten: the Kokkos at ${Kokkos_DIR} enables ${name} without ${arg_KOKKOS3_REQUIRES} "
                            "(kten's kernels need it). Rebuild it with -DKokkos_ENABLE_<option>=ON, or use "
                            "kten's bundled Kokkos.")
      endif()
    endif()
    set(KTEN_GPU_BACKEND ${folder} PARENT_SCOPE)
    set(KTEN_GPU_BACKEND_NAME ${name} PARENT_SCOPE)
    set(KTEN_GPU_WARNING_OPTIONS ${arg_WARNING_OPTIONS} PARENT_SCOPE)
    set(KTEN_GPU_HOST_ONLY_OPTIONS ${arg_HOST_ONLY_OPTIONS} PARENT_SCOPE)
  endif()
endfunction()

macro(kten_select_gpu_backend)
  unset(KTEN_GPU_BACKEND)
  # nvcc (through Kokkos' nvcc_wrapper): a host-only function called from host-device code is an
  # error, not a warning that a compile-only build would let pass (cudafe diagnostics 20011-20014).
  set(kten_nvcc_diagnostics "")
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    foreach(diagnostic 20011 20012 20013 20014)
      list(APPEND kten_nvcc_diagnostics "SHELL:-Xcudafe --diag_error=${diagnostic}")
    endforeach()
  endif()
  # CUDA_LAMBDA: the perf suite and the examples launch KOKKOS_LAMBDA kernels (Kokkos 4 always has it).
  # --host-only: nvcc_wrapper hands the file to its host GCC, which flags the AVX-512 intrinsics
  # Eigen inlines (_mm512_undefined_*) as maybe uninitialised, a known false positive.
  kten_gpu_backend(Kokkos_ENABLE_CUDA cuda Cuda
                   WARNING_OPTIONS ${kten_nvcc_diagnostics}
                   HOST_ONLY_OPTIONS --host-only -Wno-maybe-uninitialized
                   KOKKOS3_REQUIRES CUDA_LAMBDA)
  # hipcc (ROCm's clang 15; Debian 12 has ROCm 5.2): --offload-host-only compiles a file for the
  # host alone. Kokkos 3.4 knows AMD MI200 (gfx90a) only with kten's patch (cmake/patches/).
  kten_gpu_backend(Kokkos_ENABLE_HIP hip HIP
                   HOST_ONLY_OPTIONS --offload-host-only)

  foreach(kokkos_device HIP SYCL OPENMPTARGET)
    set(kokkos_option Kokkos_ENABLE_${kokkos_device})
    if(${kokkos_option} AND NOT "${kokkos_option}" IN_LIST KTEN_KNOWN_GPU_BACKENDS)
      message(FATAL_ERROR "kten: this Kokkos enables the ${kokkos_device} device backend, for which kten "
                          "has no glue (backends/). kten supports: ${KTEN_KNOWN_GPU_BACKENDS}. Use a Kokkos "
                          "built for one of those, or a host-only Kokkos.")
    endif()
  endforeach()
  if(NOT DEFINED KTEN_GPU_BACKEND)
    set(KTEN_GPU_BACKEND none)
    set(KTEN_GPU_BACKEND_NAME "")
    set(KTEN_GPU_WARNING_OPTIONS "")
    set(KTEN_GPU_HOST_ONLY_OPTIONS "")
  endif()
  message(STATUS "kten: GPU backend: ${KTEN_GPU_BACKEND}")
endmacro()
