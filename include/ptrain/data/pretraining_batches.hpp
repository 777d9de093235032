#pragma once
// ALBERT's pre-training batches: sentence-order pairs (data/sentence_order.hpp), masked afresh
// each epoch (data/masked_lm.hpp), padded with [PAD] to max_seq_len, as tensors. Batch b of epoch
// e holds the pairs at positions [b B, (b + 1) B) of that epoch's order (the pairs in order, or
// shuffled by Rng(seed, e) with shuffle on); the last, smaller batch is kept.
//
// Data parallelism splits each batch's rows as data/bptt_batches.hpp splits columns: rank r of R
// takes the contiguous rows [r n / R, (r + 1) n / R) of a batch of n (column_share), so every rank
// runs the same number of steps and the R shares together are the serial batch, masked the same.
//
// The Trainer takes a batch as data/loader.hpp's Batch (trainer_batch) and counts epochs, while
// pre-training counts steps: PretrainingSteps reads the loader's batches on across its epochs and
// cuts the run into periods that fit() runs as its epochs (a log line and a checkpoint each).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/data/bptt_batches.hpp"
#include "ptrain/data/loader.hpp"
#include "ptrain/data/masked_lm.hpp"
#include "ptrain/data/sentence_order.hpp"
#include "ptrain/data/special_tokens.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// Ids held as float (exact below 2^24), as the embeddings take them; all [N, S] but sop_labels [N].
struct PretrainingBatch {
  Tensor<float> input_ids;
  Tensor<float> token_type_ids;  // 0 for [CLS] A [SEP], 1 for B [SEP] and the padding after it
  Tensor<float> attention_mask;  // 1 for tokens, 0 for padding
  Tensor<std::int64_t> mlm_labels;  // the original id where masked, ignored_label (-100) elsewhere
  Tensor<std::int64_t> sop_labels;  // 0: segments in order, 1: swapped
  std::vector<std::int64_t> indices;  // each row's pair
  std::int64_t index = 0;             // the batch's position in its epoch
};

struct PretrainingLoaderOptions {
  std::int64_t batch_size = 8;  // the whole batch, over all data-parallel ranks
  std::int64_t max_seq_len = 128;
  bool shuffle = true;
  std::uint64_t seed = 0;  // the order and the masking
  double mask_prob = 0.15;
  int rank = 0, ranks = 1;  // this rank's share of each batch
};

class PretrainingLoader {
 public:
  PretrainingLoader(std::vector<SentenceOrderPair> pairs, const SpecialTokenIds& special,
                    PretrainingLoaderOptions options)
      : pairs_(std::move(pairs)), special_(special), options_(options) {
    check(!pairs_.empty(), "PretrainingLoader: no sentence-order pairs: expected a corpus with at least one ",
          "document of two tokens or more");
    check(options_.batch_size >= options_.ranks, "PretrainingLoader: batch_size ", options_.batch_size, " for ",
          options_.ranks, " data-parallel ranks: expected at least one row per rank");
    column_share(options_.batch_size, options_.rank, options_.ranks);  // checks rank and ranks
    check(options_.max_seq_len >= 2 && options_.max_seq_len < (std::int64_t{1} << 24),
          "PretrainingLoader: max_seq_len ", options_.max_seq_len, ", expected 2 to 2^24 - 1");
    check(special_.vocab_size <= (std::int64_t{1} << 24), "PretrainingLoader: a vocabulary of ",
          special_.vocab_size, " tokens: expected at most 2^24 (ids travel as float)");
    for (std::size_t k = 0; k < pairs_.size(); ++k) {
      const auto& p = pairs_[k];
      const auto length = static_cast<std::int64_t>(p.input_ids.size());
      check(length <= options_.max_seq_len && p.first_b > 0 && p.first_b < length, "PretrainingLoader: pair ", k,
            " has ", length, " tokens, segment B from ", p.first_b, ": expected at most max_seq_len ",
            options_.max_seq_len, " tokens and a non-empty segment A");
    }
  }

