#pragma once
// PipelineGrid: how a pipeline lays out the world (stages x replicas). The Pipeline policy makes
// one (pipeline_grid()), a data-parallel policy joins it (join_pipeline_grid(grid)) and the
// Trainer's policy contract names it, so it stands apart from the Pipeline.
namespace ptrain {

// Stage = rank % stages, replica = rank / stages: the consecutive ranks of a replica form one pipeline.
struct PipelineGrid {
  int stages = 1, replicas = 1;
  int stage_of(int world_rank) const { return world_rank % stages; }
  int replica_of(int world_rank) const { return world_rank / stages; }
};

}  // namespace ptrain
