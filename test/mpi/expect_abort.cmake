# Runs abort_on_throw under mpiexec and checks how it ends:
#   cmake -DMPIEXEC=... -DNP_FLAG=-n -DNP=2 -DPROGRAM=... -DTHROWER=1 -P expect_abort.cmake
# THROWER >= 0: a non-zero exit, "rank THROWER: deliberate failure on rank THROWER" in the
# output, and all of it within LIMIT seconds (no hang). THROWER = -1: exit 0, every rank finished.
set(LIMIT 30)
string(TIMESTAMP start "%s")
execute_process(
  COMMAND timeout -k 5 60 ${MPIEXEC} ${NP_FLAG} ${NP} ${PROGRAM} ${THROWER}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(all "${out}${err}")
message("exit status ${status} after ${seconds} s; output:\n${all}")

if(THROWER LESS 0)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "expected exit 0 when no rank throws, got ${status}")
  endif()
  math(EXPR last "${NP} - 1")
  foreach(rank RANGE ${last})
    if(NOT all MATCHES "rank ${rank}: finished")
      message(FATAL_ERROR "rank ${rank} did not finish")
    endif()
  endforeach()
  return()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/expect_failed_run.cmake)
ptrain_expect_failed_run("${status}" ${seconds} ${LIMIT} "${all}")
if(NOT all MATCHES "rank ${THROWER}: deliberate failure on rank ${THROWER}")
  message(FATAL_ERROR "the output lacks rank ${THROWER}'s message")
endif()
