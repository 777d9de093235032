#pragma once
// Bucketed, overlapped gradient averaging. Trainable parameters are packed, in reverse order of
// registration (roughly the order backward finishes them), into buckets of about bucket_bytes.
// A parameter's gradient-ready hook copies (and casts) its gradient into its bucket; the bucket
// whose last gradient arrives starts a non-blocking allreduce while backward goes on.
//
// In host memory with gradients sent in their own type, a bucket is no buffer of its own: each
// gradient is scaled in place and reduced where it lies, one non-blocking allreduce per gradient,
// started together when the bucket's last gradient arrives. Packing the CIFAR ResNet-18's 44 MB of
// float gradients into buckets took about 19 ms of each 1.4 s step at 2 ranks, two fifths of the
// hooks' time (bench/data_parallel.cpp); MPI's per-message cost over shared memory is a
// microsecond or so. On a GPU, where each reduction is a kernel launch, a bucket is one buffer.
//
// Given an owner per parameter (Sharded<Zero2>), a bucket is reduce-scattered instead: it is laid
// out as one block per rank holding that rank's parameters (each block as long as the longest,
// the others padded with zeros), and each rank receives the average of its own block only. The
// full gradient is let go once copied into its bucket; after finish() a rank holds the gradients
// of its own parameters (copies of their own) and none of the others'; a bucket's buffer lives
// from its first gradient until its reduction is seen done, its shard from the reduction's start
// until it is unpacked.
//
// Collectives must start in the same order on every rank, so buckets start strictly in index
// order: a bucket that fills early waits for its predecessors. A parameter that got no gradient
// this step (an unused branch) is sent as zeros when the step ends, so no rank waits forever.
//
// On any device D (Var<T, D>) the buckets are Tensor<Wire, D>; the casts and averages run through
// kernels/cast.hpp's dispatch points and the zero fills through D::fill; the communicator gets a
// span over the bucket's memory (device memory for Cuda, reduced by NcclComm).
//
// With a timeline active (core/timeline.hpp) each bucket's reduction is a span from its launch to
// the first moment this rank sees it complete (a test between gradients, or the final wait).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <type_traits>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/kernels/cast.hpp"
#include "ptrain/kernels/executor_for.hpp"

namespace ptrain::detail {

// The scalar type is known only at setup; the policy holds its synchroniser through this.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // false during the micro-steps of gradient accumulation that do not end in an optimizer step.
  virtual void set_sync(bool on) = 0;
  // Starts what is left, waits for everything and leaves the averaged gradients in .grad.
  virtual void finish() = 0;
  virtual std::size_t bucket_count() const = 0;
};

template <class T, Communicator Comm, class Wire, class D = Cpu>
class GradientBuckets final : public GradientSync {
  static constexpr bool reduce_in_place = std::is_same_v<Wire, T> && std::is_base_of_v<Cpu, D>;

 public:
  // owners empty: every rank gets every average. Else owners[i] (a rank) keeps params[i]'s.
  GradientBuckets(Comm& comm, std::vector<Var<T, D>> params, std::size_t bucket_bytes, std::vector<int> owners = {})
      : comm_(comm), scatter_(!owners.empty()), in_place_(reduce_in_place && !scatter_) {
    check(!scatter_ || owners.size() == params.size(), "gradient buckets: ", owners.size(), " owners for ",
          params.size(), " parameters");
    std::int64_t in_bucket = 0;
    for (std::size_t i = params.size(); i-- > 0;) {
      const std::int64_t n = params[i].numel();
      if (buckets_.empty() || (in_bucket > 0 && static_cast<std::size_t>(in_bucket + n) * sizeof(T) > bucket_bytes)) {
        buckets_.emplace_back();
        in_bucket = 0;
      }
      Bucket& b = buckets_.back();
      slots_.push_back({params[i], buckets_.size() - 1, in_bucket, n, false, scatter_ ? owners[i] : -1});
      b.slots.push_back(slots_.size() - 1);
      in_bucket += n;
      b.size = b.block = in_bucket;
    }
    for (auto& b : buckets_) {
      if (scatter_) lay_out_blocks(b);
      if (!scatter_ && !in_place_) b.buffer = Tensor<Wire, D>({b.size});  // a reduce-scatter's only while it is reduced
      b.pending = b.slots.size();
    }
    for (std::size_t s = 0; s < slots_.size(); ++s)
      slots_[s].param.on_grad_ready([this, s](Node<T, D>& node) { gradient_ready(s, node); });
  }
  ~GradientBuckets() override {
    for (auto& slot : slots_) slot.param.on_grad_ready(nullptr);
  }
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  void set_sync(bool on) override { sync_ = on; }
  std::size_t bucket_count() const override { return buckets_.size(); }

