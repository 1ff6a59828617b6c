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

# Open MPI's launcher settings as environment variables, so that command lines stay any MPI's:
# root is allowed (containers, CI), more ranks than cores are allowed (this machine may have 2
# cores for 4 ranks), and idle ranks yield the core. Open MPI 5 and 6 launch through PRRTE, whose
# variables say the same (Open MPI 6 ignores OMPI_MCA_rmaps_base_oversubscribe); each MPI ignores
# the other's. For kten's MPI tests, its perf run and make perf-mpi.
set(KTEN_MPIEXEC_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1 PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
  OMPI_MCA_mpi_yield_when_idle=1)
# The tests' further settings: ranks not pinned to cores, one thread each.
set(KTEN_MPI_TEST_ENV ${KTEN_MPIEXEC_ENV}
  OMPI_MCA_hwloc_base_binding_policy=none PRTE_MCA_hwloc_default_binding_policy=none
  OMP_NUM_THREADS=1 OMP_PROC_BIND=false
  # cpu-debug: Open MPI leaves allocations of its plugins (unloaded at MPI_Finalize, so no
  # suppression can name them) to process exit. kten's own leaks are checked by kten-tests.
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0
  # hwloc (Open MPI's topology) skips PCI discovery: with pci.ids installed (ROCm's packages bring
  # it) libpciaccess parses it in small reallocs, over a minute per rank under ASan.
  HWLOC_COMPONENTS=-pci)
