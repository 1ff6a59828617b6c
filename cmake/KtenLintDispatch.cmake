# CTest lint (cmake -DSRC=<source dir> -P): the dispatch is spelled out in one place. Outside
# src/dispatch.hpp, nothing in src/ may build a Kokkos range or team policy by hand (kernels use
# for_each_index / RangePolicy<Backend>, whose 64-bit index is asserted there) or turn a tensor's
# void* into a typed pointer (launch() and data_ptr<T>() do).
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
    if(line MATCHES "Kokkos::(Range|Team|MDRange)Policy" OR line MATCHES "static_cast<(const )?[A-Za-z_]+ ?\\*>\\([^)]*data\\(\\)\\)")
      string(APPEND failures "  ${file}:${number}: ${line}\n")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "dispatch spelled out outside src/dispatch.hpp:\n${failures}")
endif()
message(STATUS "dispatch: one place (${SRC}/src/dispatch.hpp)")
