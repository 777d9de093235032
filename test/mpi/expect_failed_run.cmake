# Included by the drill checkers (expect_abort.cmake, expect_stall.cmake):
# ptrain_expect_failed_run(<status> <seconds> <limit> <output>) fails unless the run exited
# non-zero, not by our timeout (a hang), within <limit> seconds, and no rank printed "finished".
function(ptrain_expect_failed_run status seconds limit output)
  if(status EQUAL 0)
    message(FATAL_ERROR "expected a non-zero exit, got 0")
  endif()
  if(status EQUAL 124 OR status EQUAL 137 OR status MATCHES "timeout")
    message(FATAL_ERROR "the ranks hung: timeout ended them (${status})")
  endif()
  if(output MATCHES "finished")
    message(FATAL_ERROR "a rank finished although the others could not")
  endif()
  if(seconds GREATER_EQUAL limit)
    message(FATAL_ERROR "ending all ranks took ${seconds} s, expected under ${limit} s")
  endif()
endfunction()
