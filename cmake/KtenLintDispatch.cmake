# CTest lint (cmake -DSRC=<source dir> -P): the dispatch is spelled out in one place. Outside
# src/dispatch.hpp, nothing in src/ may build a Kokkos range or team policy by hand or launch a
# Kokkos kernel directly (Kokkos::parallel_for(label, n, f) would index with 32 bits on CUDA):
# kernels go through run() / for_each_index() / RangePolicy<Backend>, whose 64-bit index is
# asserted there. Nor may it turn a tensor's void* into a typed pointer (launch(), data_ptr<T>()).
file(GLOB_RECURSE sources "${SRC}/src/*.cpp" "${SRC}/src/*.hpp")
set(failures "")
foreach(file IN LISTS sources)
  if(file MATCHES "/src/dispatch\\.hpp$")
    continue()
  endif()
  file(STRINGS "${file}" lines)
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    # (Nested team-level loops, written with their Team/Thread range on the same line, are fine.)
    if(line MATCHES "Kokkos::(Range|Team|MDRange)Policy" OR
       (line MATCHES "Kokkos::parallel_(for|reduce|scan)\\(" AND NOT line MATCHES "\\(Kokkos::(TeamThread|ThreadVector|TeamVector)Range") OR line MATCHES "static_cast<(const )?[A-Za-z_]+ ?\\*>\\([^)]*data\\(\\)\\)")
      string(APPEND failures "  ${file}:${number}: ${line}\n")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "dispatch spelled out outside src/dispatch.hpp:\n${failures}")
endif()
message(STATUS "dispatch: one place (${SRC}/src/dispatch.hpp)")
