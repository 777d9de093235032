#pragma once
// Sharded<Zero3>'s parameter sharding, on a Sequential model's top-level children (its units, as
// FSDP wraps each top-level child). Each trainable parameter lives on the rank that owns it
// (balanced_partition, the same owners that step it and keep its gradient); the other ranks let
// its storage go between uses (Var's value undefined; its node, which the graph refers to, stays).
//
// The Sequential runs each child through run(): the unit's parameters are gathered (waited for),
// the next unit's gather is started (prefetched, so it travels while this unit computes), the
// child runs forward, and its parameters are let go. Its output carries a backward hook
// (autograd/ops/backward_hook.hpp) that runs just before the unit's backward: the units after it
// (whose backward is over) are let go, the unit is gathered again and the one before it prefetched.
// The unit backward reaches last stays gathered until the next forward or the optimizer step
// (release_leftovers).
//
// A unit's gather is an all-gather in which every shard is whole parameters: one non-blocking
// broadcast per rank owning some of the unit's parameters, of those packed together, so no buffer
// is padded to the largest rank's share. Every rank starts the same broadcasts in the same order
// (units in the model's order, owners by rank), interleaved alike with the gradient buckets'
// reduce-scatters.
// Frozen parameters (no owner) and those of no child stay whole on every rank.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/backward_hook.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain::detail {

// What Sharded holds once the model's scalar type is known (at setup).
class ParameterSharding {
 public:
  virtual ~ParameterSharding() = default;
  // Every parameter whole on every rank (a checkpoint, reading the weights); every rank calls it.
  virtual void gather_all() = 0;
  // Each rank holds its own parameters only; every rank calls it.
  virtual void release_all() = 0;
  // Units still gathered from a backward that is over, let go (nothing is exchanged).
  virtual void release_leftovers() = 0;
};

template <class T, Communicator Comm, class D>
class ParameterShards final : public ParameterSharding {
 public:
  // params: the model's named_parameters() in order; owner[i] the rank that keeps params[i] (-1:
  // every rank). Installs itself as the Sequential's child runner; the parameters stay whole until
  // release_all().
  ParameterShards(Comm& comm, Sequential<T, D>& model, std::vector<Var<T, D>> params, const std::vector<int>& owner)
      : comm_(comm), model_(model), params_(std::move(params)), owner_(owner) {
    check(owner_.size() == params_.size(), "Sharded<Zero3>: ", owner_.size(), " owners for ", params_.size(),
          " parameters");
    for (const auto& p : params_) shapes_.push_back(p.shape());
    units_.resize(model.size());
    for (std::size_t u = 0; u < model.size(); ++u)
      for (const auto& p : model[u]->parameters())
        for (std::size_t i = 0; i < params_.size(); ++i)
          if (params_[i].node() == p.node() && owner_[i] >= 0) units_[u].members.push_back(i);
    for (Unit& unit : units_)
      for (int r = 0; r < comm_.size(); ++r) {
        Part part{r, {}, 0, {}};
        for (std::size_t i : unit.members)
          if (owner_[i] == r) {
            part.members.push_back(i);
            part.size += params_[i].numel();
          }
        if (!part.members.empty()) unit.parts.push_back(std::move(part));
      }
    model_.run_children_through(
        [this](std::size_t u, Module<T, D>& child, const Var<T, D>& x) { return run(u, child, x); });
  }
  ~ParameterShards() override { model_.run_children_through(nullptr); }
  ParameterShards(const ParameterShards&) = delete;
  ParameterShards& operator=(const ParameterShards&) = delete;

