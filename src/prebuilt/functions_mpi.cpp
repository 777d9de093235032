// The prebuilt library's functions of the MPI headers that are not templates (MpiSession, the
// collective watchdog), in a library built with MPI (their headers define them under
// PTRAIN_PREBUILT_MPI_FUNCTION_BODIES; core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_MPI_FUNCTIONS
#include "ptrain/mpi.hpp"
