#pragma once
// convert_sync_batchnorm: torch.nn.SyncBatchNorm.convert_sync_batchnorm for ptrain models. Every
// BatchNorm2d of the model then normalises, in training, by the statistics of the global batch
// (the union of the local batches of comm's ranks) and sums its input gradient's statistics over
// the ranks in backward; evaluation is untouched. On any device whose memory the communicator
// moves: a CPU or HostEmulated model with a host communicator (MpiComm), a Cuda one with NcclComm.
#include <cstddef>
#include <span>
#include <type_traits>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

// A BatchNormSync that sums over comm's ranks (in double: a few values per channel), its spans in
// comm's memory (comm_memory_t). comm must outlive every graph built with it; a dedicated
// communicator (comm.split) keeps these blocking collectives apart from gradient buckets in
// flight on another.
template <Communicator C>
BatchNormSync allreduce_sync(C& comm) {
  return [&comm](std::span<double> values) { comm.allreduce_sum(values); };
}

// Sets the hook on every BatchNorm2d<T, D> in model (depth first, the model itself included) and
// returns how many there are. In a world of one the local batch is the global batch, so the
// layers are left as they are (and as fast). Every rank must convert the same model: forward and
// backward of each layer then call the same collectives in the same order on every rank.
template <class T, class D, Communicator C>
std::size_t convert_sync_batchnorm(Module<T, D>& model, C& comm) {
  static_assert(std::is_same_v<comm_memory_t<C>, memory_of_t<D>>,
                "convert_sync_batchnorm: the communicator must move the memory the model's tensors live in "
                "(a host communicator such as MpiComm for Cpu and HostEmulated, NcclComm for Cuda)");
  std::size_t found = 0;
  if (auto* bn = dynamic_cast<BatchNorm2d<T, D>*>(&model)) {
    if (comm.size() > 1) bn->set_sync(allreduce_sync(comm));
    ++found;
  }
  for (const auto& [name, child] : model.children()) found += convert_sync_batchnorm(*child, comm);
  return found;
}

}  // namespace ptrain