  void finish() override {
    for (std::size_t b = next_; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      for (std::size_t s : bucket.slots)
        if (!slots_[s].ready) {
          Slot& slot = slots_[s];
          if (in_place_) {
            slot.param.grad() = Tensor<T, D>(slot.param.shape());
            slot.param.node()->grad_owned = true;
            D::fill(slot.param.grad().data(), T(0.0f), static_cast<std::size_t>(slot.numel));
          } else {
            D::fill(buffer_of(bucket) + slot.offset, Wire(0.0f), static_cast<std::size_t>(slot.numel));
          }
          slot.ready = true;
        }
      bucket.pending = 0;
    }
    start_ready_buckets();
    const T inverse_world = T(1) / static_cast<T>(comm_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      for (auto& request : bucket.requests) request.wait();
      bucket.requests.clear();
      completed(b);
      // Reduce-scattered: this rank's block arrived in the shard, the others' gradients are not kept.
      const Tensor<Wire, D>& reduced = scatter_ ? bucket.shard : bucket.buffer;
      const std::int64_t first = scatter_ ? comm_.rank() * bucket.block : 0;
      for (std::size_t s : bucket.slots) {
        // The later buckets' reductions move on only inside MPI: poke them between the copies.
        poke(b + 1, buckets_.size());
        Slot& slot = slots_[s];
        slot.ready = false;
        if (in_place_) continue;  // averaged where it lies
        if (scatter_ && slot.owner != comm_.rank()) {
          slot.param.zero_grad();
          continue;
        }
        Tensor<T, D>& grad = slot.param.grad();
        const std::int64_t at = slot.offset - first;
        if constexpr (std::is_same_v<Wire, T>) {
          if (scatter_) {
            // Reduce-scattered: a copy of its own, so that the shard (its block padded to the
            // longest rank's) goes with the bucket and a rank holds its own gradients once.
            grad = Tensor<T, D>(slot.param.shape());
            D::copy(grad.data(), reduced.data() + at, static_cast<std::size_t>(slot.numel));
          } else {
            // Averaged on the way in: the gradient becomes a view of the reduced bucket, no copy
            // back (DDP's gradient_as_bucket_view). The next step's zero_grad lets go of it.
            grad = reduced.slice(at, at + slot.numel).reshape(slot.param.shape());
          }
        } else {
          if (!grad.defined()) grad = Tensor<T, D>(slot.param.shape());
          kernels::cast_scaled(kernels::executor_for<D>{}, reduced.data() + at, grad.data(), slot.numel,
                               inverse_world);
        }
      }
      if (scatter_) bucket.buffer = bucket.shard = Tensor<Wire, D>();
      bucket.pending = bucket.slots.size();
    }
    next_ = 0;
  }

 private:
  struct Slot {
    Var<T, D> param;
    std::size_t bucket;
    std::int64_t offset, numel;  // in the bucket's buffer
    bool ready;
    int owner;  // the rank that keeps its average when reduce-scattered, else -1
  };
  struct Bucket {
    std::vector<std::size_t> slots;
    std::int64_t size = 0;   // the buffer's elements
    std::int64_t block = 0;  // reduce-scattered: one rank's block (size = ranks x block)
    Tensor<Wire, D> buffer;
    Tensor<Wire, D> shard;  // reduce-scattered: this rank's block, averaged
    std::size_t pending = 0;
    std::vector<typename Comm::Request> requests;  // its reductions in flight: one, or one per gradient in place
    double launched_us = -1;  // on the active timeline, until the reduction is seen complete
  };

  // The bucket's buffer: always there for an allreduce; made (zeroed: the padding between blocks
  // stays zero) by the first gradient of a step for a reduce-scatter, and let go after it.
  Wire* buffer_of(Bucket& b) {
    if (!b.buffer.defined()) {
      b.buffer = Tensor<Wire, D>({b.size});
      D::fill(b.buffer.data(), Wire(0.0f), static_cast<std::size_t>(b.size));
    }
    return b.buffer.data();
  }

