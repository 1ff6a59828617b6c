# Warnings on kten's own targets only (never global flags). Kokkos comes in as a SYSTEM include
# through its imported/ALIAS target, so its headers do not trip them.
function(kten_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(KTEN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # nvcc (through Kokkos' nvcc_wrapper): a host-only function called from host-device code is an
  # error, not a warning that a compile-only build would let pass (cudafe diagnostics 20011-20014).
  if(Kokkos_ENABLE_CUDA AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    foreach(diagnostic 20011 20012 20013 20014)
      target_compile_options(${target} PRIVATE "SHELL:-Xcudafe --diag_error=${diagnostic}")
    endforeach()
  endif()
endfunction()
