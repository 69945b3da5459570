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

# A scratch folder for the cases that check what a refused run leaves behind; removed at the end.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(scratch_root "$ENV{TMPDIR}")
else()
  set(scratch_root "/tmp")
endif()
string(RANDOM LENGTH 10 scratch_tag)
set(scratch "${scratch_root}/tg-cli-errors-${scratch_tag}")
file(MAKE_DIRECTORY "${scratch}")

# Shared by the case functions below (macros: they run in the calling function's scope).
# Every path in `paths` must be absent after the case; one that exists is a problem, and is removed.
macro(check_absent paths)
  foreach(path IN ITEMS ${paths})
    if(EXISTS "${path}")
      string(APPEND problems " left ${path} behind;")
      file(REMOVE_RECURSE "${path}")
    endif()
  endforeach()
endmacro()
# Counts the case (cases, failures, set in the calling function's parent scope) and prints it: FAIL with
# `detail`, or ok with `ok_tail`.
macro(tally_case detail ok_tail)
  string(LENGTH "${shown}" shown_length)
  if(shown_length GREATER 400)  # a 20,000-character path: its start and its end
    string(SUBSTRING "${shown}" 0 200 shown_head)
    math(EXPR tail_at "${shown_length} - 195")
    string(SUBSTRING "${shown}" ${tail_at} 195 shown_tail)
    set(shown "${shown_head} ... ${shown_tail}")
  endif()
  math(EXPR n "${cases} + 1")
  set(cases ${n} PARENT_SCOPE)
  if(problems)
    math(EXPR f "${failures} + 1")
    set(failures ${f} PARENT_SCOPE)
    message("FAIL: terngrad ${shown}:${problems}${detail}")
  else()
    message("ok:   terngrad ${shown}${ok_tail}")
  endif()
endmacro()

# expect_usage_error(<substring the error line must contain> <args>... [ABSENT <path>...])
# With ABSENT, the refusal must also come before any work (nothing on stdout) and leave none of the paths
# (no output file, no empty folder).
function(expect_usage_error needle)
  set(args ${ARGN})
  set(absent "")
  set(up_front FALSE)
  list(FIND args ABSENT at_absent)
  if(NOT at_absent EQUAL -1)
    set(up_front TRUE)
    math(EXPR after "${at_absent} + 1")
    list(LENGTH args n_args)
    if(after LESS n_args)
      list(SUBLIST args ${after} -1 absent)
    endif()
    list(SUBLIST args 0 ${at_absent} args)
  endif()
  execute_process(COMMAND "${TERNGRAD}" ${args} WORKING_DIRECTORY "${scratch}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "${args}")
  set(problems "")
  if(NOT rc STREQUAL "2")
    string(APPEND problems " exit code '${rc}' (want 2);")
  endif()
  if(up_front AND NOT out STREQUAL "")
    string(APPEND problems " output on stdout before the refusal (want none: the check comes before the work);")
  endif()
  check_absent("${absent}")
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
  tally_case("\n  stderr: ${err}" "  ->  ${err_stripped}")
endfunction()

# expect_run(RC <exit code> ARGS <args>... [CONTAINS <text>...] [LACKS <text>...] [LACKS_REGEX <regex>...]
#            [ABSENT <path>...]): a run that is not an error (help texts, edge values, --json -), run in the scratch
# folder: its exit code, what its stdout must and must not contain, and the paths it must not leave.
function(expect_run)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "RC" "ARGS;CONTAINS;LACKS;LACKS_REGEX;ABSENT")
  execute_process(COMMAND "${TERNGRAD}" ${arg_ARGS} WORKING_DIRECTORY "${scratch}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(REPLACE ";" " " shown "${arg_ARGS}")
  string(REPLACE "\n" " " flat "${out}")
  string(REGEX REPLACE " +" " " flat "${flat}")  # help texts wrap: compare with single spaces
  set(problems "")
  if(NOT rc STREQUAL "${arg_RC}")
    string(APPEND problems " exit code '${rc}' (want ${arg_RC});")
  endif()
  foreach(text IN LISTS arg_CONTAINS)
    string(FIND "${flat}" "${text}" at)
    if(at EQUAL -1)
      string(APPEND problems " stdout lacks '${text}';")
    endif()
  endforeach()
  foreach(text IN LISTS arg_LACKS)
    string(FIND "${flat}" "${text}" at)
    if(NOT at EQUAL -1)
      string(APPEND problems " stdout has '${text}';")
    endif()
  endforeach()
  foreach(regex IN LISTS arg_LACKS_REGEX)
    if(flat MATCHES "${regex}")
      string(APPEND problems " stdout matches '${regex}';")
    endif()
  endforeach()
  check_absent("${arg_ABSENT}")
  string(SUBSTRING "${out}" 0 600 head)
  tally_case("\n  stdout: ${head}\n  stderr: ${err}" "")
endfunction()

# Runs `terngrad <args>` and starts `problems` (in the caller's scope) with what is wrong for a run that must end in
# an error naming `needle`: an exit code other than 2, a stderr without the needle. Sets rc, out, err and shown.
macro(run_to_an_error needle)
  set(args ${ARGN})
  execute_process(COMMAND "${TERNGRAD}" ${args} WORKING_DIRECTORY "${scratch}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(REPLACE ";" " " shown "${args}")
  set(problems "")
  if(NOT rc STREQUAL "2")
    string(APPEND problems " exit code '${rc}' (want 2);")
  endif()
  string(FIND "${err}" "${needle}" at)
  if(at EQUAL -1)
    string(APPEND problems " stderr does not name '${needle}';")
  endif()
endmacro()

# expect_stale_removed(<substring of the error> <args>... REPORTS <path>...): a report at each path, left by an
# earlier run, must be gone after a run that ends in an error (exit 2), and stderr must say so, so that a
# pipeline reading the report cannot take the old result for this run's. A symbolic link's target goes. Each
# earlier report reads as one (a JSON object, JUnit XML, a table of terngrad's): a file of another kind at an
# output path stays (expect_non_report_kept).
macro(write_earlier_report path)
  if(path MATCHES "\\.json$")
    file(WRITE "${path}" "{\"earlier\": \"a report of an earlier run\"}\n")
  elseif(path MATCHES "curves\\.csv$")  # converge's, in its --out folder
    file(WRITE "${path}" "method,t,dist2_mean,dist2_p10,dist2_p90,dist2_predicted,loss_gap,update_sq,assumption3,grad_sq,var_measured,var_identity\nfloat,0,1,1,1,,,,,,,\n")
  elseif(path MATCHES "\\.xml$")
    file(WRITE "${path}" "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"terngrad verify\">\n</testsuites>\n")
  else()
    file(WRITE "${path}" "terngrad calibrate: a report of an earlier run\n")
  endif()
endmacro()
function(expect_stale_removed needle)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "REPORTS")
  set(args ${arg_UNPARSED_ARGUMENTS})
  foreach(path IN LISTS arg_REPORTS)
    write_earlier_report("${path}")
  endforeach()
  run_to_an_error("${needle}" ${args})
  foreach(path IN LISTS arg_REPORTS)
    if(EXISTS "${path}")
      string(APPEND problems " the earlier report ${path} is still there;")
      file(REMOVE "${path}")
    else()
      get_filename_component(name "${path}" NAME)
      string(FIND "${err}" "removed" said)
      if(said EQUAL -1)
        string(APPEND problems " stderr does not say that ${name} was removed;")
      endif()
    endif()
  endforeach()
  tally_case("\n  stderr: ${err}" "  (earlier reports removed)")
endfunction()

# expect_non_report_kept(<substring of the error> <args>... KEPT <path>): a file at an output path that does not read
# as a report (notes, an input) is left as it was by a run that ends in an error.
function(expect_non_report_kept needle)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "KEPT" "")
  set(args ${arg_UNPARSED_ARGUMENTS})
  file(WRITE "${arg_KEPT}" "notes, not a report\n")
  run_to_an_error("${needle}" ${args})
  if(NOT EXISTS "${arg_KEPT}")
    string(APPEND problems " ${arg_KEPT}, not a report, was removed;")
  else()
    file(READ "${arg_KEPT}" kept)
    if(NOT kept STREQUAL "notes, not a report\n")
      string(APPEND problems " ${arg_KEPT}, not a report, was changed;")
    endif()
    file(REMOVE "${arg_KEPT}")
  endif()
  tally_case("\n  stderr: ${err}" "  (a file that is not a report kept)")
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
expect_usage_error("unknown subcommand 'no-such-subcommand'; see terngrad --help" no-such-subcommand)
expect_usage_error("unknown subcommand 'verfy' (did you mean verify?)" verfy)  # a typo gets the nearest name
# --version is a request, not an error: exit 0 with the version on stdout
expect_run(RC 0 ARGS --version CONTAINS "terngrad " "(source ")

