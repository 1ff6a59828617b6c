# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Writes the source tree's git hash into OUT as a header, touching it only when the hash changes,
# so every build of the perf suite records the commit it was built from.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT hash)
  set(hash unknown)
elseif(dirty)
  set(hash "${hash}-dirty")
endif()
set(content "#define KTEN_GIT_HASH \"${hash}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
