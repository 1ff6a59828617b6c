# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
