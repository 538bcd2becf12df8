# Writes OUT, a header defining KVSCOPE_GIT_REVISION, from the source tree's git HEAD (with "-dirty"
# when tracked files differ from it). Run at every build, not at configure time, so that a benchmark
# export names the code that produced it; the file is rewritten only when the revision changes, so an
# unchanged revision recompiles nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT revision)
  set(revision "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND revision "-dirty")
  endif()
endif()
set(content "#pragma once\n#define KVSCOPE_GIT_REVISION \"${revision}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL content)
  file(WRITE ${OUT} "${content}")
endif()
