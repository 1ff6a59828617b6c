# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The host architecture kten's own kernels are compiled for. The GEMM's micro-tile and the other
# vector loops (src/dispatch/host_isa.hpp) follow the compiler's target macros (__AVX512F__, __AVX2__),
# so without an -march they fall back to 128-bit vectors, whatever the CPU.

# Picks a Kokkos host architecture for the machine that builds, so kernels use its vector units
# (OpenBLAS chooses AVX2/AVX-512 kernels at run time; a baseline x86-64 build cannot keep up).
function(kten_detect_host_arch out)
  set(arch "")
  if(EXISTS /proc/cpuinfo)
    file(STRINGS /proc/cpuinfo flags REGEX "^flags" LIMIT_COUNT 1)
    if(flags MATCHES " avx512f " AND flags MATCHES " avx512bw ")
      set(arch SKX)
    elseif(flags MATCHES " avx2 " AND flags MATCHES " fma ")
      set(arch HSW)
    endif()
  endif()
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()

# KTEN_HOST_ARCH as asked for: 'native' resolved to this machine's (kten_detect_host_arch).
function(kten_requested_host_arch out)
  set(arch "${KTEN_HOST_ARCH}")
  if(arch STREQUAL "native")
    kten_detect_host_arch(arch)
  endif()
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()

# The host architecture among an installed Kokkos' Kokkos_ARCH list (its device architectures
# left out), or empty: Debian's packages, like a Kokkos configured without Kokkos_ARCH_*, set none.
function(kten_kokkos_host_arch out)
  set(host "")
  foreach(arch IN LISTS Kokkos_ARCH)
    string(TOUPPER "${arch}" arch)
    if(NOT arch MATCHES "^(KEPLER|MAXWELL|PASCAL|VOLTA|TURING|AMPERE|ADA|HOPPER|BLACKWELL|VEGA|NAVI|AMD_GFX|INTEL_GEN|INTEL_DG|INTEL_XE|INTEL_PVC)")
      set(host "${arch}")
    endif()
  endforeach()
  set(${out} "${host}" PARENT_SCOPE)
endfunction()

# The GCC/Clang flags for a Kokkos x86-64 host architecture name: the same as Kokkos' own
# (cmake/kokkos_arch.cmake), so that kten built beside a Kokkos without an architecture gets the
# kernels a bundled build for that architecture gets. Other names stop the configure.
function(kten_host_arch_flags arch out)
  set(march_SKX skylake-avx512)
  set(march_ICX icelake-server)
  set(march_SPR sapphirerapids)
  set(march_HSW core-avx2)
  set(march_BDW core-avx2)
  set(march_ZEN znver1)
  set(march_ZEN2 znver2)
  set(march_ZEN3 znver3)
  set(march_ZEN4 znver4)
  if(NOT DEFINED march_${arch})
    message(FATAL_ERROR "kten: your Kokkos sets no host architecture, and kten knows the compiler flags of "
                        "SKX, ICX, SPR, HSW, BDW and ZEN to ZEN4 only, not KTEN_HOST_ARCH=${arch}: name one of "
                        "those, 'native', or none (-DKTEN_HOST_ARCH=), or build your Kokkos with Kokkos_ARCH_${arch}.")
  endif()
  set(${out} -march=${march_${arch}} -mtune=${march_${arch}} PARENT_SCOPE)
endfunction()

# The vector ISA kten's kernels report (kten::cpu_vector_isa()) for a host architecture name,
# or empty where kten does not know the name.
function(kten_host_arch_isa arch out)
  if(arch MATCHES "^(SKX|ICX|SPR|ZEN4|ZEN5)$")
    set(${out} "AVX-512" PARENT_SCOPE)
  elseif(arch MATCHES "^(HSW|BDW|SKL|ZEN|ZEN2|ZEN3)$")
    set(${out} "AVX2+FMA" PARENT_SCOPE)
  elseif(arch STREQUAL "")
    set(${out} "generic 128-bit" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()
