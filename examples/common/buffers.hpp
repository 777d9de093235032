#pragma once
// Batch-norm running statistics from rank 0 after every optimizer step, as PyTorch's
// DistributedDataParallel broadcasts buffers (broadcast_buffers=True): DataParallel broadcasts
// them only at setup, and each rank's statistics then drift with its own shard, so ranks would
// evaluate different models. The buffers are small (two vectors per batch norm). They go over the
// DataParallel policy's communicator, which moves the model's memory (MPI on the host, NCCL on GPUs).
#include <cstdint>

#include <ptrain/mpi.hpp>

namespace examples {

// Nothing without a DataParallel among the Trainer's policies (one process).
template <class... Policies, class Model>
void broadcast_buffers_each_step(ptrain::Trainer<Model, Policies...>& trainer) {
  const auto hook = [&trainer]<class Policy>(Policy*) {
    if constexpr (requires(Policy& p) { p.communicator(); }) {
      trainer.on_step_end([&trainer](std::int64_t) {
        auto& comm = trainer.template policy<Policy>().communicator();
        for (auto& [name, buffer] : trainer.model().named_buffers()) comm.broadcast(*buffer, 0);
      });
    }
  };
  (hook(static_cast<Policies*>(nullptr)), ...);
}

}  // namespace examples
