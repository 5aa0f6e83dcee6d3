# Fails when a doctest suite has a test case whose name CTest cannot register whole. doctest_discover_tests turns
# every test case into one CTest test that runs the suite with --test-case=<name>, and a ';' in the name is CMake's
# list separator: the name is split into two CTest tests whose filters match no test case, so both "pass" while the
# test case never runs (session 13 found seven such cases, one its own). Commas are escaped by the discovery script.
#   cmake -DBIN=<suite executable> -P check_test_names.cmake
if(NOT BIN)
  message(FATAL_ERROR "usage: cmake -DBIN=<doctest executable> -P check_test_names.cmake")
endif()
execute_process(COMMAND "${BIN}" --list-test-cases --no-version=true RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BIN} --list-test-cases failed (${rc}): ${err}")
endif()
string(FIND "${out}" "test cases" listed)
if(listed EQUAL -1)
  message(FATAL_ERROR "${BIN} listed no test cases:\n${out}")
endif()
string(REPLACE ";" "<SEMICOLON>" escaped "${out}")
string(REPLACE "\n" ";" lines "${escaped}")
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "<SEMICOLON>")
    string(REPLACE "<SEMICOLON>" ";" line "${line}")
    string(APPEND bad "  ${line}\n")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "test case names with ';' (CTest would split them and run nothing):\n${bad}")
endif()
message(STATUS "${BIN}: no test case name with ';'")
