# CTest lint (cmake -DSRC=<source dir> -P): the dispatch is spelled out in one place. Outside
# src/dispatch/, nothing in src/ may
#  - build a Kokkos range or team policy, directly or through dispatch's aliases (RangePolicy<B>,
#    TeamPolicy<B>: team_policy(), fixed_team_policy() and for_each_index() build them), or launch
#    a Kokkos kernel directly (Kokkos::parallel_for(label, n, f) would index with 32 bits on CUDA);
#  - check the launch thread or take the scratch lock itself (run() and the policies do);
#  - pick an element type (with_dtype) or turn a tensor's memory into a typed pointer
#    (data_ptr<T>, static_cast<T*>(data())): launch() does, after checking the operands. Byte
#    pointers (data_ptr<char>) for copies are fine.
# A failing run lists every offending line and their count.
file(GLOB_RECURSE sources "${SRC}/src/*.cpp" "${SRC}/src/*.hpp")
set(failures "")
set(count 0)
foreach(file IN LISTS sources)
  if(file MATCHES "/src/dispatch/")
    continue()
  endif()
  file(STRINGS "${file}" lines)
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    set(bad OFF)
    if(line MATCHES "Kokkos::(Range|Team|MDRange)Policy" OR line MATCHES "(^|[^A-Za-z_])(Range|Team)Policy<")
      set(bad ON)  # a policy built by hand
    endif()
    # (Nested team-level loops, written with their Team/Thread range on the same line, are fine.)
    if(line MATCHES "Kokkos::parallel_(for|reduce|scan)\\(" AND NOT line MATCHES "\\(Kokkos::(TeamThread|ThreadVector|TeamVector)Range")
      set(bad ON)
    endif()
    if(line MATCHES "(check_launch_thread|lock_shared_scratch|with_dtype)[<(]")
      set(bad ON)
    endif()
    if((line MATCHES "data_ptr<" AND NOT line MATCHES "data_ptr<(const )?char>") OR
       line MATCHES "static_cast<(const )?[A-Za-z_]+ ?\\*>\\([^)]*data\\(\\)\\)")
      set(bad ON)
    endif()
    if(bad)
      math(EXPR count "${count} + 1")
      string(APPEND failures "  ${file}:${number}: ${line}\n")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "dispatch spelled out outside src/dispatch/ (${count} lines):\n${failures}")
endif()
message(STATUS "dispatch: one place (${SRC}/src/dispatch/)")