  // Each rank's parameters together in its block, in the bucket's order; blocks as long as the longest.
  void lay_out_blocks(Bucket& b) {
    std::vector<std::int64_t> filled(static_cast<std::size_t>(comm_.size()), 0);
    for (std::size_t s : b.slots) {
      const int owner = slots_[s].owner;
      check(0 <= owner && owner < comm_.size(), "gradient buckets: owner ", owner, " is not a rank of ", comm_.size());
      slots_[s].offset = filled[static_cast<std::size_t>(owner)];
      filled[static_cast<std::size_t>(owner)] += slots_[s].numel;
    }
    b.block = *std::max_element(filled.begin(), filled.end());
    b.size = b.block * comm_.size();
    for (std::size_t s : b.slots) slots_[s].offset += slots_[s].owner * b.block;
  }

  void gradient_ready(std::size_t s, Node<T, D>& node) {
    Slot& slot = slots_[s];
    if (!sync_ || slot.ready || !node.grad.defined()) return;
    Bucket& bucket = buckets_[slot.bucket];
    // Same type: scaled by 1/world on the way, so that the sum is the average; in place where the
    // gradient is reduced where it lies (backward hands over a gradient of the leaf's own,
    // autograd/backward.hpp), else into the bucket. The gradient may itself be last step's view
    // of that very range of the bucket (accumulation without zero_grad): in place too.
    if constexpr (std::is_same_v<Wire, T>) {
      Wire* dst = in_place_ ? node.grad.data() : buffer_of(bucket) + slot.offset;
      kernels::cast_scaled(kernels::executor_for<D>{}, node.grad.data(), dst, slot.numel,
                           T(1) / static_cast<T>(comm_.size()));
    } else {
      kernels::cast(kernels::executor_for<D>{}, node.grad.data(), buffer_of(bucket) + slot.offset, slot.numel);
    }
    slot.ready = true;
    if (scatter_) {  // its bucket holds it now; the rank that owns it gets the average
      node.grad = Tensor<T, D>();
      node.grad_owned = false;
    }
    if (--bucket.pending == 0) start_ready_buckets();
    // MPI moves a non-blocking collective only while the process is inside MPI: poke the
    // reductions in flight each time backward hands over a gradient.
    poke(0, next_);
  }

  // Tests the reductions in flight in the order they started, up to the first unfinished one: one
  // MPI call moves every one on, and they end about in that order.
  void poke(std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      for (auto& request : buckets_[b].requests)
        if (!request.test()) return;
      // A reduce-scatter's send buffer goes as soon as its reduction is done (its shard stays).
      if (scatter_) buckets_[b].buffer = Tensor<Wire, D>();
      completed(b);
    }
  }

  void completed(std::size_t b) {
    Bucket& bucket = buckets_[b];
    if (bucket.launched_us < 0) return;
    if (Timeline* timeline = active_timeline())
      timeline->add(SpanKind::bucket, static_cast<int>(b), bucket.launched_us, timeline->now());
    bucket.launched_us = -1;
  }

  void start_ready_buckets() {
    while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
      const std::size_t b = next_++;
      Bucket& bucket = buckets_[b];
      if (Timeline* timeline = active_timeline()) bucket.launched_us = timeline->now();
      if (in_place_) {
        for (std::size_t s : bucket.slots) {
          label_collective(b);
          Tensor<T, D>& grad = slots_[s].param.grad();
          bucket.requests.push_back(comm_.iallreduce_sum(std::span<T>(grad.data(), static_cast<std::size_t>(grad.numel()))));
        }
        continue;
      }
      label_collective(b);
      const std::span<Wire> whole(bucket.buffer.data(), static_cast<std::size_t>(bucket.size));
      if (scatter_) {
        bucket.shard = Tensor<Wire, D>({bucket.block});
        const std::span<Wire> mine(bucket.shard.data(), static_cast<std::size_t>(bucket.block));
        bucket.requests.push_back(comm_.ireduce_scatter_sum(std::span<const Wire>(whole), mine));
      } else {
        bucket.requests.push_back(comm_.iallreduce_sum(whole));
      }
    }
  }

  void label_collective(std::size_t b) {
    if constexpr (requires { comm_.label_next_collective(std::string()); })
      comm_.label_next_collective("bucket " + std::to_string(b));
  }

  Comm& comm_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::size_t next_ = 0;  // buckets [0, next_) have started
  bool sync_ = true;
  bool scatter_;
  bool in_place_;  // the gradients reduced where they lie (the top of the file)
};

}  // namespace ptrain::detail
