#pragma once
// Where a rank stands in a checkpoint (train/checkpoint.hpp): a pipeline stage saves part `index`
// of `count`; data-parallel replica `replica` of `replicas` holds what replica 0 holds, so only
// replica 0 writes. The Trainer combines the policies' answers (a grid: both).
namespace ptrain {

struct CheckpointPart {
  int index = 0, count = 1;
  int replica = 0, replicas = 1;

  bool writes() const { return replica == 0; }
  // This rank among the Trainer's ranks, and their number.
  int rank() const { return replica * count + index; }
  int ranks() const { return replicas * count; }
};

}  // namespace ptrain
