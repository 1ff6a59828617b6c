# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The installed package: headers, libkten, kten::kten, ktenConfig.cmake and a version file.
# With the bundled Kokkos, Kokkos installs itself into the same prefix, so find_dependency finds it.
include(CMakePackageConfigHelpers)

if(KTEN_ENABLE_MPI)
  install(DIRECTORY include/kten DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
else()  # kten::dist's MPI headers have no implementation in this build
  install(DIRECTORY include/kten DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          PATTERN dist.hpp EXCLUDE PATTERN dist_mpi.hpp EXCLUDE)
endif()
install(FILES ${PROJECT_BINARY_DIR}/include/kten/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kten)
install(TARGETS kten EXPORT ktenTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ktenTargets NAMESPACE kten:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kten)

set(KTEN_KOKKOS_VERSION ${Kokkos_VERSION})
configure_package_config_file(cmake/ktenConfig.cmake.in ${PROJECT_BINARY_DIR}/ktenConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kten)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ktenConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ktenConfig.cmake ${PROJECT_BINARY_DIR}/ktenConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kten)
