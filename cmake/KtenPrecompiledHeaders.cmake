# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Precompiled headers (issue 29). Most of kten's translation units first parse the same
# third-party headers: Kokkos' (0.3-0.8 s of CPU a file in a debug build), Catch2's in the tests,
# ATen's (5 s) in the PyTorch harness. g++ and clang read them precompiled for kten's own targets in
# host-only builds. Only third-party headers: CMake marks a precompiled header as a system header,
# which would silence warnings in kten's own. GPU builds take none (nvcc_wrapper, hipcc), so they
# still compile every file with only the includes it names, and kten-header-check never has one:
# each public header must compile on its own.
option(KTEN_PRECOMPILE_HEADERS "Precompile the third-party headers kten's own targets include (g++ and clang, host-only builds)" ON)

# `target` reads `headers` (<system> forms) precompiled, where this build can.
function(kten_precompile_headers target)
  if(KTEN_PRECOMPILE_HEADERS AND KTEN_GPU_BACKEND STREQUAL "none" AND CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