  const std::vector<SentenceOrderPair>& pairs() const { return pairs_; }
  const PretrainingLoaderOptions& options() const { return options_; }
  std::size_t size() const {
    const auto n = static_cast<std::int64_t>(pairs_.size());
    return static_cast<std::size_t>((n + options_.batch_size - 1) / options_.batch_size);
  }
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }
  // Resuming mid-epoch: the next pass begins at batch first.
  void set_first_batch(std::int64_t first) { first_ = first; }

  // The pairs of epoch e in the order its batches take them.
  std::vector<std::int64_t> order(std::int64_t epoch) const {
    std::vector<std::int64_t> out(pairs_.size());
    std::iota(out.begin(), out.end(), 0);
    if (options_.shuffle) {
      Rng rng(detail::mix_seed(options_.seed, static_cast<std::uint64_t>(epoch), 1));
      for (std::size_t k = out.size(); k > 1; --k) std::swap(out[k - 1], out[rng.below(k)]);
    }
    return out;
  }

  // This rank's share of batch b of epoch e.
  PretrainingBatch batch(std::int64_t epoch, std::int64_t b, const std::vector<std::int64_t>& order) const {
    const auto n = static_cast<std::int64_t>(order.size());
    check(b >= 0 && b < static_cast<std::int64_t>(size()), "PretrainingLoader: batch ", b, " of an epoch of ", size());
    const std::int64_t begin = b * options_.batch_size, rows = std::min(options_.batch_size, n - begin);
    check(rows >= options_.ranks, "PretrainingLoader: the last batch has ", rows, " pairs for ", options_.ranks,
          " data-parallel ranks: expected at least one per rank (choose a batch size that divides ", n,
          " or fewer ranks)");
    const ColumnShare share = column_share(rows, options_.rank, options_.ranks);
    const std::int64_t mine = share.end - share.begin, s = options_.max_seq_len;
    PretrainingBatch out{Tensor<float>::full({mine, s}, static_cast<float>(special_.pad)),
                         Tensor<float>::zeros({mine, s}),
                         Tensor<float>::zeros({mine, s}),
                         Tensor<std::int64_t>::full({mine, s}, ignored_label),
                         Tensor<std::int64_t>(Shape{mine}),
                         {},
                         b};
    const MaskingOptions masking{options_.mask_prob, options_.seed};
    for (std::int64_t r = 0; r < mine; ++r) {
      const std::int64_t example = order[static_cast<std::size_t>(begin + share.begin + r)];
      const SentenceOrderPair& pair = pairs_[static_cast<std::size_t>(example)];
      const MaskedTokens masked = mask_tokens(pair.input_ids, special_, masking, epoch, example);
      for (std::size_t t = 0; t < masked.input_ids.size(); ++t) {
        const std::int64_t at = r * s + static_cast<std::int64_t>(t);
        out.input_ids.data()[at] = static_cast<float>(masked.input_ids[t]);
        out.attention_mask.data()[at] = 1;
        out.mlm_labels.data()[at] = masked.labels[t];
      }
      std::fill(out.token_type_ids.data() + r * s + pair.first_b, out.token_type_ids.data() + (r + 1) * s, 1.0f);
      out.sop_labels.data()[r] = pair.sop_label;
      out.indices.push_back(example);
    }
    return out;
  }

  class iterator {
   public:
    using value_type = PretrainingBatch;
    using difference_type = std::ptrdiff_t;
    iterator(const PretrainingLoader* loader, std::int64_t b, std::vector<std::int64_t> order)
        : loader_(loader), b_(b), order_(std::move(order)) {}
    PretrainingBatch operator*() const { return loader_->batch(loader_->epoch_, b_, order_); }
    iterator& operator++() {
      ++b_;
      return *this;
    }
    bool operator==(const iterator& other) const { return b_ == other.b_; }

   private:
    const PretrainingLoader* loader_;
    std::int64_t b_;
    std::vector<std::int64_t> order_;
  };
  iterator begin() {
    const auto first = std::min<std::int64_t>(std::exchange(first_, 0), static_cast<std::int64_t>(size()));
    return {this, first, order(epoch_)};
  }
  iterator end() const { return {this, static_cast<std::int64_t>(size()), {}}; }

 private:
  std::vector<SentenceOrderPair> pairs_;
  SpecialTokenIds special_;
  PretrainingLoaderOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t first_ = 0;
};

