#pragma once
// Batch-norm running statistics from rank 0 after every optimizer step, as PyTorch's
// DistributedDataParallel broadcasts buffers (broadcast_buffers=True): DataParallel broadcasts
// them only at setup, and each rank's statistics then drift with its own shard, so ranks would
// evaluate different models. The buffers are small (two vectors per batch norm).
#include <cstdint>

#include <ptrain/mpi.hpp>

namespace examples {

template <class Trainer>
void broadcast_buffers_each_step(Trainer& trainer, ptrain::MpiComm& world) {
  if (world.size() == 1) return;
  trainer.on_step_end([&trainer, &world](std::int64_t) {
    for (auto& [name, buffer] : trainer.model().named_buffers()) world.broadcast(*buffer, 0);
  });
}

}  // namespace examples
