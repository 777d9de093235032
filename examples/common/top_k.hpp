#pragma once
// Top-k accuracy of a model over an evaluation loader (torchvision's Acc@1 and Acc@5): each rank
// counts the shard its DistributedSampler gives it and the counts are summed over the ranks.
#include <utility>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace examples {

// A collective: every rank of comm calls it. The model is left in training mode.
template <class Model, class Loader, ptrain::Communicator C>
ptrain::TopKAccuracy evaluate_top_k(Model& model, Loader& loader, C& comm, std::vector<int> ks = {1, 5}) {
  model.eval();
  ptrain::TopKAccuracy accuracy(std::move(ks));
  {
    ptrain::NoGradGuard no_grad;
    for (const auto& batch : loader)
      accuracy.update(model.forward(ptrain::Var<typename Model::scalar_type>(batch.inputs)), batch.targets);
  }
  model.train();
  return accuracy.reduced(comm);
}

}  // namespace examples