// A batch as the Trainer takes it: inputs [N, 3, S], each row's input_ids, token_type_ids and
// attention_mask (AlbertForPreTraining's one-tensor form, models/albert.hpp), and target maps
// [N, S + 1], each row's MLM labels then its SOP label (what AlbertPreTraining's batch_targets reads,
// tasks/albert_pretraining.hpp).
inline Batch trainer_batch(const PretrainingBatch& b) {
  const std::int64_t n = b.mlm_labels.size(0), s = b.mlm_labels.size(1);
  Batch out{Tensor<float>(Shape{n, 3, s}), {}, Shape{n, s + 1}, b.indices, b.index};
  out.targets.reserve(static_cast<std::size_t>(n * (s + 1)));
  for (std::int64_t r = 0; r < n; ++r) {
    float* row = out.inputs.data() + r * 3 * s;
    std::copy_n(b.input_ids.data() + r * s, s, row);
    std::copy_n(b.token_type_ids.data() + r * s, s, row + s);
    std::copy_n(b.attention_mask.data() + r * s, s, row + 2 * s);
    out.targets.insert(out.targets.end(), b.mlm_labels.data() + r * s, b.mlm_labels.data() + (r + 1) * s);
    out.targets.push_back(b.sop_labels.data()[r]);
  }
  return out;
}

// A run of `steps` batches, read on across the loader's epochs: run batch g is batch g mod B of the
// loader's epoch g / B (B batches an epoch), as trainer_batch. The run is cut into periods of
// `period` batches, which the Trainer runs as its epochs: fit(run, run.periods()) trains the
// `steps` batches, reports each period's metrics as an epoch's and checkpoints at its end; period p
// (set_epoch(p)) holds run batches [p period, min((p + 1) period, steps)).
class PretrainingSteps {
 public:
  PretrainingSteps(PretrainingLoader loader, std::int64_t steps, std::int64_t period)
      : loader_(std::move(loader)), steps_(steps), period_(period) {
    check(steps_ >= 1 && period_ >= 1, "PretrainingSteps: ", steps_, " steps in periods of ", period_,
          ": expected at least one of each");
  }

  const PretrainingLoader& loader() const { return loader_; }
  std::int64_t steps() const { return steps_; }
  int periods() const { return static_cast<int>((steps_ + period_ - 1) / period_); }
  // The batches of the current period.
  std::size_t size() const {
    return static_cast<std::size_t>(std::clamp<std::int64_t>(steps_ - period_index_ * period_, 0, period_));
  }
  void set_epoch(std::int64_t period) { period_index_ = period; }
  // Resuming mid-period: the next pass begins at the period's batch first.
  void set_first_batch(std::int64_t first) { first_ = first; }

  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator(const PretrainingSteps* run, std::int64_t g) : run_(run), g_(g) {}
    Batch operator*() const {
      const auto per_epoch = static_cast<std::int64_t>(run_->loader_.size());
      const std::int64_t epoch = g_ / per_epoch;
      if (epoch != order_epoch_) {  // the order of the loader's epoch, made once per epoch
        order_ = run_->loader_.order(epoch);
        order_epoch_ = epoch;
      }
      return trainer_batch(run_->loader_.batch(epoch, g_ % per_epoch, order_));
    }
    iterator& operator++() {
      ++g_;
      return *this;
    }
    bool operator==(const iterator& other) const { return g_ == other.g_; }

   private:
    const PretrainingSteps* run_;
    std::int64_t g_;
    mutable std::int64_t order_epoch_ = -1;
    mutable std::vector<std::int64_t> order_;
  };
  iterator begin() {
    const auto first = std::min<std::int64_t>(std::exchange(first_, 0), static_cast<std::int64_t>(size()));
    return {this, period_start() + first};
  }
  iterator end() const { return {this, period_start() + static_cast<std::int64_t>(size())}; }

 private:
  std::int64_t period_start() const { return std::min(period_index_ * period_, steps_); }

  PretrainingLoader loader_;
  std::int64_t steps_, period_;
  std::int64_t period_index_ = 0;
  std::int64_t first_ = 0;
};

}  // namespace ptrain
