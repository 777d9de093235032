#pragma once
// DataLoader: batches of a Dataset in a Sampler's order, prepared ahead by background threads.
//
// Determinism: batch b of epoch e holds the examples at positions [b*B, (b+1)*B) of the
// sampler's order for e, and its transforms draw from an Rng seeded by (seed, e, b) alone, so a
// batch's content does not depend on which worker built it or when.
// Shutdown: starting another epoch or destroying the loader stops its workers after the example
// they are on. A worker's exception is rethrown by next() at the batch it happened in.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/sampler.hpp"
#include "ptrain/data/transforms.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

struct Batch {
  Tensor<float> inputs;  // [B, ...example shape]
  // B targets, or with target maps B * H * W in row-major order, the layout cross_entropy takes
  // for scores [B, classes, H, W]; target_shape says which ([B] or [B, H, W]).
  std::vector<std::int64_t> targets;
  Shape target_shape;
  std::vector<std::int64_t> indices;  // the dataset index of each row
  std::int64_t index = 0;             // the batch's position in its epoch
  std::int64_t size() const { return static_cast<std::int64_t>(indices.size()); }
};

struct LoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;    // without an explicit sampler: RandomSampler(seed) or SequentialSampler
  std::uint64_t seed = 0;  // the shuffle (without an explicit sampler) and the transforms' Rng
  bool drop_last = false;  // drop the last batch when it would be smaller than batch_size
  int num_workers = 1;     // threads preparing batches; 0 prepares each batch inside next()
  int prefetch = 2;        // batches prepared or in preparation ahead of the one consumed
};

template <Dataset D>
class DataLoader {
 public:
  // Visits the dataset in order, or shuffled by RandomSampler(seed) with options.shuffle. The
  // transform is a Transform, or a PairedTransform, which also gets each example's target map.
  template <class T = AnyTransform>
    requires Transform<T> || PairedTransform<T>
  DataLoader(D dataset, LoaderOptions options, T transform = {})
      : dataset_(std::move(dataset)), options_(options), transform_(as_paired(std::move(transform))) {
    const auto n = static_cast<std::int64_t>(dataset_.size());
    if (options.shuffle)
      set_sampler(RandomSampler(n, options.seed));
    else
      set_sampler(SequentialSampler(n));
  }

  // Visits the indices the sampler gives (a DistributedSampler for this rank's shard, say).
  template <Sampler S, class T = AnyTransform>
    requires Transform<T> || PairedTransform<T>
  DataLoader(D dataset, S sampler, LoaderOptions options, T transform = {})
      : dataset_(std::move(dataset)), options_(options), transform_(as_paired(std::move(transform))) {
    check(!options.shuffle,
          "DataLoader: shuffle = true with an explicit sampler: the sampler decides the order ",
          "(use a RandomSampler, or a DistributedSampler with shuffle = true)");
    set_sampler(std::move(sampler));
  }

  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  ~DataLoader() { stop(); }

  // Batches per epoch.
  std::int64_t size() const {
    const std::int64_t b = options_.batch_size;
    return options_.drop_last ? sampler_size_ / b : (sampler_size_ + b - 1) / b;
  }
  const D& dataset() const { return dataset_; }
  const LoaderOptions& options() const { return options_; }
  // The epoch in progress, or the last one started; -1 before the first.
  std::int64_t epoch() const { return epoch_; }
  // Numbers the next epoch started e (to resume a run); epochs otherwise count up from 0.
  void set_epoch(std::int64_t e) { next_epoch_ = e; }
  // The next epoch started begins at batch b, its first b batches left out unread (a run resumed
  // in the middle of an epoch); later epochs begin at 0.
  void set_first_batch(std::int64_t b) {
    check(b >= 0, "DataLoader: set_first_batch(", b, "): expected a batch index >= 0");
    first_batch_ = b;
  }

