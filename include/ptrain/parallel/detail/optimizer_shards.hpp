#pragma once
// Which rank steps which of the optimizer's parameters (Sharded's partition), and the bucketed
// all-gather that brings every rank the parameters the others stepped.
//
// The partition is by whole parameters, balanced by size: the trainable parameters, largest first
// (equal sizes by index), each go to the rank that holds the fewest elements so far (the lowest
// rank on a tie). Every rank computes it alike from the shapes, so nothing is exchanged. The
// largest rank's share is at most the mean plus the largest parameter (greedy LPT scheduling).
//
// A checkpoint holds the whole optimizer state, as DataParallel's does, so that any world size,
// stage or DataParallel loads it: gather_state brings every rank's entries to rank 0 (their keys
// "<parameter index>.<name>" are the same as one optimizer over every parameter would use), and
// own_state keeps, of a whole state read back, the entries of this rank's parameters.
//
// The all-gather packs each rank's parameters, in index order, into chunks of about
// bucket_bytes / world; bucket k is chunk k of every rank, exchanged as one all-gather of blocks as
// large as its largest chunk (a rank with less sends padding). Every bucket starts at once and is
// unpacked as it completes. The same all-gather makes whole, for a checkpoint, parameters whose
// storage the other ranks let go between checkpoints (release_others: MixedPrecision's fp32
// masters, which only their owner keeps); a value let go is made anew from its kept shape.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/optim/optimizer.hpp"

namespace ptrain::detail {

// owner[i]: the rank that steps parameter i of sizes (-1: not trainable, stepped by no rank).
inline std::vector<int> balanced_partition(const std::vector<std::int64_t>& sizes, const std::vector<bool>& trainable,
                                           int world) {
  check(world >= 1, "Sharded: a world of ", world, " ranks");
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (trainable[i]) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::int64_t> load(static_cast<std::size_t>(world), 0);
  std::vector<int> owner(sizes.size(), -1);
  for (std::size_t i : order) {
    const auto lightest = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = lightest;
    load[static_cast<std::size_t>(lightest)] += sizes[i];
  }
  return owner;
}

// The parameter index a state key "<index>.<name>" names.
inline std::size_t state_key_parameter(const std::string& key) {
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), index);
  check(error == std::errc{} && end != key.data() + key.size() && *end == '.', "Sharded: optimizer state key '", key,
        "' is not '<parameter index>.<name>'");
  return index;
}

// Rank 0's scalars and every rank's tensors on rank 0 (the others get theirs back). Each rank's
// tensors travel as doubles (exact for every optimizer scalar type): their count, then per tensor
// its key's length and characters, its rank (dimensions), extents and values.
template <class U, Communicator Comm>
OptimizerState<U> gather_state(Comm& comm, OptimizerState<U> mine) {
  constexpr int length_tag = 7101, payload_tag = 7102;
  if constexpr (!std::is_same_v<comm_memory_t<Comm>, Cpu>)
    fail("Sharded: a checkpoint's optimizer state is gathered over a communicator of host memory (MpiComm); over "
         "one of device memory (NCCL) it is not yet");
  if (comm.rank() != 0) {
    std::vector<double> flat{static_cast<double>(mine.tensors.size())};
    for (const auto& [key, t] : mine.tensors) {
      flat.push_back(static_cast<double>(key.size()));
      for (char c : key) flat.push_back(static_cast<double>(static_cast<unsigned char>(c)));
      flat.push_back(static_cast<double>(t.shape().rank()));
      for (int d = 0; d < t.shape().rank(); ++d) flat.push_back(static_cast<double>(t.shape()[d]));
      for (std::int64_t i = 0; i < t.numel(); ++i) flat.push_back(static_cast<double>(t[i]));
    }
    const double length = static_cast<double>(flat.size());
    comm.send(std::span<const double>(&length, 1), 0, length_tag);
    comm.send(std::span<const double>(flat), 0, payload_tag);
    return mine;
  }
  for (int r = 1; r < comm.size(); ++r) {
    double length = 0;
    comm.recv(std::span<double>(&length, 1), r, length_tag);
    std::vector<double> flat(static_cast<std::size_t>(length));
    comm.recv(std::span<double>(flat), r, payload_tag);
    std::size_t at = 0;
    const auto next = [&] { return flat.at(at++); };
    for (auto n = static_cast<std::int64_t>(next()); n > 0; --n) {
      std::string key(static_cast<std::size_t>(next()), ' ');
      for (char& c : key) c = static_cast<char>(static_cast<unsigned char>(next()));
      Shape shape;
      for (auto d = static_cast<int>(next()); d > 0; --d) shape.push_back(static_cast<std::int64_t>(next()));
      Tensor<U> t(shape);
      for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<U>(next());
      mine.tensors.emplace_back(std::move(key), std::move(t));
    }
  }
  return mine;
}

// Of a whole optimizer state, the scalars and the tensors of the parameters owner gives `rank`.
template <class U>
OptimizerState<U> own_state(OptimizerState<U> whole, const std::vector<int>& owner, int rank) {
  OptimizerState<U> mine{std::move(whole.scalars), {}};
  for (auto& [key, t] : whole.tensors) {
    const std::size_t i = state_key_parameter(key);
    check(i < owner.size(), "Sharded: optimizer state key '", key, "' names parameter ", i, " of ", owner.size());
    if (owner[i] == rank) mine.tensors.emplace_back(std::move(key), std::move(t));
  }
  return mine;
}

