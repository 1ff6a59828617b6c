# CTest lint (cmake -DSRC=<source dir> -P): kten's error messages are built in one place. Outside
# src/fail.hpp, no string in src/ or backends/ starts with "kten: ": a message comes from
# detail::fail<E>(op, parts...) or detail::error_message(op, parts...), which write that prefix.
# A failing run lists every offending line and their count.
file(GLOB_RECURSE sources "${SRC}/src/*.cpp" "${SRC}/src/*.hpp" "${SRC}/backends/*.cpp" "${SRC}/backends/*.hpp")
set(failures "")
set(count 0)
foreach(file IN LISTS sources)
  if(file MATCHES "/src/fail\\.hpp$")
    continue()
  endif()
  # Read whole, not with file(STRINGS): a list of lines splits wrongly at unbalanced brackets.
  file(READ "${file}" rest)
  set(number 1)  # the line `rest` starts on
  string(FIND "${rest}" "\"kten: " at)
  while(NOT at EQUAL -1)
    string(SUBSTRING "${rest}" 0 ${at} before)
    string(REGEX MATCHALL "\n" newlines "${before}")
    list(LENGTH newlines skipped)
    math(EXPR number "${number} + ${skipped}")
    string(FIND "${before}" "\n" start REVERSE)
    math(EXPR start "${start} + 1")
    string(SUBSTRING "${rest}" ${start} -1 rest)  # from the offending line's start
    string(FIND "${rest}" "\n" end)
    string(SUBSTRING "${rest}" 0 ${end} line)
    math(EXPR count "${count} + 1")
    string(APPEND failures "  ${file}:${number}: ${line}\n")
    if(end EQUAL -1)
      set(rest "")
    else()
      math(EXPR end "${end} + 1")
      string(SUBSTRING "${rest}" ${end} -1 rest)
      math(EXPR number "${number} + 1")
    endif()
    string(FIND "${rest}" "\"kten: " at)
  endwhile()
endforeach()
if(failures)
  message(FATAL_ERROR "error messages built by hand; use detail::fail or detail::error_message (src/fail.hpp) "
                      "(${count} lines):\n${failures}")
endif()
message(STATUS "errors: every message from src/fail.hpp")
