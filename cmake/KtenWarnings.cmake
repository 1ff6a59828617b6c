# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Warnings on kten's own targets only (never global flags). Kokkos comes in as a SYSTEM include
# through its imported/ALIAS target, so its headers do not trip them.
function(kten_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(KTEN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # The GPU compiler's own checks made errors (cmake/KtenGpuBackend.cmake).
  if(KTEN_GPU_WARNING_OPTIONS)
    target_compile_options(${target} PRIVATE ${KTEN_GPU_WARNING_OPTIONS})
  endif()
endfunction()
