// The MPI Trainers' loops of the prebuilt library, in a library built with MPI (the end of
// ptrain/mpi.hpp lists them; core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_TRAINER_MPI
#include "ptrain/mpi.hpp"