# Every subcommand: an unknown option, and help still exits 0 (checked above for the program).
foreach(sub IN LISTS subcommands)
  expect_usage_error("terngrad ${sub}: unknown option --no-such-option; see terngrad ${sub} --help" ${sub} --no-such-option)
endforeach()

# Per-subcommand values and files (only for the subcommands this build has). Each run starts the
# program (about 1 s with LibTorch linked), so the list stays short.
foreach(sub IN LISTS subcommands)
  if(sub STREQUAL "demo")
    expect_usage_error("--elements" demo --elements 0)
    expect_usage_error("unknown option --elemnts (did you mean --elements?)" demo --elemnts 5)
    expect_usage_error("terngrad demo: unexpected argument '5'" demo 5)
    expect_usage_error("--n" demo --n 0)  # the old name keeps its check
    expect_usage_error("3bit" demo --packing 3bit)
    expect_usage_error("--c" demo --c -1)
    expect_usage_error("--c: must be a number in [0.001" demo --clip clip --c 1e-320)  # was: scalar 0, nothing kept
    expect_usage_error("demo: --c is used only with --clip clip or saturate; this run would ignore it" demo --c 0.5)
    expect_usage_error("--seed" demo --seed)
    expect_usage_error("--seed" demo --seed -1)                    # was 2^64-1
    expect_usage_error("--seed" demo --seed 18446744073709551616)  # was 2^64-1
    # whole numbers are decimal (CLI11 read 010 as octal 8 and refused 09); a hexadecimal number is refused
    expect_run(RC 0 ARGS demo --seed 010 --elements 16 --draws 2 CONTAINS "seed 10,")
    expect_run(RC 0 ARGS demo --seed 09 --elements 16 --draws 2 CONTAINS "seed 9,")
    expect_usage_error("--c: must be a decimal number, got '0x10'" demo --c 0x10)
    # one element: the header outweighs the body, and the identity is 0 (was "ratio -nan", "0.12x smaller")
    expect_run(RC 0 ARGS demo --elements 1 --draws 2 CONTAINS "8.25x larger" "every draw is exact" LACKS "-nan" "smaller")
  elseif(sub STREQUAL "verify")
    expect_usage_error("--profile" verify --profile bogus)
    expect_usage_error("unknown option --alhpa (did you mean --alpha?)" verify --alhpa=0.1)  # --name=value too
    expect_usage_error("/nonexistent/codec" verify --impl "exec:/nonexistent/codec" --no-progress)
    expect_usage_error("bogus" verify --impl bogus --no-progress)
    expect_usage_error("--exec-timeout" verify --exec-timeout nan --no-progress)  # NaN turned the timeout off
    # --exec-timeout bounds an external implementation's calls: refused where none runs, taken where one does
    expect_usage_error("verify: --exec-timeout is used only with an external implementation" verify --impl reference --exec-timeout 5)
    expect_usage_error("--exec-timeout is used only with" verify --self-test --example none --exec-timeout 5)
    expect_usage_error("--example is used only with --self-test" verify --example none --profile quick)
    expect_usage_error("--example is used only with --self-test" verify --list-mutants --example none)
    expect_usage_error("/nonexistent/codec" verify --impl "exec:/nonexistent/codec" --exec-timeout 5 --no-progress)
    # outputs: checked before the run, named as what they are, and no folder made for a refused run
    expect_usage_error("--json ${scratch} is a folder, not a file" verify --json "${scratch}" --profile quick --no-progress
                       ABSENT "${scratch}/-")
    expect_usage_error("--junit ${scratch} is a folder" verify --junit "${scratch}" --profile quick --no-progress ABSENT)
    expect_usage_error("bogus" verify --json "${scratch}/nd1/a/b/x.json" --impl bogus ABSENT "${scratch}/nd1")
    expect_usage_error("cannot create folder ${CMAKE_CURRENT_LIST_FILE}/x" verify --json "${CMAKE_CURRENT_LIST_FILE}/x/r.json"
                       --profile quick --no-progress ABSENT)
    expect_usage_error("cannot both go to stdout" verify --json - --junit - --profile quick ABSENT)
    # two outputs naming one file are refused, not half-honoured (empty paths: ctest tg_cli_empty_paths)
    expect_usage_error("--json and --junit name the same file" verify --json "${scratch}/same.out" --junit
                       "${scratch}/./same.out" --profile quick --no-progress ABSENT "${scratch}/same.out")
    # options that would be silently ignored
    expect_usage_error("--json excludes --list-mutants" verify --list-mutants --json "${scratch}/m.json" ABSENT "${scratch}/m.json")
    expect_usage_error("--verbose requires --self-test" verify --verbose --profile quick)
    expect_usage_error("--supports" verify --samples "${scratch}/g.npy" "${scratch}/v.npy" --supports clip)
    expect_usage_error("--skip lists 'cross' twice" verify --skip cross,cross --profile quick ABSENT)
    # an empty item in a comma list is refused, not dropped (CLI11 dropped it: --skip cross, skipped cross only)
    expect_usage_error("verify: --skip has an empty item in 'cross,'" verify --skip cross, --profile quick)
    # a list given twice was merged (model --workers 1 --workers 2 ran both); now refused as other options are
    expect_usage_error("verify: --skip is given more than once" verify --skip cross --skip=streams --profile quick)
    expect_usage_error("model: --workers is given more than once" model --net lenet --compute-s 1 --workers 1 --workers 2)
    expect_usage_error("verify: --skip has an empty item in ',cross'" verify --skip=,cross --profile quick)
    expect_usage_error("verify: --skip is given an empty value" verify --skip= --profile quick)
    # any other option given "" (an unset variable) is named as such, before its value's own checks
    expect_usage_error("verify: --profile is given an empty value (an unset variable?" verify --profile= ABSENT)
    expect_usage_error("calibrate needs a correct implementation" calibrate --impl mutant:sign-error ABSENT)
    expect_usage_error("compare: --no-shared given 2 times (give it once)" compare reference optimized --no-shared --no-shared ABSENT)
    expect_usage_error("verify: --self-test given 3 times" verify --self-test --self-test --self-test ABSENT)
    expect_usage_error("report: --python is given an empty value" report --python= ABSENT)
    expect_usage_error("train: --data-dir is given an empty value" train --data mnist --data-dir= ABSENT)
    # an output that names an input would replace it (checked before the inputs are read)
    file(WRITE "${scratch}/in-g.npy" "not read")
    file(WRITE "${scratch}/in-v.npy" "not read")
    expect_usage_error("--scalar 1e-46 is below the smallest positive float32" verify --samples "${scratch}/in-g.npy"
                       "${scratch}/in-v.npy" --scalar 1e-46)
    expect_usage_error("--samples: the draws file ${scratch}/./in-v.npy is given for layer 0 and for layer 1" verify
                       --samples "${scratch}/in-g.npy" "${scratch}/in-v.npy" --samples "${scratch}/in-g.npy" "${scratch}/./in-v.npy")
    expect_usage_error("--json ${scratch}/in-g.npy is the input file given to --samples" verify --samples
                       "${scratch}/in-g.npy" "${scratch}/in-v.npy" --json "${scratch}/in-g.npy")
    expect_usage_error("--junit ${scratch}/./in-v.npy is the input file given to --samples" verify --samples
                       "${scratch}/in-g.npy" "${scratch}/in-v.npy" --junit "${scratch}/./in-v.npy")
    # the same through a folder that does not exist yet (made before the write, so "new/../x" is "x"), relative paths
    # whose first part does not exist, and a link reached through ".." (weakly_canonical alone left these unequal)
    expect_usage_error("--json nd12/../in-g.npy is the input file given to --samples" verify --samples
                       "${scratch}/in-g.npy" "${scratch}/in-v.npy" --json "nd12/../in-g.npy" ABSENT "${scratch}/nd12")
    file(CREATE_LINK "${scratch}/in-g.npy" "${scratch}/in-link.npy" SYMBOLIC)
    expect_usage_error("--json nd13/../in-link.npy is the input file given to --samples" verify --samples
                       "${scratch}/in-g.npy" "${scratch}/in-v.npy" --json "nd13/../in-link.npy" ABSENT "${scratch}/nd13")
    file(REMOVE "${scratch}/in-g.npy" "${scratch}/in-v.npy" "${scratch}/in-link.npy")
    expect_usage_error("--json and --junit name the same file, ./rel.out" verify --json "./rel.out" --junit "rel.out"
                       --profile quick --no-progress ABSENT "${scratch}/rel.out")
    expect_usage_error("--json and --junit name the same file, nd14/../rel.out" verify --json "nd14/../rel.out" --junit
                       "rel.out" --profile quick --no-progress ABSENT "${scratch}/rel.out" "${scratch}/nd14")
    expect_non_report_kept("external codec exited with status 1" verify --profile quick --no-progress --impl exec:false
                           --json "${scratch}/notes.json" KEPT "${scratch}/notes.json")
    # a run that ends in an error leaves no report of an earlier run at its paths (the program fails mid-run;
    # the implementation is unavailable; a link's target)
    # (labelled as the external program's failure, not by a codec error code)
    expect_stale_removed("error (external codec): external codec exited with status 1" verify --profile quick
                         --no-progress --impl exec:false --json "${scratch}/old.json" --junit "${scratch}/old.xml"
                         REPORTS "${scratch}/old.json" "${scratch}/old.xml")
    # a program that fails after a long output: the error line keeps its last words (the exception that ended it),
    # shortening the middle of the line (the command and the start of the output)
    file(WRITE "${scratch}/chatty.sh" "for i in $(seq 1 300); do echo \"traceback line $i\" >&2; done\n"
                                      "echo 'FinalError: the last line' >&2\nexit 1\n")
    expect_usage_error("FinalError: the last line" verify --profile quick --no-progress --impl "exec:sh ${scratch}/chatty.sh")
    file(REMOVE "${scratch}/chatty.sh")
    file(CREATE_LINK "${scratch}/target.json" "${scratch}/link.json" SYMBOLIC)
    expect_stale_removed("external codec exited with status 1" verify --profile quick --no-progress --impl exec:false
                         --json "${scratch}/link.json" REPORTS "${scratch}/target.json")
    file(REMOVE "${scratch}/link.json")
    # --json -: the JSON on stdout instead of the table, no file named "-"
    expect_run(RC 0 ARGS verify --profile quick --no-progress --skip streams,collision,cross,aggregate,independence --json -
               CONTAINS "\"runs\"" LACKS "verdict" ABSENT "${scratch}/-")
    # help: the real default of --alpha (full: 1e-9), no "=0" outside the range
    expect_run(RC 0 ARGS verify --help CONTAINS "1e-9 for full" LACKS "0.5]=0")
    expect_run(RC 0 ARGS verify --help CONTAINS "3.4e+38]=none" LACKS "3.4e+38]=-1")
    # an option given twice is named as such (CLI11 said "At Most 1 required but received 2")
    expect_usage_error("--profile given 2 times (give it once)" verify --profile quick --profile ci)
  elseif(sub STREQUAL "compare")
    expect_usage_error("--elements" compare reference optimized --elements 0)
    # an implementation that is wrong is named as the argument it is: A or B, not --impl
    expect_usage_error("implementation A exec: needs a command" compare exec: optimized --elements 64)
    expect_usage_error("unknown implementation B 'fastest'" compare reference fastest --elements 64)
    expect_usage_error("compare: --exec-timeout is used only with an external implementation" compare reference optimized --elements 64 --exec-timeout 5)
    expect_usage_error("--draws" compare reference optimized --draws 5000)
    expect_usage_error("--json ${scratch} is a folder" compare reference optimized --elements 64 --json "${scratch}" ABSENT)
    # --clip takes one comma-separated list: the implementations after it stay A and B (100 family cases and the
    # keys case); a mode listed twice is refused, not run twice
    expect_run(RC 0 ARGS compare --clip clip,saturate reference optimized --elements 64 --draws 1 --no-progress
               CONTAINS "IDENTICAL (101 cases")
    expect_usage_error("compare: clipping mode 'none' listed twice" compare reference optimized --clip none,none)
    expect_usage_error("--alpha requires --stat" compare reference optimized --alpha 0.1)  # was ignored
    expect_usage_error("--clip: 'bogus' not in" compare reference optimized --clip none,bogus)
    expect_usage_error("--elements excludes --d" compare reference optimized --d 10 --elements 20)
    expect_stale_removed("external codec exited with status 1" compare reference exec:false --elements 64 --draws 1
                         --no-progress --json "${scratch}/old.json" REPORTS "${scratch}/old.json")
    expect_run(RC 0 ARGS compare reference optimized --elements 64 --draws 1 --no-progress --json -
               CONTAINS "\"cases\"" ABSENT "${scratch}/-")
  elseif(sub STREQUAL "converge")
    expect_usage_error("--data-size" converge --data-size 1)
    expect_usage_error("--samples" converge --samples 1)  # the old name keeps its check
    expect_usage_error("--out: cannot create output folder" converge --steps 2 --seeds 1 --out "${CMAKE_CURRENT_LIST_FILE}")
    expect_usage_error("--methods lists 'tern' twice" converge --methods tern,tern ABSENT)
    expect_usage_error("converge: --methods has an empty item in 'float,,tern'" converge --methods float,,tern)
    expect_usage_error("converge: --methods has an empty item in 'float, ,tern'" converge --methods "float, ,tern")
    expect_usage_error("--gamma0: must be a number in [1e-12, 1e+06]" converge --gamma0 1e-320)
    expect_usage_error("--t0: must be a number in [1e-06, 1e+12]" converge --t0 1e-320)
    expect_usage_error("--gamma: must be a number in [1e-12, 1e+06]" converge --schedule const --gamma 1e300)
    expect_usage_error("--alpha is used only with --checks, --assumption3, or a clipped method" converge --methods float
                       --alpha 0.01)
    expect_usage_error("--beta is used only with --checks" converge --problem logistic --methods tern-clip --beta 0.01)
    expect_usage_error("is the file summary.json that --out" converge --out "${scratch}/cv" --json "${scratch}/cv/summary.json"
                       ABSENT "${scratch}/cv")
    expect_usage_error("--json ./cvz/curves.csv is the file curves.csv that --out cvz" converge --out cvz --json
                       "./cvz/curves.csv" ABSENT "${scratch}/cvz")
    expect_usage_error("--json nd15/../cvz/curves.csv is the file curves.csv that --out cvz" converge --out cvz --json
                       "nd15/../cvz/curves.csv" ABSENT "${scratch}/cvz" "${scratch}/nd15")
    # --json is checked with --out, before the runs (was: curves.csv and summary.json written, then the error)
    expect_usage_error("--json ${scratch} is a folder" converge --steps 2 --seeds 1 --no-progress --out "${scratch}/cdir"
                       --json "${scratch}" ABSENT "${scratch}/cdir")
    # and the results an earlier run left in --out (an interrupted run the same: the signal handler removes them)
    file(MAKE_DIRECTORY "${scratch}/a3dir")
    expect_stale_removed("--assumption3 needs --seeds >= 4" converge --assumption3 --seeds 2 --out "${scratch}/a3dir"
                         --json "${scratch}/old.json" REPORTS "${scratch}/old.json" "${scratch}/a3dir/summary.json"
                         "${scratch}/a3dir/curves.csv")
    file(REMOVE_RECURSE "${scratch}/a3dir")
    expect_usage_error("--assumption3 needs --seeds >= 4" converge --assumption3 --seeds 2 --out "${scratch}/a3dir"
                       ABSENT "${scratch}/a3dir")
    expect_usage_error("would pass 2^64 - 1" converge --seed 18446744073709551615 --seeds 2 --steps 2 --out "${scratch}/sdir"
                       ABSENT "${scratch}/sdir")
    # the two files of --out are checked before the runs (was: curves.csv written, then "summary.json is a folder")
    file(MAKE_DIRECTORY "${scratch}/hdir/summary.json")
    expect_usage_error("summary.json is a folder" converge --steps 2 --seeds 1 --methods float --no-progress
                       --out "${scratch}/hdir" ABSENT "${scratch}/hdir/curves.csv")
    file(REMOVE_RECURSE "${scratch}/hdir")
    # --json is written first: a full disk there leaves no folder (was: curves.csv and summary.json written)
    if(EXISTS /dev/full)
      expect_usage_error("cannot write /dev/full" converge --steps 2 --seeds 1 --methods float --no-progress
                         --out "${scratch}/fdir" --json /dev/full ABSENT "${scratch}/fdir")
    endif()
    expect_usage_error("--c: must be a number in [0.001" converge --c 1e-320 --methods tern-clip)  # a bound of 0
    expect_usage_error("--tail-dof: must be 0 (Gaussian) or in [1, 1e6]" converge --tail-dof 0.5)
    # an option the run would not use is refused, not ignored (was: --gamma with the default decay schedule ran
    # that schedule, --lambda on least squares did nothing)
    expect_usage_error("--gamma is used only with --schedule const" converge --gamma 0.1)
    expect_usage_error("--t0 is used only with --schedule decay" converge --schedule const --t0 5)
    expect_usage_error("--lambda is used only with --problem logistic" converge --lambda 0.1)
    expect_usage_error("--noise is used only with --problem lsq or multiscale" converge --problem logistic --noise 1)
    expect_usage_error("--blocks is used only with --problem multiscale" converge --blocks 3)
    expect_usage_error("--c is used only with a clipped method in --methods" converge --methods float,tern --c 2)
    expect_run(RC 0 ARGS converge --schedule const --gamma 0.05 --problem multiscale --blocks 3 --methods float,tern-saturate
               --c 2 --steps 2 --seeds 1 --no-progress --out "${scratch}/used" CONTAINS "tern-saturate")
    file(REMOVE_RECURSE "${scratch}/used")
    expect_run(RC 0 ARGS converge --help CONTAINS "0 (Gaussian features) or in [1, 1e6]" LACKS "--tail-dof FLOAT:FLOAT in [0 - 1e+06]")
  elseif(sub STREQUAL "train")
    expect_usage_error("--progress" train --progress --no-progress --steps 1)
    expect_usage_error("--layerwise: must be true or false" train --layerwise 2)  # read as true
    expect_usage_error("--gamma is used only with --lr-policy inv or step" train --lr-policy fixed --gamma 0.1)
    expect_usage_error("--power is used only with --lr-policy inv" train --lr-policy step --power 0.5)
    expect_usage_error("--momentum is used only with --optimizer momentum" train --optimizer adam --momentum 0.5)
    expect_usage_error("train: --c is used only with --clip clip or saturate" train --c 2)
    expect_usage_error("--packing is used only with --codec terngrad" train --codec float --packing base3)
    expect_usage_error("--shared-scalar is used only with --codec terngrad" train --codec qsgd --shared-scalar false)
    expect_usage_error("--qsgd-levels is used only with --codec qsgd" train --qsgd-levels 3)
    expect_usage_error("--float-exchange is used only with --codec float" train --codec signsgd-ef --float-exchange allgather)
    expect_usage_error("--float-below is used only with a compressing codec" train --codec float --float-below 10)
    expect_usage_error("--live-check-draws is used only with --live-check N (N > 0)" train --live-check-draws 8)
    expect_usage_error("--checkpoint-every requires --checkpoint" train --checkpoint-every 5)
    expect_usage_error("/nonexistent/checkpoint" train --resume /nonexistent/checkpoint)
    expect_usage_error("/nonexistent/data" train --data-dir /nonexistent/data)
    expect_usage_error("--lr" train --lr -1)
    expect_usage_error("--epochs: must be a number in [0, 1e+06], got 1e300" train --data synthetic --epochs 1e300)
    expect_usage_error("unknown option --modle (did you mean --model?)" train --modle lenet)
    expect_usage_error("--model: bogus not in" train --net bogus)  # --net is --model's other name
    expect_usage_error("--epochs" train --epochs nan)
    # number options have finite ranges, named with the value (no DBL_MAX bound; a learning rate LibTorch holds
    # as a float is refused here, not by LibTorch's "cannot be converted to type float without overflow")
    expect_usage_error("--epochs: must be a number in [0, 1e+06], got -1" train --epochs -1)
    expect_usage_error("--json ./trz/steps.csv is the file steps.csv that --out trz" train --data synthetic --steps 1
                       --out trz --json "./trz/steps.csv" ABSENT "${scratch}/trz")
    expect_usage_error("--lr: must be a number in [1e-10, 10000], got 1e39" train --lr 1e39)
    expect_usage_error("--lr: must be a number in [1e-10, 10000], got 1e-320" train --lr 1e-320)
    expect_usage_error("--live-check-alpha: must be a number in [1e-300, 0.5], got 1e-320" train --live-check 1 --live-check-alpha 1e-320)
    expect_usage_error("--epochs" train --epochs inf)
    expect_usage_error("--eval-every" train --eval-every -3)
    expect_usage_error("--checkpoint-every" train --checkpoint-every 1e400)
    expect_usage_error("--gamma" train --gamma -0.5)
    expect_usage_error("--power" train --power inf)
    expect_usage_error("--live-check" train --live-check -1)
    expect_usage_error("--dump-step" train --dump-step -2)
    expect_usage_error("--timeout-s" train --timeout-s nan)
    expect_usage_error("--timeout-s is used only with a multi-process run" train --data synthetic --timeout-s 30)
    expect_usage_error("--master-port is used only with a multi-process run" train --data synthetic --master-port 29999)
    expect_usage_error("--data-dir is used only with --data mnist" train --data synthetic --data-dir "${scratch}")
    # an --out that cannot be a folder fails before the data is loaded (a file of this script stands in)
    expect_usage_error("--out: cannot create output folder" train --steps 1 --out "${CMAKE_CURRENT_LIST_FILE}/run")
    expect_usage_error("--out: cannot create output folder" train --steps 1 --out "${CMAKE_CURRENT_LIST_FILE}")
    expect_usage_error("--resume" train --resume /dev/zero)  # not a regular file
    # --json and --checkpoint are checked before the data is loaded (were: after training), and a refused run
    # leaves no --out folder (was: made before the other checks)
    expect_usage_error("--json ${scratch} is a folder" train --steps 1 --no-progress --json "${scratch}" --out "${scratch}/trun"
                       ABSENT "${scratch}/trun")
    expect_usage_error("--checkpoint ${scratch} is a folder" train --steps 1 --no-progress --checkpoint "${scratch}"
                       --out "${scratch}/trun" ABSENT "${scratch}/trun")
    # the time line once: the one with wait and wire (was also printed without them, before the wire bytes)
    expect_run(RC 0 ARGS train --data synthetic --steps 1 --no-progress CONTAINS "(wait " LACKS_REGEX "communicate [0-9.]+ s, decode")
    expect_usage_error("multiple of 3" train --steps 1 --no-progress --batch 64 --workers 3 --out "${scratch}/trun"
                       ABSENT "${scratch}/trun")
  elseif(sub STREQUAL "calibrate")
    # the seeds --seed .. --seed + N - 1 must not wrap (was: "seeds 18446744073709551615..0")
    expect_usage_error("would pass 2^64 - 1" calibrate --seed 18446744073709551615 --seeds 2 ABSENT)
    # outputs before the runs (was: the table and CALIBRATED printed, then exit 2)
    expect_usage_error("--json ${scratch} is a folder" calibrate --profile quick --seeds 2 --no-progress --json "${scratch}" ABSENT)
    expect_usage_error("--output ${scratch} is a folder" calibrate --profile quick --seeds 2 --no-progress --output "${scratch}"
                       ABSENT)
    expect_usage_error("--json and --output name the same file" calibrate --seeds 2 --no-progress --json "${scratch}/c.out"
                       --output "${scratch}/c.out" ABSENT "${scratch}/c.out")
    expect_usage_error("--exec-timeout" calibrate --seeds 2 --exec-timeout 0)
    expect_usage_error("calibrate: --exec-timeout is used only with an external implementation" calibrate --seeds 2 --exec-timeout 5 ABSENT)
    expect_run(RC 0 ARGS calibrate --profile quick --seeds 2 --no-progress --skip streams,collision,cross,aggregate,independence
               --json - CONTAINS "\"calibrated\"" LACKS "CALIBRATED" ABSENT "${scratch}/-")
  elseif(sub STREQUAL "model")
    expect_usage_error("unknown option --bandwith (did you mean --bandwidth-gbps?)" model --bandwith 1)  # a prefix
    expect_usage_error("model: --workers has an empty item in '1,2,'" model --preset paper --workers 1,2,)
    expect_usage_error("--ps-shards is used only with --topology ps" model --net lenet --compute-s 1 --ps-shards 2)
    expect_usage_error("--warmup is used only with --compute-from" model --net lenet --compute-s 1 --warmup 3)
    expect_usage_error("--ps-shards cannot be combined with --preset paper" model --preset paper --ps-shards 2)
    # --csv is checked with --json, before anything is written (was: x.json written, then the error)
    expect_usage_error("--csv ${scratch} is a folder" model --preset paper --json "${scratch}/x.json" --csv "${scratch}"
                       ABSENT "${scratch}/x.json")
    expect_usage_error("--json and --csv name the same file" model --preset paper --json "${scratch}/x.out" --csv
                       "${scratch}/x.out" ABSENT "${scratch}/x.out")
    # an output that names the input --run-json is refused (was: the run.json replaced by the CSV)
    expect_non_report_kept("is the input file given to --run-json" model --codec-rates none --workers 1 --compute-s 1
                           --run-json "${scratch}/run.json" --csv "${scratch}/run.json" KEPT "${scratch}/run.json")
    expect_non_report_kept("is the input file given to --run-json" model --codec-rates none --workers 1 --compute-s 1
                           --run-json "${scratch}/run.json" --json "${scratch}/run.json" KEPT "${scratch}/run.json")
    expect_usage_error("--net excludes --run-json" model --net lenet --run-json "${CMAKE_CURRENT_LIST_FILE}" --compute-s 1)
    # a step, a link and a codec take time: 0 s of compute (0 img/s, -nan x), 1e300 Gbit/s (read as "must be > 0"),
    # subnormal bandwidths, rates in hexadecimal or after a trailing comma (an empty one: tg_cli_empty_paths)
    expect_usage_error("--compute-s: must be a number in [1e-09" model --net lenet --compute-s 0 --codec-rates none)
    expect_usage_error("--bandwidth-gbps: must be a number in [1e-06, 1e+09], got 1e300" model --net lenet --compute-s 1
                       --codec-rates none --bandwidth-gbps 1e300)
    expect_usage_error("--bandwidth-gbps: must be a number in [1e-06" model --net lenet --compute-s 1 --codec-rates none
                       --bandwidth-gbps 1e-320)
    expect_usage_error("--intra-gbps: must be 0 (unlimited) or a number in [1e-06" model --net lenet --compute-s 1
                       --codec-rates none --gpus-per-node 2 --intra-gbps 1e-320)
    expect_usage_error("--compute-s and --compute-from both give the compute time per step" model --net lenet
                       --compute-s 1 --compute-from "${CMAKE_CURRENT_LIST_FILE}" --codec-rates none)
    expect_usage_error("--intra-gbps is used only with --gpus-per-node N (N > 1" model --net lenet --compute-s 1
                       --codec-rates none --intra-gbps 10)
    expect_usage_error("--intra-latency-us is used only with --gpus-per-node N (N > 1" model --net lenet --compute-s 1
                       --codec-rates none --gpus-per-node 1 --intra-latency-us 5)
    expect_usage_error("--codec-rates: '0x10' is not a decimal number" model --net lenet --compute-s 1 --codec-rates 0x10,1,1,1)
    expect_usage_error("--codec-rates: '' is not a decimal number" model --net lenet --compute-s 1 --codec-rates 1,2,3,4,)
    # a steps.csv cell is one decimal number (was: 0.2abc read as 0.2, 0x10 as 16)
    file(WRITE "${scratch}/steps.csv" "step,compute_s,optimizer_s\n1,0.2abc,0.01\n")
    expect_usage_error("compute_s '0.2abc' is not a decimal number" model --net lenet --compute-from "${scratch}/steps.csv"
                       --warmup 0 --codec-rates none)
    file(WRITE "${scratch}/steps.csv" "step,compute_s,optimizer_s\n1,0.1,0x10\n")
    expect_usage_error("optimizer_s '0x10' is not a decimal number" model --net lenet --compute-from "${scratch}/steps.csv"
                       --warmup 0 --codec-rates none)
    # a file with CRLF line ends is read (was: "has no column optimizer_s")
    file(WRITE "${scratch}/steps.csv" "step,compute_s,optimizer_s\r\n1,0.1,0.01\r\n")
    expect_run(RC 0 ARGS model --net lenet --compute-from "${scratch}/steps.csv" --warmup 0 --codec-rates none --workers 1
               CONTAINS "compute 0.11 s/step")
    # a step of 1e300 s (a damaged file) is refused as --compute-s 1e300 is (was: 6.4e-299 img/s)
    file(WRITE "${scratch}/steps.csv" "step,compute_s,optimizer_s\n1,1e300,0.01\n")
    expect_usage_error("beyond 1e6 s" model --net lenet --compute-from "${scratch}/steps.csv" --warmup 0 --codec-rates none)
    file(REMOVE "${scratch}/steps.csv")
    # a run.json layer of 0 elements, or beyond 2^40, is named with its file (was: "0 parameters", an overflow)
    foreach(numel 0 9223372036854775808)
      file(WRITE "${scratch}/bad-run.json" "{\"layers\": [{\"name\": \"fc\", \"numel\": ${numel}}]}\n")
      expect_usage_error("${scratch}/bad-run.json: layer \"fc\" has numel ${numel}, not in [1, 2^40]" model --compute-s 1
                         --codec-rates none --workers 1 --run-json "${scratch}/bad-run.json")
    endforeach()
    file(REMOVE "${scratch}/bad-run.json")
  elseif(sub STREQUAL "launch")
    expect_usage_error("--nproc" launch --nproc 0)
    expect_usage_error("unknown option --workers (did you mean --nproc?)" launch --workers 2)  # a known other name
    expect_usage_error("--grace-s" launch --grace-s nan)
    # the train options are checked once, before any rank starts: one line, not one per rank
    expect_usage_error("no rank was started: terngrad train: unknown option --bogus" launch --nproc 3 -- --bogus)
    expect_usage_error("no rank was started: terngrad train: --lr: must be a number in" launch --nproc 2 -- --lr 1e9)
  elseif(sub STREQUAL "report")
    expect_usage_error("/nonexistent/reports" report --reports /nonexistent/reports)
    expect_usage_error("--note" report --note /dev/zero)  # reached 7.5 GB
    expect_usage_error("--reports ${CMAKE_CURRENT_LIST_FILE} is not a folder" report --reports "${CMAKE_CURRENT_LIST_FILE}")
    expect_usage_error("--out ${scratch} is a folder" report --reports "${scratch}" --out "${scratch}" --no-live ABSENT)
    expect_run(RC 0 ARGS report --help LACKS "FILE:FILE")
    # one line, from the program (was: the renderer's error, then "... exited with status 2")
    expect_usage_error("--out must name a .md file" report --reports "${scratch}" --out "${scratch}/x.txt" --no-live ABSENT)
  endif()
