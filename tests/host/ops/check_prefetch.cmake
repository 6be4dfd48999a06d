# SPDX-License-Identifier: Apache-2.0
# Fails when a compiled CPU sampler loop issues no PREFETCHT1: the windowed pipeline's COO
# instantiation (sample_rows.cpp) and its one-pass block instantiation (sample_block.cpp). Their
# adjacency and tag prefetches go into L2 through tessera/core/prefetch.hpp; written with __builtin_prefetch inside a helper
# member, GCC deleted every call as dead code (a pure function with no result), and no
# functional test can notice a missing prefetch: the output is the same, only 1.2-1.3x slower.
# Usage: cmake -DOBJDUMP=... -DOBJECTS=a.o|b.o|... -P check_prefetch.cmake
string(REPLACE "|" ";" _objects "${OBJECTS}")
set(_found "")
foreach(_obj IN LISTS _objects)
  if(_obj MATCHES "(sample_rows|sample_block)\\.cpp\\.o(bj)?$")
    list(APPEND _found "${CMAKE_MATCH_1}")
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
foreach(_want sample_rows sample_block)
  list(FIND _found "${_want}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "no ${_want} object among: ${OBJECTS}")
  endif()
endforeach()
