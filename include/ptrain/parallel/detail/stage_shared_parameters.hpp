#pragma once
// Parameters that several stages of a pipeline hold: a layer applied at places that fall on
// different stages (ALBERT's one shared layer), a weight tied to one on another stage (the MLM
// decoder and the word embedding). Each such stage holds a copy and trains it with the gradient
// the serial model's parameter would get: the sum of the copies' gradients, added up over the
// stages that hold one before every step. The copies start equal (every rank builds the whole
// model) and get equal gradients, so the optimizer keeps them equal.
//
// Every rank finds the same list from the whole model and the cut, in the same order, so the
// sums' messages pair up with no exchange beforehand: for each parameter, the other holders send
// their gradients to the first, which adds them and sends the sum back.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/any_comm.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/nn/sequential.hpp"
#include "ptrain/parallel/detail/pipeline_partition.hpp"

namespace ptrain::detail {

// What the Pipeline keeps of the parameters its stages share, whatever the model's T and D.
class StageSharing {
 public:
  struct Shared {
    std::string name;         // in the whole model
    std::vector<int> stages;  // that hold a copy, ascending
  };

  virtual ~StageSharing() = default;
  const std::vector<Shared>& shared() const { return shared_; }
  // Each shared parameter's gradient on this stage becomes the sum of every holder's; stages
  // runs the replica's stages in stage order (the pipeline's communicator).
  virtual void sum_gradients(AnyComm& stages) = 0;
  // Whether this stage adds the parameter (a Var's node) to the global gradient norm: a copy is
  // counted on the first stage that holds it alone.
  virtual bool counted_here(const void* node) const = 0;
  // Whether the node is one of the shared parameters.
  virtual bool is_shared(const void* node) const = 0;

 protected:
  std::vector<Shared> shared_;
};

template <class T, class D>
class StageSharedParameters final : public StageSharing {
 public:
  // The model's layers cut at ranges; this rank runs stage `stage`.
  StageSharedParameters(const Sequential<T, D>& model, const std::vector<StageRange>& ranges, int stage)
      : stage_(stage) {
    std::unordered_map<const void*, std::size_t> index;  // node -> position in found
    struct Found {
      std::string name;
      Var<T, D> parameter;
      std::vector<int> stages;
    };
    std::vector<Found> found;
    for (std::size_t s = 0; s < ranges.size(); ++s) {
      Sequential<T, D> part;
      for (std::size_t i = ranges[s].begin; i < ranges[s].end; ++i)
        part.push_back(model.children()[i].first, model.children()[i].second);
      for (const auto& [name, p] : part.named_parameters()) {
        const auto [at, fresh] = index.emplace(p.node().get(), found.size());
        if (fresh) found.push_back({name, p, {}});
        found[at->second].stages.push_back(static_cast<int>(s));
      }
    }
    for (auto& f : found) {
      if (f.stages.size() < 2) continue;
      shared_.push_back({f.name, f.stages});
      parameters_.push_back(f.parameter);
    }
  }

  void sum_gradients(AnyComm& stages) override {
    constexpr int tag = 0;  // the sums follow one order on every rank, after the step's last message
    for (std::size_t k = 0; k < parameters_.size(); ++k) {
      const std::vector<int>& holders = shared_[k].stages;
      Var<T, D>& p = parameters_[k];
      if (!p.requires_grad() || !std::count(holders.begin(), holders.end(), stage_)) continue;
      if (!p.grad().defined()) p.grad() = Tensor<T, D>::zeros(p.shape());
      Tensor<T, D>& grad = p.grad();
      const auto elements = static_cast<std::size_t>(grad.numel());
      if (stage_ == holders.front()) {
        Tensor<T, D> other(grad.shape());
        for (std::size_t h = 1; h < holders.size(); ++h) {
          stages.irecv(std::span<T>(other.data(), elements), holders[h], tag).wait();
          kernels::add_into(kernels::executor_for<D>{}, grad.data(), other.data(), grad.numel());
        }
        std::vector<AnyRequest> sends;
        for (std::size_t h = 1; h < holders.size(); ++h)
          sends.push_back(stages.isend(std::span<const T>(grad.data(), elements), holders[h], tag));
        for (auto& send : sends) send.wait();
      } else {
        stages.isend(std::span<const T>(grad.data(), elements), holders.front(), tag).wait();
        stages.irecv(std::span<T>(grad.data(), elements), holders.front(), tag).wait();
      }
    }
  }

  bool counted_here(const void* node) const override {
    for (std::size_t k = 0; k < parameters_.size(); ++k)
      if (parameters_[k].node().get() == node) return shared_[k].stages.front() == stage_;
    return true;
  }
  bool is_shared(const void* node) const override {
    return std::any_of(parameters_.begin(), parameters_.end(),
                       [&](const Var<T, D>& p) { return p.node().get() == node; });
  }

 private:
  int stage_;
  std::vector<Var<T, D>> parameters_;  // shared_[k]'s
};

}  // namespace ptrain::detail
