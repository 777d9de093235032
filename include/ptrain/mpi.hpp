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
#define PTRAIN_PREBUILT_MPI_TRAINER_OPTIMIZER(T, Opt, ...)                                                        \
  PTRAIN_PREBUILT_TRAINER_MPI(ptrain::Trainer<ptrain::Module<T, ptrain::Cpu>, __VA_ARGS__>::Trainer(               \
      std::shared_ptr<ptrain::Module<T, ptrain::Cpu>>, std::shared_ptr<ptrain::Opt<T, ptrain::Cpu>>,               \
      ptrain::TrainerOptions, __VA_ARGS__))
#define PTRAIN_PREBUILT_MPI_TRAINER(T, ...)                                                                       \
  PTRAIN_PREBUILT_TRAINER_MPI(class ptrain::Trainer<ptrain::Module<T, ptrain::Cpu>, __VA_ARGS__>)                 \
  PTRAIN_PREBUILT_MPI_TRAINER_OPTIMIZER(T, Sgd, __VA_ARGS__)                                                      \
  PTRAIN_PREBUILT_MPI_TRAINER_OPTIMIZER(T, Adam, __VA_ARGS__)                                                     \
  PTRAIN_PREBUILT_MPI_TRAINER_OPTIMIZER(T, AdamW, __VA_ARGS__)                                                    \
  PTRAIN_PREBUILT_TRAINER_MPI(                                                                                    \
      std::vector<ptrain::EpochResult> ptrain::Trainer<ptrain::Module<T, ptrain::Cpu>, __VA_ARGS__>::fit(         \
          ptrain::DataLoader<ptrain::TensorDataset>&, ptrain::DataLoader<ptrain::TensorDataset>*, int))           \
  PTRAIN_PREBUILT_TRAINER_MPI(ptrain::EpochTotals ptrain::Trainer<ptrain::Module<T, ptrain::Cpu>, __VA_ARGS__>::   \
                                  train_epoch(ptrain::DataLoader<ptrain::TensorDataset>&, int))                   \
  PTRAIN_PREBUILT_TRAINER_MPI(ptrain::EpochTotals ptrain::Trainer<ptrain::Module<T, ptrain::Cpu>, __VA_ARGS__>::   \
                                  evaluate(ptrain::DataLoader<ptrain::TensorDataset>&, std::int64_t))
PTRAIN_PREBUILT_MPI_TRAINER(float, ptrain::DataParallel<ptrain::MpiAllreduce>)
PTRAIN_PREBUILT_MPI_TRAINER(double, ptrain::DataParallel<ptrain::MpiAllreduce>)
PTRAIN_PREBUILT_MPI_TRAINER(float, ptrain::DataParallel<ptrain::MpiAllreduce, ptrain::RuntimeCompression>)
PTRAIN_PREBUILT_MPI_TRAINER(float,
                            ptrain::Sharded<ptrain::RuntimeStage, ptrain::MpiAllreduce, ptrain::RuntimeCompression>)
#undef PTRAIN_PREBUILT_MPI_TRAINER
#undef PTRAIN_PREBUILT_MPI_TRAINER_OPTIMIZER