endforeach()

# Every number option of every subcommand, read from its --help ("--name TYPE..."): a word (a fraction for
# a whole number), and for a whole number with a range the value past its end, each refused naming the option and what it takes
# ("--x: must be a whole number in [1, 4096], got '1.5'"), not "Value abc not in range" or "Could not
# convert". New options join the sweep by themselves.
set(number_options 0)
foreach(sub IN LISTS subcommands)
  execute_process(COMMAND "${TERNGRAD}" ${sub} --help OUTPUT_VARIABLE sub_help RESULT_VARIABLE sub_rc TIMEOUT 30)
  string(REPLACE ";" "," sub_help "${sub_help}")
  string(REPLACE "\n" ";" sub_help_lines "${sub_help}")
  set(help_wide "")
  foreach(line IN LISTS sub_help_lines)
    # descriptions wrap within 100 columns (apps/main.cpp, WrappingFormatter); only a name column with a long
    # list of choices may run past
    string(LENGTH "${line}" help_width)
    if(help_width GREATER 100 AND NOT line MATCHES "^  (-[a-z], )?--[a-z0-9-]+ ")
      set(help_wide "${help_wide} ${help_width} characters: '${line}';")
    endif()
    if(NOT line MATCHES "^  (-[a-z], )?(--[a-z0-9-]+) (UINT|INT|FLOAT)([^ ]*)")
      continue()
    endif()
    set(opt "${CMAKE_MATCH_2}")
    set(type "${CMAKE_MATCH_3}")
    math(EXPR number_options "${number_options} + 1")
    if(NOT type MATCHES "INT")
      expect_usage_error("${opt}: must be " ${sub} ${opt} abc)
    else()  # a fraction reads as a number where a word does not: the stricter case for a whole number
      expect_usage_error("${opt}: must be a whole number" ${sub} ${opt} 1.5)
      if(line MATCHES "INT in \\[(-?[0-9]+), ([0-9]+)\\]")
        math(EXPR past "${CMAKE_MATCH_2} + 1")
        expect_usage_error("${opt}: must be a whole number in [${CMAKE_MATCH_1}, ${CMAKE_MATCH_2}], got ${past}" ${sub} ${opt} ${past})
      endif()
    endif()
  endforeach()
  math(EXPR cases "${cases} + 1")
  if(help_wide)
    math(EXPR failures "${failures} + 1")
    message("FAIL: terngrad ${sub} --help: lines wider than 100 columns:${help_wide}")
  else()
    message("ok:   terngrad ${sub} --help within 100 columns")
  endif()
