# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# CTest lints (cmake -DSRC=<source dir> -DRULE=dispatch|errors|spdx|layers -P KtenLint.cmake): each keeps one
# concern in one place. A failing run lists every offending line and their count.
#
# dispatch: outside src/dispatch/, nothing in src/ may
#  - build a Kokkos range or team policy, directly or through dispatch's aliases (RangePolicy<B>,
#    TeamPolicy<B>: team_policy(), fixed_team_policy() and for_each_index() build them), or launch
#    a Kokkos kernel directly (Kokkos::parallel_for(label, n, f) would index with 32 bits on CUDA);
#  - check the launch thread or take the scratch lock itself (run() and the policies do);
#  - pick an element type (with_dtype, with_any_dtype, with_element_type) or turn a tensor's memory into a typed pointer
#    (data_ptr<T>, static_cast<T*>(data())): launch() does, after checking the operands. Byte
#    pointers (data_ptr<char>) for copies are fine.
# errors: outside src/core/fail.hpp, no string in src/ or backends/ starts with "kten: ": a message
#   comes from detail::fail<E>(op, parts...) or detail::error_message(op, parts...).
# layers: a file in src/<layer>/ includes nothing from a layer above its own (docs/architecture.md,
#   "Layers"), lowest first: core (and backends/, the vendor glue beside it), dispatch, autograd, ops,
#   nn, optim, io, onnx, dist, train, info. Public headers (<kten/...>) are the API every layer may
#   use; an include that climbs with "../" is refused too.
# spdx: every source kten ships or builds (src, include, bindings, backends, cmake, perf, examples)
#   says its licence on its first lines (LICENSE): one SPDX line, Apache-2.0 WITH LLVM-exception.

if(RULE STREQUAL "dispatch")
  set(globs "${SRC}/src/*.cpp" "${SRC}/src/*.hpp")
  set(exempt "/src/dispatch/")
  set(what "dispatch spelled out outside src/dispatch/")
elseif(RULE STREQUAL "errors")
  set(globs "${SRC}/src/*.cpp" "${SRC}/src/*.hpp" "${SRC}/backends/*.cpp" "${SRC}/backends/*.hpp")
  set(exempt "/src/core/fail\\.hpp$")
  set(what "error messages built by hand; use detail::fail or detail::error_message (src/core/fail.hpp)")
elseif(RULE STREQUAL "spdx")
  set(globs)
  foreach(dir src include bindings backends cmake perf examples)
    foreach(pattern *.cpp *.hpp *.h *.c *.f90 *.py *.cmake *.in CMakeLists.txt)
      list(APPEND globs "${SRC}/${dir}/${pattern}")
    endforeach()
  endforeach()
  set(exempt "^$")
  set(what "source files without the licence's SPDX line (LICENSE) in their first 200 characters")
elseif(RULE STREQUAL "layers")
  set(globs "${SRC}/src/*.cpp" "${SRC}/src/*.hpp" "${SRC}/backends/*.cpp" "${SRC}/backends/*.hpp")
  set(exempt "^$")
  set(layer_order core dispatch autograd ops nn optim io onnx dist train info)
  set(what "includes that climb to a higher layer (docs/architecture.md, \"Layers\")")
else()
  message(FATAL_ERROR "KtenLint.cmake: RULE must be dispatch, errors, spdx or layers, got '${RULE}'")
endif()

# Sets `out` to ON when `line` breaks the rule.
function(line_breaks_rule line out)
  set(bad OFF)
  if(RULE STREQUAL "errors")
    if(line MATCHES "\"kten: ")
      set(bad ON)
    endif()
  elseif(RULE STREQUAL "layers")  # file_rank: the including file's layer (set per file below)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\"")
      set(target "${CMAKE_MATCH_1}")
      if(target MATCHES "\\.\\./")
        set(bad ON)
      elseif(target MATCHES "^([a-z_]+)/")
        list(FIND layer_order "${CMAKE_MATCH_1}" target_rank)
        if(target_rank GREATER file_rank)
          set(bad ON)
        endif()
      endif()
    endif()
  else()
    if(line MATCHES "Kokkos::(Range|Team|MDRange)Policy" OR line MATCHES "(^|[^A-Za-z_])(Range|Team)Policy<")
      set(bad ON)  # a policy built by hand
    endif()
    # (Nested team-level loops, written with their Team/Thread range on the same line, are fine.)
    if(line MATCHES "Kokkos::parallel_(for|reduce|scan)\\(" AND NOT line MATCHES "\\(Kokkos::(TeamThread|ThreadVector|TeamVector)Range")
      set(bad ON)
    endif()
    if(line MATCHES "(check_launch_thread|lock_shared_scratch|with_dtype|with_any_dtype|with_element_type)[<(]")
      set(bad ON)
    endif()
    if((line MATCHES "data_ptr<" AND NOT line MATCHES "data_ptr<(const )?char>") OR
       line MATCHES "static_cast<(const )?[A-Za-z_]+ ?\\*>\\([^)]*data\\(\\)\\)")
      set(bad ON)
    endif()
  endif()
  set(${out} ${bad} PARENT_SCOPE)
endfunction()

# Counts one failure and lists `where` (a file, or a file and line) with it. A function, not a
# macro: a macro would read the offending line's backslashes and ${...} again.
function(report where)
  math(EXPR n "${count} + 1")
  set(count ${n} PARENT_SCOPE)
  set(failures "${failures}  ${where}\n" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources ${globs})
set(failures "")
set(count 0)
foreach(file IN LISTS sources)
  if(file MATCHES "${exempt}")
    continue()
  endif()
  # The lines as a list, with the characters CMake lists treat specially (; [ ]) masked so that
  # every line is one element and line numbers are exact.
  file(READ "${file}" text)
  if(RULE STREQUAL "spdx")  # a rule about the file, not its lines
    string(SUBSTRING "${text}" 0 200 head)
    string(FIND "${head}" "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception" at)
    if(at EQUAL -1)
      report("${file}")
    endif()
    continue()
  endif()
  if(RULE STREQUAL "layers")  # the file's own layer: its folder under src/, or core's for backends/
    set(file_rank 0)
    string(LENGTH "${SRC}/" prefix)
    string(SUBSTRING "${file}" ${prefix} -1 relative)
    if(relative MATCHES "^src/([a-z_]+)/")
      list(FIND layer_order "${CMAKE_MATCH_1}" file_rank)
      if(file_rank EQUAL -1)
        report("${file}: src/${CMAKE_MATCH_1}/ is no layer; add it to KtenLint.cmake's list")
        continue()
      endif()
    endif()
  endif()
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<open>" text "${text}")
  string(REPLACE "]" "<close>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    string(REPLACE "<semicolon>" ";" line "${line}")
    string(REPLACE "<open>" "[" line "${line}")
    string(REPLACE "<close>" "]" line "${line}")
    line_breaks_rule("${line}" bad)
    if(bad)
      report("${file}:${number}: ${line}")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "${what} (${count} lines):\n${failures}")
endif()
message(STATUS "${RULE}: one place")
