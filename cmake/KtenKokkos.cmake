# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Which Kokkos kten builds against. Explicit, never a fallback:
#  - a user-provided Kokkos when Kokkos_ROOT, Kokkos_DIR or CMAKE_PREFIX_PATH is given (it must be found);
#  - otherwise the Kokkos 3.4.01 source that scripts/setup extracted from Debian's trilinos package,
#    built with the project and installed beside it.
set(KTEN_BUNDLED_KOKKOS_DIR ${PROJECT_SOURCE_DIR}/third_party/kokkos CACHE PATH "Kokkos source built with kten")

if(DEFINED Kokkos_ROOT OR DEFINED ENV{Kokkos_ROOT} OR DEFINED Kokkos_DIR OR CMAKE_PREFIX_PATH OR DEFINED ENV{CMAKE_PREFIX_PATH})
  find_package(Kokkos 3.4 REQUIRED)
  set(KTEN_KOKKOS_BUNDLED OFF)
  message(STATUS "kten: using Kokkos ${Kokkos_VERSION} from ${Kokkos_DIR}")
else()
  if(NOT EXISTS ${KTEN_BUNDLED_KOKKOS_DIR}/CMakeLists.txt)
    message(FATAL_ERROR "kten: no Kokkos. Run scripts/setup (extracts Debian's Kokkos 3.4.01), "
                        "or point at an installed Kokkos with -DKokkos_ROOT=<prefix>.")
  endif()
  if(KTEN_HOST_ARCH STREQUAL "native")
    include(KtenHostArch)
    kten_detect_host_arch(KTEN_HOST_ARCH)
  endif()
  if(KTEN_HOST_ARCH)
    set(Kokkos_ARCH_${KTEN_HOST_ARCH} ON CACHE BOOL "" FORCE)
    message(STATUS "kten: bundled Kokkos built for host architecture ${KTEN_HOST_ARCH}")
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
