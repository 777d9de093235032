# Runs a drill under mpiexec and checks how it ends:
#   cmake -DMPIEXEC=... -DNP_FLAG=-n -DNP=3 -DPROGRAM=... -DARGS="stop;1" -DEXPECT=regex [-DGUARD=...]
#         [-DTIMEOUT=3] -P expect_stall.cmake
# A non-zero exit, output matching every regex of EXPECT (a list), all within LIMIT seconds (no
# hang, no timeout of ours), and ranks that wait leaving their core idle.
set(LIMIT 30)
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 3)
endif()
set(ENV{PTRAIN_COLLECTIVE_TIMEOUT} ${TIMEOUT})
set(ENV{PTRAIN_NUM_THREADS} 1)
string(TIMESTAMP start "%s")
# While the ranks wait (2.5 s in), ps samples their CPU share: "cpu share <percent>" per rank.
string(REPLACE ";" " " args "${ARGS}")
execute_process(
  COMMAND bash -c "timeout -k 5 60 ${MPIEXEC} ${NP_FLAG} ${NP} ${GUARD} ${PROGRAM} ${args} & launch=$!; sleep 2.5; \
for pid in $(pgrep -f '^${PROGRAM}'); do echo \"cpu share $(ps -o pcpu= -p $pid) $(ps -o stat= -p $pid)\" >&2; done; \
wait $launch"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(all "${out}${err}")
message("exit status ${status} after ${seconds} s; output:\n${all}")

include(${CMAKE_CURRENT_LIST_DIR}/expect_failed_run.cmake)
ptrain_expect_failed_run("${status}" ${seconds} ${LIMIT} "${all}")
foreach(expected IN LISTS EXPECT)
  if(NOT all MATCHES "${expected}")
    message(FATAL_ERROR "the output lacks '${expected}'")
  endif()
endforeach()
# A rank that waits sleeps: its CPU share (2-4% measured, startup included) stays far below a
# spinning rank's (100% on an idle machine, 25% measured with 2 cores busy with 6 other jobs).
# Stopped ranks (state T) are left out.
string(REGEX MATCHALL "cpu share +[0-9.]+ +[A-Za-z+<]+" shares "${err}")
foreach(share IN LISTS shares)
  string(REGEX REPLACE "cpu share +([0-9]+)[0-9.]* +([A-Za-z+<]+)" "\\1" percent "${share}")
  string(REGEX REPLACE "cpu share +([0-9]+)[0-9.]* +([A-Za-z+<]+)" "\\2" state "${share}")
  if(NOT state MATCHES "^T")
    message("a waiting rank's CPU share: ${percent}% (state ${state})")
    if(percent GREATER 10)
      message(FATAL_ERROR "a waiting rank used ${percent}% of a core: it should sleep between polls")
    endif()
  endif()
endforeach()
