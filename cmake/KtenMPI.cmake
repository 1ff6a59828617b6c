# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# MPI for kten::dist, only when asked for: KTEN_ENABLE_MPI is an explicit choice (ON in the presets),
# never switched on because an MPI library happens to be installed.
if(NOT KTEN_ENABLE_MPI)
  message(STATUS "kten: MPI not built (KTEN_ENABLE_MPI=OFF): no kten::dist")
  return()
endif()

set(MPI_CXX_SKIP_MPICXX ON)  # kten uses MPI's C API; no deprecated C++ bindings (libmpi_cxx)
find_package(MPI COMPONENTS CXX)
if(NOT MPI_CXX_FOUND)
  message(FATAL_ERROR
    "kten: KTEN_ENABLE_MPI is ON but CMake found no MPI library for C++. Install one (Debian 12: "
    "apt-get install libopenmpi-dev openmpi-bin, which scripts/setup does), point CMake at yours "
    "(-DMPI_HOME=<prefix> or -DMPI_CXX_COMPILER=<path to mpicxx>), or configure with "
    "-DKTEN_ENABLE_MPI=OFF to build kten without kten::dist.")
endif()
message(STATUS "kten: MPI ${MPI_CXX_VERSION} (${MPI_CXX_LIBRARIES}); launcher ${MPIEXEC_EXECUTABLE}")