// A list of parameters each stepped by one rank, as Sharded holds it once their scalar type is known:
// the model's (gathered after each step) or the optimizer's (MixedPrecision's masters among them).
class OwnedParameters {
 public:
  virtual ~OwnedParameters() = default;
  // The gradients of the parameters another rank steps are dropped: the optimizer skips them and
  // never makes their state.
  virtual void drop_others_gradients() = 0;
  // Every gathered parameter takes the value its owner holds (storage made where it was let go).
  virtual void gather() = 0;
  // The storage of the gathered parameters another rank owns is let go (their values undefined).
  virtual void release_others() = 0;
  virtual int owner(std::size_t parameter) const = 0;
  virtual std::size_t gather_bucket_count() const = 0;
};

template <class U, Communicator Comm, class D>
class ShardedParameters final : public OwnedParameters {
 public:
  // owner: balanced_partition of these parameters' sizes. stays_with_owner[i] (if given): params[i]
  // is never gathered (Sharded<Zero3>'s model parameters, or a model parameter beside masters).
  ShardedParameters(Comm& comm, std::vector<Var<U, D>> params, std::vector<int> owner, std::size_t bucket_bytes,
                    const std::vector<bool>& stays_with_owner = {})
      : comm_(comm), params_(std::move(params)), owner_(std::move(owner)) {
    const int world = comm_.size();
    const auto cap = static_cast<std::int64_t>(
        std::max<std::size_t>(1, bucket_bytes / sizeof(U) / static_cast<std::size_t>(world)));
    for (const auto& p : params_) shapes_.push_back(p.shape());
    // chunks[r]: rank r's parameters cut into chunks of at most cap elements (a larger one alone).
    std::vector<std::vector<Chunk>> chunks(static_cast<std::size_t>(world));
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] < 0 || (!stays_with_owner.empty() && stays_with_owner[i])) continue;
      auto& mine = chunks[static_cast<std::size_t>(owner_[i])];
      if (mine.empty() || (mine.back().size > 0 && mine.back().size + params_[i].numel() > cap)) mine.emplace_back();
      mine.back().parameters.push_back(i);
      mine.back().size += params_[i].numel();
    }
    std::size_t count = 0;
    for (const auto& c : chunks) count = std::max(count, c.size());
    buckets_.resize(count);
    for (std::size_t k = 0; k < count; ++k) {
      Bucket& b = buckets_[k];
      for (const auto& c : chunks) {
        b.chunks.push_back(k < c.size() ? c[k] : Chunk{});
        b.block = std::max(b.block, b.chunks.back().size);
      }
    }
  }

  void drop_others_gradients() override {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (owner_[i] != comm_.rank()) params_[i].zero_grad();
  }

  void gather() override {
    if (comm_.size() == 1) return;  // one rank steps and holds everything
    const auto rank = static_cast<std::size_t>(comm_.rank());
    const auto world = static_cast<std::int64_t>(comm_.size());
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      Bucket& b = buckets_[k];
      b.send = Tensor<U, D>(Shape{b.block});
      b.received = Tensor<U, D>(Shape{b.block * world});
      std::int64_t at = 0;
      for (std::size_t i : b.chunks[rank].parameters) {
        D::copy(b.send.data() + at, params_[i].value().data(), static_cast<std::size_t>(params_[i].numel()));
        at += params_[i].numel();
      }
      if (at < b.block) D::fill(b.send.data() + at, U(0.0f), static_cast<std::size_t>(b.block - at));
      if constexpr (requires { comm_.label_next_collective(std::string()); })
        comm_.label_next_collective("parameter bucket " + std::to_string(k));
      b.request.emplace(comm_.iallgather(std::span<const U>(b.send.data(), static_cast<std::size_t>(b.block)),
                                         std::span<U>(b.received.data(), static_cast<std::size_t>(b.block * world))));
    }
    for (Bucket& b : buckets_) {
      b.request->wait();
      b.request.reset();
      for (std::size_t r = 0; r < b.chunks.size(); ++r) {
        if (r == rank) continue;
        std::int64_t at = static_cast<std::int64_t>(r) * b.block;
        for (std::size_t i : b.chunks[r].parameters) {
          Tensor<U, D>& value = params_[i].value();
          if (!value.defined()) value = Tensor<U, D>(shapes_[i]);
          D::copy(value.data(), b.received.data() + at, static_cast<std::size_t>(value.numel()));
          at += value.numel();
        }
      }
      b.send = Tensor<U, D>();
      b.received = Tensor<U, D>();
    }
  }

  void release_others() override {
    const auto rank = static_cast<std::size_t>(comm_.rank());
    for (const Bucket& b : buckets_)
      for (std::size_t r = 0; r < b.chunks.size(); ++r)
        if (r != rank)
          for (std::size_t i : b.chunks[r].parameters) params_[i].value() = Tensor<U, D>();
  }

  int owner(std::size_t parameter) const override { return owner_.at(parameter); }
  std::size_t gather_bucket_count() const override { return buckets_.size(); }

 private:
  struct Chunk {
    std::vector<std::size_t> parameters;
    std::int64_t size = 0;
  };
  struct Bucket {
    std::vector<Chunk> chunks;  // one per rank
    std::int64_t block = 0;
    Tensor<U, D> send, received;  // only while a gather runs
    std::optional<typename Comm::Request> request;
  };

  Comm& comm_;
  std::vector<Var<U, D>> params_;
  std::vector<Shape> shapes_;  // kept: a parameter let go has no value to tell its shape
  std::vector<int> owner_;
  std::vector<Bucket> buckets_;
};

}  // namespace ptrain::detail
