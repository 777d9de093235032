# Runs a drill under mpiexec and checks how it ends:
#   cmake -DMPIEXEC=... -DNP_FLAG=-n -DNP=3 -DPROGRAM=... -DARGS="stop;1" -DEXPECT=regex [-DGUARD=...]
#         [-DTIMEOUT=4] -P expect_stall.cmake
# A non-zero exit, output matching every regex of EXPECT (a list), all within LIMIT seconds (no
# hang, no timeout of ours), and ranks that wait leaving their core idle.
set(LIMIT 30)
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 4)
endif()
set(ENV{PTRAIN_COLLECTIVE_TIMEOUT} ${TIMEOUT})
set(ENV{PTRAIN_NUM_THREADS} 1)
string(TIMESTAMP start "%s")
# While the ranks wait, from 1.5 s to 2.5 s after the stall began (a waiting rank spins its first
# second, then sleeps; the watchdog ends them at TIMEOUT), each rank's CPU time is sampled:
# "cpu ticks <user+system ticks> <state>" (sample_cpu.sh).
execute_process(
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/sample_cpu.sh ${PROGRAM}
          timeout -k 5 60 ${MPIEXEC} ${NP_FLAG} ${NP} ${GUARD} ${PROGRAM} ${ARGS}
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
# A rank that waits sleeps: its CPU time in that second (100 ticks = a core) stays far below a
# spinning rank's (100 on an idle machine, about 25 with the 2 cores shared by 8 busy processes).
# Stopped ranks (state T) are left out.
# At least one waiting rank must have been sampled, except under GUARD: the killed rank ends
# every rank before a wait sleeps.
string(REGEX MATCHALL "cpu ticks -?[0-9]+ [A-Za-z]" samples "${err}")
set(waiting 0)
foreach(sample IN LISTS samples)
  string(REGEX REPLACE "cpu ticks (-?[0-9]+) ([A-Za-z])" "\\1" used "${sample}")
  string(REGEX REPLACE "cpu ticks (-?[0-9]+) ([A-Za-z])" "\\2" state "${sample}")
  if(NOT state STREQUAL "T")
    math(EXPR waiting "${waiting} + 1")
    message("a waiting rank's CPU time over 1 s: ${used} ticks (state ${state})")
    if(used GREATER 10)
      message(FATAL_ERROR "a waiting rank used ${used} ticks of CPU in 1 s: it should sleep between polls")
    endif()
  endif()
endforeach()
if(waiting EQUAL 0 AND NOT DEFINED GUARD)
  message(FATAL_ERROR "no waiting rank's CPU time was sampled (sample_cpu.sh: did the stall begin?)")
endif()
