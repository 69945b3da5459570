# terngrad-bench: ctest script (test tg_cli_errors, label "reliability"): runs the built `terngrad` with
# bad options, bad values and missing files for every subcommand it has, and checks each gives exit
# code 2 and one clear line on stderr (naming the problem; no stack trace, abort, half a page or a
# 309-digit bound).
#   cmake -DTERNGRAD=build/<preset>/apps/terngrad -P fuzz/cli_errors.cmake
# Allowed besides the error line: CLI11's hint "Run with --help ... for more information.".
if(NOT TERNGRAD OR NOT EXISTS "${TERNGRAD}")
  message(FATAL_ERROR "cli_errors.cmake: TERNGRAD=${TERNGRAD} is not a built terngrad program")
endif()

set(failures 0)
set(cases 0)

# expect_usage_error(<substring the error line must contain> <args>...)
function(expect_usage_error needle)
  set(args ${ARGN})
  execute_process(COMMAND "${TERNGRAD}" ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "${args}")
  set(problems "")
  if(NOT rc STREQUAL "2")
    string(APPEND problems " exit code '${rc}' (want 2);")
  endif()
  string(STRIP "${err}" err_stripped)
  string(REPLACE ";" "," err_for_lines "${err_stripped}")  # a ';' would split a CMake list
  string(REPLACE "\n" ";" lines "${err_for_lines}")
  set(error_lines "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^Run with --help.* for more information\\.$" OR line STREQUAL "")
      continue()
    endif()
    list(APPEND error_lines "${line}")
  endforeach()
  list(LENGTH error_lines n_lines)
  if(NOT n_lines EQUAL 1)
    string(APPEND problems " ${n_lines} error lines on stderr (want 1);")
  endif()
  foreach(line IN LISTS error_lines)
    string(LENGTH "${line}" len)
    if(len GREATER 500)
      string(APPEND problems " an error line of ${len} characters (want at most 500);")
    endif()
    if(line MATCHES "[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]")
      string(APPEND problems " a number of 25 or more digits in the message (not a clear bound);")
    endif()
  endforeach()
  if(err MATCHES "terminate called|what\\(\\):|Aborted|Segmentation|core dumped|Traceback|#0 ")
    string(APPEND problems " a crash or stack trace on stderr;")
  endif()
  string(FIND "${err}" "${needle}" at)
  if(at EQUAL -1)
    string(APPEND problems " stderr does not name '${needle}';")
  endif()
  math(EXPR n "${cases} + 1")
  set(cases ${n} PARENT_SCOPE)
  if(problems)
    math(EXPR f "${failures} + 1")
    set(failures ${f} PARENT_SCOPE)
    message("FAIL: terngrad ${shown}:${problems}\n  stderr: ${err}")
  else()
    message("ok:   terngrad ${shown}  ->  ${err_stripped}")
  endif()
endfunction()

# Subcommands this build has, from the top-level help.
execute_process(COMMAND "${TERNGRAD}" --help OUTPUT_VARIABLE help RESULT_VARIABLE help_rc TIMEOUT 30)
if(NOT help_rc EQUAL 0)
  message(FATAL_ERROR "terngrad --help exited with ${help_rc}")
endif()
string(REGEX REPLACE ".*Subcommands:\n" "" sub_text "${help}")
string(REPLACE "\n" ";" sub_lines "${sub_text}")
set(subcommands "")
foreach(line IN LISTS sub_lines)
  if(line MATCHES "^  ([a-z][a-z0-9-]*)( |$)")
    list(APPEND subcommands "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(FIND subcommands demo has_demo)
if(has_demo EQUAL -1)
  message(FATAL_ERROR "terngrad --help lists no 'demo' subcommand: ${help}")
endif()
message("subcommands: ${subcommands}")

# The program itself.
expect_usage_error("subcommand")
expect_usage_error("no-such-subcommand" no-such-subcommand)

# Every subcommand: an unknown option, and help still exits 0 (checked above for the program).
foreach(sub IN LISTS subcommands)
  expect_usage_error("--no-such-option" ${sub} --no-such-option)
endforeach()

# Per-subcommand values and files (only for the subcommands this build has). Each run starts the
# program (about 1 s with LibTorch linked), so the list stays short.
foreach(sub IN LISTS subcommands)
  if(sub STREQUAL "demo")
    expect_usage_error("--elements" demo --elements 0)
    expect_usage_error("--n" demo --n 0)  # the old name keeps its check
    expect_usage_error("3bit" demo --packing 3bit)
    expect_usage_error("--c" demo --c -1)
    expect_usage_error("--seed" demo --seed)
    expect_usage_error("--seed" demo --seed -1)                    # was 2^64-1
    expect_usage_error("--seed" demo --seed 18446744073709551616)  # was 2^64-1
  elseif(sub STREQUAL "verify")
    expect_usage_error("--profile" verify --profile bogus)
    expect_usage_error("/nonexistent/codec" verify --impl "exec:/nonexistent/codec" --no-progress)
    expect_usage_error("bogus" verify --impl bogus --no-progress)
    expect_usage_error("--exec-timeout" verify --exec-timeout nan --no-progress)  # NaN turned the timeout off
  elseif(sub STREQUAL "compare")
    expect_usage_error("--elements" compare reference optimized --elements 0)
    expect_usage_error("--draws" compare reference optimized --draws 5000)
  elseif(sub STREQUAL "converge")
    expect_usage_error("--data-size" converge --data-size 1)
    expect_usage_error("--samples" converge --samples 1)  # the old name keeps its check
  elseif(sub STREQUAL "train")
    expect_usage_error("--progress" train --progress --no-progress --steps 1)
    expect_usage_error("/nonexistent/checkpoint" train --resume /nonexistent/checkpoint)
    expect_usage_error("/nonexistent/data" train --data-dir /nonexistent/data)
    expect_usage_error("--lr" train --lr -1)
    expect_usage_error("--epochs" train --epochs nan)
    # options that take any number >= 0: a negative or infinite value is named, with no DBL_MAX bound
    expect_usage_error("--epochs: must be a finite number >= 0, got -1" train --epochs -1)
    expect_usage_error("--epochs" train --epochs inf)
    expect_usage_error("--eval-every" train --eval-every -3)
    expect_usage_error("--checkpoint-every" train --checkpoint-every 1e400)
    expect_usage_error("--gamma" train --gamma -0.5)
    expect_usage_error("--power" train --power inf)
    expect_usage_error("--live-check" train --live-check -1)
    expect_usage_error("--dump-step" train --dump-step -2)
    expect_usage_error("--timeout-s" train --timeout-s nan)
    expect_usage_error("--resume" train --resume /dev/zero)  # not a regular file
  elseif(sub STREQUAL "launch")
    expect_usage_error("--nproc" launch --nproc 0)
    expect_usage_error("--grace-s" launch --grace-s nan)
  elseif(sub STREQUAL "report")
    expect_usage_error("/nonexistent/reports" report --reports /nonexistent/reports)
    expect_usage_error("--note" report --note /dev/zero)  # reached 7.5 GB
  endif()
endforeach()

message("${cases} cases, ${failures} failed")
if(failures GREATER 0)
  message(FATAL_ERROR "terngrad: ${failures} of ${cases} bad invocations did not give exit code 2 and one clear stderr line")
endif()
