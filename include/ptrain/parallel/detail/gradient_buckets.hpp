#pragma once
// Bucketed, overlapped gradient averaging. Trainable parameters are packed, in reverse order of
// registration (roughly the order backward finishes them), into buckets of about bucket_bytes.
// A parameter's gradient-ready hook copies (and casts) its gradient into its bucket; the bucket
// whose last gradient arrives starts a non-blocking allreduce while backward goes on.
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
#include <cstdint>
#include <memory>
#include <optional>
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
class BucketedAllreduce final : public GradientSync {
 public:
  BucketedAllreduce(Comm& comm, std::vector<Var<T, D>> params, std::size_t bucket_bytes) : comm_(comm) {
    std::int64_t in_bucket = 0;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const std::int64_t n = it->numel();
      if (buckets_.empty() || (in_bucket > 0 && static_cast<std::size_t>(in_bucket + n) * sizeof(T) > bucket_bytes)) {
        buckets_.emplace_back();
        in_bucket = 0;
      }
      Bucket& b = buckets_.back();
      slots_.push_back({*it, buckets_.size() - 1, in_bucket, n, false});
      b.slots.push_back(slots_.size() - 1);
      in_bucket += n;
      b.size = in_bucket;
    }
    for (auto& b : buckets_) {
      b.buffer = Tensor<Wire, D>({b.size});
      b.pending = b.slots.size();
    }
    for (std::size_t s = 0; s < slots_.size(); ++s)
      slots_[s].param.on_grad_ready([this, s](Node<T, D>& node) { gradient_ready(s, node); });
  }
  ~BucketedAllreduce() override {
    for (auto& slot : slots_) slot.param.on_grad_ready(nullptr);
  }
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;

  void set_sync(bool on) override { sync_ = on; }
  std::size_t bucket_count() const override { return buckets_.size(); }

  void finish() override {
    for (std::size_t b = next_; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      for (std::size_t s : bucket.slots)
        if (!slots_[s].ready) {
          D::fill(bucket.buffer.data() + slots_[s].offset, Wire(0.0f), static_cast<std::size_t>(slots_[s].numel));
          slots_[s].ready = true;
        }
      bucket.pending = 0;
    }
    start_ready_buckets();
    const T inverse_world = T(1) / static_cast<T>(comm_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      bucket.request->wait();
      bucket.request.reset();
      completed(b);
      for (std::size_t s : bucket.slots) {
        // The later buckets' reductions move on only inside MPI: poke them between the copies.
        poke(b + 1, buckets_.size());
        Slot& slot = slots_[s];
        Tensor<T, D>& grad = slot.param.grad();
        if constexpr (std::is_same_v<Wire, T>) {
          // Averaged on the way in: the gradient becomes a view of the reduced bucket, no copy back
          // (DDP's gradient_as_bucket_view). The next step's zero_grad lets go of it.
          grad = bucket.buffer.slice(slot.offset, slot.offset + slot.numel).reshape(slot.param.shape());
        } else {
          if (!grad.defined()) grad = Tensor<T, D>(slot.param.shape());
          kernels::cast_scaled(kernels::executor_for<D>{}, bucket.buffer.data() + slot.offset, grad.data(),
                               slot.numel, inverse_world);
        }
        slot.ready = false;
      }
      bucket.pending = bucket.slots.size();
    }
    next_ = 0;
  }

 private:
  struct Slot {
    Var<T, D> param;
    std::size_t bucket;
    std::int64_t offset, numel;
    bool ready;
  };
  struct Bucket {
    std::vector<std::size_t> slots;
    std::int64_t size = 0;
    Tensor<Wire, D> buffer;
    std::size_t pending = 0;
    std::optional<typename Comm::Request> request;
    double launched_us = -1;  // on the active timeline, until the reduction is seen complete
  };

  void gradient_ready(std::size_t s, Node<T, D>& node) {
    Slot& slot = slots_[s];
    if (!sync_ || slot.ready || !node.grad.defined()) return;
    Bucket& bucket = buckets_[slot.bucket];
    Wire* dst = bucket.buffer.data() + slot.offset;
    // Same type: scaled by 1/world here, so the reduced bucket is already the average. The
    // gradient may itself be last step's view of this very range (accumulation without
    // zero_grad): in place.
    if constexpr (std::is_same_v<Wire, T>)
      kernels::cast_scaled(kernels::executor_for<D>{}, node.grad.data(), dst, slot.numel,
                           T(1) / static_cast<T>(comm_.size()));
    else
      kernels::cast(kernels::executor_for<D>{}, node.grad.data(), dst, slot.numel);
    slot.ready = true;
    if (--bucket.pending == 0) start_ready_buckets();
    // MPI moves a non-blocking collective only while the process is inside MPI: poke the
    // reductions in flight each time backward hands over a gradient.
    poke(0, next_);
  }

  void poke(std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b)
      if (buckets_[b].request && buckets_[b].request->test()) completed(b);
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
      Bucket& bucket = buckets_[next_];
      if constexpr (requires { comm_.label_next_collective(std::string()); })
        comm_.label_next_collective("bucket " + std::to_string(next_));
      ++next_;
      if (Timeline* timeline = active_timeline()) bucket.launched_us = timeline->now();
      bucket.request.emplace(comm_.iallreduce_sum(std::span<Wire>(bucket.buffer.data(), static_cast<std::size_t>(bucket.size))));
    }
  }

  Comm& comm_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::size_t next_ = 0;  // buckets [0, next_) have started
  bool sync_ = true;
};

}  // namespace ptrain::detail
