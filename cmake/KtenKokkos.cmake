# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Which Kokkos kten builds against. Explicit, never a fallback:
#  - a user-provided Kokkos when Kokkos_ROOT, Kokkos_DIR or CMAKE_PREFIX_PATH is given (it must be found);
#  - otherwise the Kokkos 3.4.01 source that scripts/setup extracted from Debian's trilinos package,
#    built with the project and installed beside it.
include(KtenHostArch)
set(KTEN_BUNDLED_KOKKOS_DIR ${PROJECT_SOURCE_DIR}/third_party/kokkos CACHE PATH "Kokkos source built with kten")

if(DEFINED Kokkos_ROOT OR DEFINED ENV{Kokkos_ROOT} OR DEFINED Kokkos_DIR OR CMAKE_PREFIX_PATH OR DEFINED ENV{CMAKE_PREFIX_PATH})
  find_package(Kokkos 3.4 REQUIRED)
  set(KTEN_KOKKOS_BUNDLED OFF)
  message(STATUS "kten: using Kokkos ${Kokkos_VERSION} from ${Kokkos_DIR}")
  # Your Kokkos' host architecture carries its -march to everything that links it. Without one,
  # kten compiles its own targets for KTEN_HOST_ARCH, as the bundled Kokkos would have been;
  # applications that link kten are left as they are.
  kten_kokkos_host_arch(KTEN_RESOLVED_HOST_ARCH)
  if(KTEN_RESOLVED_HOST_ARCH)
    if(KTEN_HOST_ARCH AND NOT KTEN_HOST_ARCH STREQUAL "native" AND NOT KTEN_HOST_ARCH STREQUAL KTEN_RESOLVED_HOST_ARCH)
      message(FATAL_ERROR "kten: your Kokkos is built for host architecture ${KTEN_RESOLVED_HOST_ARCH}, "
                          "and KTEN_HOST_ARCH=${KTEN_HOST_ARCH} would contradict it: drop KTEN_HOST_ARCH or rebuild Kokkos.")
    endif()
    message(STATUS "kten: host architecture ${KTEN_RESOLVED_HOST_ARCH}, your Kokkos'")
  else()
    kten_requested_host_arch(KTEN_RESOLVED_HOST_ARCH)
    if(KTEN_RESOLVED_HOST_ARCH)
      kten_host_arch_flags(${KTEN_RESOLVED_HOST_ARCH} kten_arch_flags)
      if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
        add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${kten_arch_flags}>")
      endif()
      string(JOIN " " kten_arch_shown ${kten_arch_flags})
      message(STATUS "kten: your Kokkos sets no host architecture; kten's own code is built for "
                     "${KTEN_RESOLVED_HOST_ARCH} (${kten_arch_shown})")
    endif()
  endif()
else()
  if(NOT EXISTS ${KTEN_BUNDLED_KOKKOS_DIR}/CMakeLists.txt)
    message(FATAL_ERROR "kten: no Kokkos. Run scripts/setup (extracts Debian's Kokkos 3.4.01), "
                        "or point at an installed Kokkos with -DKokkos_ROOT=<prefix>.")
  endif()
  kten_requested_host_arch(KTEN_RESOLVED_HOST_ARCH)
  if(KTEN_RESOLVED_HOST_ARCH)
    set(Kokkos_ARCH_${KTEN_RESOLVED_HOST_ARCH} ON CACHE BOOL "" FORCE)
    message(STATUS "kten: bundled Kokkos built for host architecture ${KTEN_RESOLVED_HOST_ARCH}")
  endif()
  set(Kokkos_CXX_STANDARD 17 CACHE STRING "")
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_EXTENSIONS OFF)
  # SYSTEM: kten's -Wall -Wextra -Werror apply to kten, not to Kokkos' headers.
  add_subdirectory(${KTEN_BUNDLED_KOKKOS_DIR} ${PROJECT_BINARY_DIR}/kokkos SYSTEM)
  set(KTEN_KOKKOS_BUNDLED ON)
  get_directory_property(Kokkos_VERSION DIRECTORY ${KTEN_BUNDLED_KOKKOS_DIR} DEFINITION Kokkos_VERSION)
  message(STATUS "kten: building the bundled Kokkos from ${KTEN_BUNDLED_KOKKOS_DIR}")
endif()
