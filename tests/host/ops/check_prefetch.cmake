# SPDX-License-Identifier: Apache-2.0
# Fails when the compiled CPU sampler issues no PREFETCHT1. Its adjacency and tag prefetches go
# into L2 through tessera/core/prefetch.hpp; written with __builtin_prefetch inside a helper
# member, GCC deleted every call as dead code (a pure function with no result), and no
# functional test can notice a missing prefetch: the output is the same, only 1.2-1.3x slower.
# Usage: cmake -DOBJDUMP=... -DOBJECTS=a.o|b.o|... -P check_prefetch.cmake
string(REPLACE "|" ";" _objects "${OBJECTS}")
set(_found FALSE)
foreach(_obj IN LISTS _objects)
  if(_obj MATCHES "sample_neighbors\\.cpp\\.o(bj)?$")
    set(_found TRUE)
    execute_process(COMMAND "${OBJDUMP}" -d --no-show-raw-insn "${_obj}"
                    OUTPUT_VARIABLE _asm RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "${OBJDUMP} failed on ${_obj} (exit ${_rc})")
    endif()
    string(REGEX MATCHALL "prefetcht1" _hits "${_asm}")
    list(LENGTH _hits _n)
    if(_n LESS 1)
      message(FATAL_ERROR "${_obj} holds no prefetcht1: the sampler's L2 prefetches were not "
                          "compiled (use tessera::prefetch_l2, not __builtin_prefetch)")
    endif()
    message(STATUS "${_obj}: ${_n} prefetcht1 instructions")
  endif()
endforeach()
if(NOT _found)
  message(FATAL_ERROR "no sample_neighbors object among: ${OBJECTS}")
endif()
