# SPDX-License-Identifier: Apache-2.0
# tessera_add_library(NAME <lib> SOURCES ... DEPS ...)
#   Creates tessera_<lib> with alias tessera::<lib>, public headers in ./include.
function(tessera_add_library)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(tessera_${A_NAME} ${A_SOURCES})
  add_library(tessera::${A_NAME} ALIAS tessera_${A_NAME})
  target_include_directories(tessera_${A_NAME} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(tessera_${A_NAME} PUBLIC ${A_DEPS} PRIVATE tessera_warnings ${A_PRIVATE_DEPS})
endfunction()

# tessera_add_test(NAME <exe> SOURCES ... DEPS ... [LABELS gpu multiprocess sanitize] [TIMEOUT s])
#   One GoogleTest executable; every TEST is registered with ctest via gtest_discover_tests.
#   Label sanitize: part of the subset CI runs under ASan+UBSan (built by the target
#   tessera_sanitize_tests; together they cover every library).
#   TESSERA_DATA_DIR (the repository's data/ folder) and TESSERA_SOURCE_DIR are compiled in.
function(tessera_add_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} tessera_test_support GTest::gtest GTest::gtest_main
                        tessera_warnings)
  include(GoogleTest)
  gtest_discover_tests(${A_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${A_TIMEOUT})
  if("sanitize" IN_LIST A_LABELS AND TARGET tessera_sanitize_tests)
    add_dependencies(tessera_sanitize_tests ${A_NAME})
  endif()
  if(A_LABELS)
    # A list cannot pass through gtest_discover_tests' PROPERTIES (CMake 3.25 keeps the first
    # label only, CMake 4 warns and drops the rest): label the discovered tests in a file ctest
    # includes after the discovery script, which leaves their names in ${A_NAME}_TESTS.
    set(_inc "${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_labels.cmake")
    file(WRITE "${_inc}" "if(${A_NAME}_TESTS)\n  set_tests_properties(\${${A_NAME}_TESTS} "
                         "PROPERTIES LABELS \"${A_LABELS}\")\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_inc}")
  endif()
endfunction()