  void gather_all() override {
    for (std::size_t u = 0; u < units_.size(); ++u) start_gather(u);
    for (std::size_t u = 0; u < units_.size(); ++u) wait(u);
  }
  void release_all() override {
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (units_[u].state == State::in_flight) wait(u);
      release(u);
    }
  }
  void release_leftovers() override {
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (units_[u].state == State::gathered) release(u);
  }

 private:
  enum class State { released, in_flight, gathered };
  // A rank's parameters of a unit, packed for their broadcast (the buffer only while in flight).
  struct Part {
    int owner;
    std::vector<std::size_t> members;
    std::int64_t size;
    Tensor<T, D> buffer;
  };
  struct Unit {
    std::vector<std::size_t> members;  // the child's sharded parameters (every rank lists the same)
    std::vector<Part> parts;           // by owner
    State state = State::gathered;
    std::vector<typename Comm::Request> requests;
  };

  Var<T, D> run(std::size_t u, Module<T, D>& child, const Var<T, D>& x) {
    if (units_[u].members.empty()) return hooked(u, child(x));
    for (std::size_t v = 0; v < units_.size(); ++v)
      if (v != u && units_[v].state == State::gathered) release(v);
    wait(u);
    if (const auto next = neighbour(u, +1)) start_gather(*next);
    Var<T, D> y = child(x);
    release(u);
    return hooked(u, std::move(y));
  }

  Var<T, D> hooked(std::size_t u, Var<T, D> y) {
    if (!GradMode::enabled() || !y.requires_grad()) return y;
    return with_backward_hook(y, [this, u] { before_unit_backward(u); });
  }

  void before_unit_backward(std::size_t u) {
    for (std::size_t v = u + 1; v < units_.size(); ++v)
      if (units_[v].state == State::gathered) release(v);
    if (units_[u].members.empty()) return;
    wait(u);
    if (const auto previous = neighbour(u, -1)) start_gather(*previous);
  }

  // The nearest unit with parameters to gather before (-1) or after (+1) u.
  std::optional<std::size_t> neighbour(std::size_t u, int direction) const {
    for (std::size_t v = u; direction < 0 ? v-- > 0 : ++v < units_.size();)
      if (!units_[v].members.empty()) return v;
    return std::nullopt;
  }

  void start_gather(std::size_t u) {
    Unit& unit = units_[u];
    if (unit.state != State::released) return;
    for (Part& part : unit.parts) {
      part.buffer = Tensor<T, D>(Shape{part.size});
      if (part.owner == comm_.rank()) copy_members(part, true);
      if constexpr (requires { comm_.label_next_collective(std::string()); })
        comm_.label_next_collective("unit " + std::to_string(u) + " parameters of rank " + std::to_string(part.owner));
      unit.requests.push_back(
          comm_.ibroadcast(std::span<T>(part.buffer.data(), static_cast<std::size_t>(part.size)), part.owner));
    }
    unit.state = State::in_flight;
  }

  // The unit's parameters whole on this rank (gathered now if nobody prefetched them).
  void wait(std::size_t u) {
    Unit& unit = units_[u];
    if (unit.state == State::released) start_gather(u);
    if (unit.state != State::in_flight) return;
    for (auto& request : unit.requests) request.wait();
    unit.requests.clear();
    for (Part& part : unit.parts) {
      if (part.owner != comm_.rank()) copy_members(part, false);
      part.buffer = Tensor<T, D>();
    }
    unit.state = State::gathered;
  }

  // The part's parameters into its buffer (pack), or out of it into new storage.
  void copy_members(Part& part, bool pack) {
    std::int64_t at = 0;
    for (std::size_t i : part.members) {
      Tensor<T, D>& value = params_[i].value();
      if (!pack) value = Tensor<T, D>(shapes_[i]);
      const auto n = static_cast<std::size_t>(value.numel());
      if (pack) D::copy(part.buffer.data() + at, value.data(), n);
      else D::copy(value.data(), part.buffer.data() + at, n);
      at += value.numel();
    }
  }

  void release(std::size_t u) {
    Unit& unit = units_[u];
    if (unit.state != State::gathered) return;
    for (std::size_t i : unit.members)
      if (owner_[i] != comm_.rank()) params_[i].value() = Tensor<T, D>();
    unit.state = State::released;
  }

  Comm& comm_;
  Sequential<T, D>& model_;
  std::vector<Var<T, D>> params_;
  std::vector<Shape> shapes_;
  std::vector<int> owner_;
  std::vector<Unit> units_;
};

}  // namespace ptrain::detail