  // Abandons the epoch in progress, if any, and starts the next one.
  void start_epoch() {
    stop();
    epoch_ = next_epoch_++;
    auto state = std::make_unique<EpochState>();
    state->epoch = epoch_;
    state->order = sampler_(epoch_);
    check(static_cast<std::int64_t>(state->order.size()) == sampler_size_, "DataLoader: the sampler gave ",
          state->order.size(), " indices for epoch ", epoch_, ", expected its size() ", sampler_size_);
    state->num_batches = size();
    check(first_batch_ <= state->num_batches, "DataLoader: epoch ", epoch_, " has ", state->num_batches,
          " batches; cannot begin at batch ", first_batch_);
    state->claimed = state->consumed = std::exchange(first_batch_, 0);
    state->capacity = std::max(options_.prefetch, options_.num_workers);
    state->slots.resize(static_cast<std::size_t>(state->capacity));
    state_ = std::move(state);
    // stop() joins the workers before the state goes, so they may hold it by reference.
    EpochState* running = state_.get();
    const auto workers = std::min<std::int64_t>(options_.num_workers, running->num_batches - running->consumed);
    for (std::int64_t w = 0; w < workers; ++w)
      running->workers.emplace_back([this, running] { work(*running); });
  }

  // The next batch of the epoch in progress (starting one if none is), or nullopt at its end;
  // the call after that starts the next epoch.
  std::optional<Batch> next() {
    if (!state_) start_epoch();
    EpochState& state = *state_;
    if (state.consumed == state.num_batches) {
      stop();
      return std::nullopt;
    }
    const std::int64_t b = state.consumed;
    if (options_.num_workers == 0) {
      ++state.consumed;
      try {
        return make_batch(state, b, scratch_);
      } catch (...) {
        stop();
        throw;
      }
    }
    Slot slot;
    {
      std::unique_lock lock(state.mutex);
      Slot& ready = state.slots[static_cast<std::size_t>(b % state.capacity)];
      state.batch_ready.wait(lock, [&] { return ready.full; });
      slot = std::move(ready);
      ready = Slot{};
      ++state.consumed;
    }
    state.room.notify_all();
    if (slot.error) {
      stop();
      std::rethrow_exception(slot.error);
    }
    return std::move(slot.batch);
  }

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    Batch& operator*() const { return *current_; }
    Batch* operator->() const { return &*current_; }
    Iterator& operator++() {
      current_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) { return !it.current_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, std::optional<Batch> first) : loader_(loader), current_(std::move(first)) {}
    DataLoader* loader_ = nullptr;
    mutable std::optional<Batch> current_;
  };

  // Each range-for over the loader is one new epoch.
  Iterator begin() {
    start_epoch();
    auto first = next();
    return Iterator(this, std::move(first));
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
    bool full = false;
  };
  struct EpochState {
    std::int64_t epoch = 0;
    std::vector<std::int64_t> order;
    std::int64_t num_batches = 0;
    std::int64_t capacity = 1;
    std::int64_t claimed = 0;   // batches handed to workers (guarded by mutex)
    std::int64_t consumed = 0;  // batches returned by next() (written by the consumer under mutex)
    std::vector<Slot> slots;    // batch b waits in slots[b % capacity]
    std::atomic<bool> stopping{false};
    std::mutex mutex;
    std::condition_variable room, batch_ready;
    std::vector<std::thread> workers;
  };
  struct Stopped {};

  template <class T>
  static AnyPairedTransform as_paired(T transform) {
    if constexpr (std::is_same_v<T, AnyTransform>) {
      if (!transform) return {};
    }
    if constexpr (PairedTransform<T>)
      return transform;
    else
      return [t = std::move(transform)](Tensor<float>& x, Tensor<std::int64_t>&, Rng& rng) { t(x, rng); };
  }

  template <class S>
  void set_sampler(S sampler) {
    check(options_.batch_size > 0, "DataLoader: expected a positive batch_size, got ", options_.batch_size);
    check(options_.num_workers >= 0, "DataLoader: expected num_workers >= 0, got ", options_.num_workers);
    check(options_.prefetch >= 1, "DataLoader: expected prefetch >= 1, got ", options_.prefetch);
    sampler_size_ = static_cast<std::int64_t>(sampler.size());
    sampler_ = [s = std::move(sampler)](std::int64_t epoch) { return s.indices(epoch); };
  }

  void stop() {
    if (!state_) return;
    {
      std::lock_guard lock(state_->mutex);
      state_->stopping = true;
    }
    state_->room.notify_all();
    for (auto& t : state_->workers) t.join();
    state_.reset();
  }

  void work(EpochState& state) {
    Tensor<float> scratch;
    for (;;) {
      std::int64_t b = 0;
      {
        std::unique_lock lock(state.mutex);
        state.room.wait(lock, [&] {
          return state.stopping || state.claimed >= state.num_batches ||
                 state.claimed < state.consumed + state.capacity;
        });
        if (state.stopping || state.claimed >= state.num_batches) return;
        b = state.claimed++;
      }
      Slot slot;
      try {
        slot.batch = make_batch(state, b, scratch);
      } catch (const Stopped&) {
        return;
      } catch (...) {
        slot.error = std::current_exception();
      }
      slot.full = true;
      {
        std::lock_guard lock(state.mutex);
        state.slots[static_cast<std::size_t>(b % state.capacity)] = std::move(slot);
      }
      state.batch_ready.notify_all();
    }
  }

  // Copies the examples of batch b (transformed in `scratch` when there is a transform) into one
  // [B, ...] tensor, and their targets or target maps into one vector.
  Batch make_batch(EpochState& state, std::int64_t b, Tensor<float>& scratch) const {
    const std::int64_t begin = b * options_.batch_size;
    const std::int64_t end =
        std::min<std::int64_t>(begin + options_.batch_size, static_cast<std::int64_t>(state.order.size()));
    const std::int64_t n = end - begin;
    Batch batch;
    batch.index = b;
    batch.indices.reserve(static_cast<std::size_t>(n));
    Rng rng(detail::mix_seed(options_.seed, static_cast<std::uint64_t>(state.epoch),
                             static_cast<std::uint64_t>(b) + 1));
    Shape example_shape, map_shape;
    std::size_t example_numel = 0;
    const std::int64_t dataset_size = static_cast<std::int64_t>(dataset_.size());
    for (std::int64_t k = begin; k < end; ++k) {
      if (state.stopping.load(std::memory_order_relaxed)) throw Stopped{};
      const std::int64_t index = state.order[static_cast<std::size_t>(k)];
      check(index >= 0 && index < dataset_size, "DataLoader: the sampler gave index ", index, " at position ",
            k, " of epoch ", state.epoch, ", expected 0..", dataset_size - 1);
      Example example = dataset_.get(index);
      Tensor<float> x = std::move(example.input);
      Tensor<std::int64_t> map = std::move(example.target_map);
      if (transform_) {
        // The transform gets private copies: the example may be a view of the dataset.
        if (!(scratch.defined() && scratch.shape() == x.shape())) scratch = Tensor<float>(x.shape());
        scratch.copy_from(x);
        x = scratch;
        if (map.defined()) map = map.clone();
        transform_(x, map, rng);
      }
      if (k == begin) {
        example_shape = x.shape();
        example_numel = static_cast<std::size_t>(x.numel());
        Shape shape{n};
        for (auto e : example_shape) shape.push_back(e);
        batch.inputs = Tensor<float>(shape);
        batch.target_shape = Shape{n};
        if (map.defined()) {
          map_shape = map.shape();
          for (auto e : map_shape) batch.target_shape.push_back(e);
        }
        batch.targets.reserve(static_cast<std::size_t>(batch.target_shape.numel()));
      } else {
        check(x.shape() == example_shape, "DataLoader: example ", index, " has shape ", x.shape(),
              ", expected ", example_shape, " like the first example of batch ", b);
      }
      if (map.defined() != (map_shape.rank() > 0) || (map.defined() && map.shape() != map_shape))
        fail("DataLoader: example ", index, map.defined() ? " has a target map of shape " : " has no target map",
             map.defined() ? map.shape().str() : "", ", expected ",
             map_shape.rank() > 0 ? "a target map of shape " + map_shape.str() : "none",
             " like the first example of batch ", b);
      if (example_numel)
        std::memcpy(batch.inputs.data() + static_cast<std::size_t>(k - begin) * example_numel, x.data(),
                    example_numel * sizeof(float));
      if (map.defined())
        batch.targets.insert(batch.targets.end(), map.data(), map.data() + map.numel());
      else
        batch.targets.push_back(example.target);
      batch.indices.push_back(index);
    }
    return batch;
  }

  D dataset_;
  LoaderOptions options_;
  AnyPairedTransform transform_;
  std::int64_t sampler_size_ = 0;
  std::function<std::vector<std::int64_t>(std::int64_t)> sampler_;
  std::int64_t epoch_ = -1;
  std::int64_t next_epoch_ = 0;
  std::int64_t first_batch_ = 0;
  std::unique_ptr<EpochState> state_;
  Tensor<float> scratch_;  // num_workers == 0: the transform's copy, reused across batches
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASS(ptrain::DataLoader<ptrain::TensorDataset>)
