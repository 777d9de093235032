#pragma once
// Top-k accuracy of a model over an evaluation loader (torchvision's Acc@1 and Acc@5): each rank
// counts the shard its DistributedSampler gives it and the counts are summed over the ranks.
#include <utility>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace examples {

// A collective: every rank of comm calls it. The model is left in training mode. A model on
// another device gets each batch there, in its scalar type, and hands its scores back.
template <class Model, class Loader, ptrain::Communicator C>
ptrain::TopKAccuracy evaluate_top_k(Model& model, Loader& loader, C& comm, std::vector<int> ks = {1, 5}) {
  using T = typename Model::scalar_type;
  using D = typename Model::device_type;
  model.eval();
  ptrain::TopKAccuracy accuracy(std::move(ks));
  {
    ptrain::NoGradGuard no_grad;
    for (const auto& batch : loader) {
      const ptrain::Var<T, D> inputs(ptrain::on_device<D>(ptrain::tensor_cast<T>(batch.inputs)));
      accuracy.update(model.forward(inputs), batch.targets);
    }
  }
  model.train();
  return accuracy.reduced(comm);
}

}  // namespace examples
