# Compiler set-up shared by every target: warnings, ccache, sanitizers, fuzzing.

find_program(INFERGATE_CCACHE ccache)
if(INFERGATE_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER ${INFERGATE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${INFERGATE_CCACHE})
endif()

add_compile_options(-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)

if(INFERGATE_SANITIZE)
  add_compile_options(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(INFERGATE_SANITIZED=1)
endif()

if(INFERGATE_TSAN)
  if(INFERGATE_SANITIZE OR INFERGATE_FUZZ)
    message(FATAL_ERROR "INFERGATE_TSAN=ON excludes INFERGATE_SANITIZE and INFERGATE_FUZZ")
  endif()
  add_compile_options(-O1 -g -fno-omit-frame-pointer -fsanitize=thread)
  add_link_options(-fsanitize=thread)
  add_compile_definitions(INFERGATE_SANITIZED=1 INFERGATE_TSAN=1)
endif()

if(INFERGATE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "INFERGATE_FUZZ=ON needs clang: configure with CXX=clang++-14 CC=clang-14")
  endif()
  # Everything is instrumented for coverage; only the fuzz drivers link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
endif()

# infergate_add_test(NAME SOURCES... LIBS ...): one gtest binary, its tests discovered by ctest.
function(infergate_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT INFERGATE_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES}
    ${PROJECT_SOURCE_DIR}/tests/support/await_library_threads.cc)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    INFERGATE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
                       PROPERTIES ENVIRONMENT "INFERGATE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
