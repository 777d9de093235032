#pragma once
// The umbrella header with MPI: the CPU library plus launching under mpiexec/srun or by URL (MpiSession,
// run_main, abort_all) and the MPICH communicator (MpiComm). Needs the ptrain::mpi CMake target.
#include "ptrain/ptrain.hpp"

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/mpi_comm.hpp"
#include "ptrain/comm/self_comm.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/mpi_main.hpp"
#include "ptrain/launch/mpi_session.hpp"
#include "ptrain/launch/mpi_types.hpp"
#include "ptrain/launch/process_info.hpp"
#include "ptrain/launch/url_launch.hpp"
#include "ptrain/launch/url_rendezvous.hpp"
#include "ptrain/parallel/mpi_allreduce.hpp"

// The MPI Trainers' loops the prebuilt library holds where it was built with MPI
// (PTRAIN_PREBUILT_MPI; core/prebuilt.hpp says how): DataParallel<MpiAllreduce> in float and double,
// and the examples' DataParallel<MpiAllreduce, RuntimeCompression> and Sharded<RuntimeStage,
// MpiAllreduce, RuntimeCompression> in float, on the CPU; each with its constructor for Sgd, Adam and
// AdamW, and fit, train_epoch and evaluate on a DataLoader of a TensorDataset. Every Trainer of a
// model with these policies runs one of them (train/trainer.hpp).
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER_MPI, float, ptrain::DataParallel<ptrain::MpiAllreduce>)
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER_MPI, double, ptrain::DataParallel<ptrain::MpiAllreduce>)
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER_MPI, float,
                                ptrain::DataParallel<ptrain::MpiAllreduce, ptrain::RuntimeCompression>)
PTRAIN_PREBUILT_TRAINER_MEMBERS(PTRAIN_PREBUILT_TRAINER_MPI, float,
                                ptrain::Sharded<ptrain::RuntimeStage, ptrain::MpiAllreduce, ptrain::RuntimeCompression>)
// The gradient synchronisers and shards those Trainers make, on MpiComm (their members are reached
// through their interfaces' virtual functions, so a program that makes one compiles only the call to
// its constructor).
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::GradientBuckets<float, ptrain::MpiComm, float, ptrain::Cpu>)
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::GradientBuckets<float, ptrain::MpiComm, ptrain::half, ptrain::Cpu>)
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::GradientBuckets<float, ptrain::MpiComm, ptrain::bfloat16, ptrain::Cpu>)
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::GradientBuckets<double, ptrain::MpiComm, double, ptrain::Cpu>)
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::ShardedParameters<float, ptrain::MpiComm, ptrain::Cpu>)
PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::detail::ParameterShards<float, ptrain::MpiComm, ptrain::Cpu>)