endforeach()
message("number options swept: ${number_options}")
if(number_options LESS 20)
  message(FATAL_ERROR "cli_errors.cmake: only ${number_options} number options found in the subcommands' help")
endif()
# Bounds as written (1e-12, not 0.000000), and an underflow or overflow named as the value given.
list(FIND subcommands calibrate has_calibrate)
if(NOT has_calibrate EQUAL -1)
  expect_usage_error("--alpha: must be a number in [1e-12, 0.5], got 1e-400" calibrate --alpha 1e-400)
  expect_usage_error("--alpha: must be a number in [1e-12, 0.5], got 1e400" calibrate --alpha 1e400)
  expect_usage_error("--seeds: must be a whole number in [2, 1000000], got '1e3'" calibrate --seeds 1e3)
  expect_stale_removed("external codec exited with status 1" calibrate --impl exec:false --seeds 2 --no-progress
                       --json "${scratch}/old.json" --output "${scratch}/old.txt" REPORTS "${scratch}/old.json" "${scratch}/old.txt")
endif()

# A path of 20,000 characters is named by its start and its end, not echoed whole (the line stays within 500:
# CLI11's checks, the commands' own, an output path that cannot be made).
string(REPEAT "a" 20000 long_name)
set(long_path "${scratch}/${long_name}")
expect_usage_error("--skip: ${scratch}/aaa" verify --skip "${long_path}")
expect_usage_error("error: --json ${scratch}/aaa" verify --profile quick --json "${long_path}/r.json" ABSENT "${long_path}")
list(FIND subcommands model has_model)
if(NOT has_model EQUAL -1)
  expect_usage_error("--compute-from: file not found: ${scratch}/aaa" model --net lenet --compute-from "${long_path}")
endif()

file(REMOVE_RECURSE "${scratch}")
message("${cases} cases, ${failures} failed")
if(failures GREATER 0)
  message(FATAL_ERROR "terngrad: ${failures} of ${cases} bad invocations did not give exit code 2 and one clear stderr line")
endif()
