#pragma once
// Which rank steps which of the optimizer's parameters (Sharded's partition), and the bucketed
// all-gather that brings every rank the parameters the others stepped.
//
// The partition is by whole parameters, balanced by size: the trainable parameters, largest first
// (equal sizes by index), each go to the rank that holds the fewest elements so far (the lowest
// rank on a tie). Every rank computes it alike from the shapes, so nothing is exchanged. The
// largest rank's share is at most the mean plus the largest parameter (greedy LPT scheduling).
//
// The all-gather packs each rank's parameters, in index order, into chunks of about
// bucket_bytes / world; bucket k is chunk k of every rank, exchanged as one all-gather of blocks as
// large as its largest chunk (a rank with less sends padding). Every bucket starts at once and is
// unpacked as it completes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/communicator.hpp"

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

// What Sharded holds once the optimizer's parameters are known (their scalar type is known only then).
class OptimizerShards {
 public:
  virtual ~OptimizerShards() = default;
  // The gradients of the parameters another rank steps are dropped: the optimizer skips them and
  // never makes their state.
  virtual void drop_others_gradients() = 0;
  // Every parameter takes the value its owner stepped it to.
  virtual void gather() = 0;
  virtual int owner(std::size_t parameter) const = 0;
  virtual std::size_t gather_bucket_count() const = 0;
};

template <class U, Communicator Comm, class D>
class ShardedParameters final : public OptimizerShards {
 public:
  // owner: balanced_partition of these parameters' sizes.
  ShardedParameters(Comm& comm, std::vector<Var<U, D>> params, std::vector<int> owner, std::size_t bucket_bytes)
      : comm_(comm), params_(std::move(params)), owner_(std::move(owner)) {
    const int world = comm_.size();
    const auto cap = static_cast<std::int64_t>(
        std::max<std::size_t>(1, bucket_bytes / sizeof(U) / static_cast<std::size_t>(world)));
    // chunks[r]: rank r's parameters cut into chunks of at most cap elements (a larger one alone).
    std::vector<std::vector<Chunk>> chunks(static_cast<std::size_t>(world));
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] < 0) continue;
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
          D::copy(params_[i].value().data(), b.received.data() + at, static_cast<std::size_t>(params_[i].numel()));
          at += params_[i].numel();
        }
      }
      b.send = Tensor<U, D>();
      b.received = Tensor<U, D>();
    }
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
  std::vector<int> owner_;
  std::vector<Bucket> buckets_;
};

}  // namespace ptrain::detail
