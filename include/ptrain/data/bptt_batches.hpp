#pragma once
// A token stream cut as PyTorch's language-modelling tutorial cuts it. batchify lays the stream out
// as `batch` columns side by side, [rows, batch] with rows = tokens / batch (the remainder dropped):
// column j holds tokens j * rows ... (j + 1) * rows - 1, so each column reads on in order. get_batch
// takes the windows of rows [i, i + bptt) as input and [i + 1, i + 1 + bptt) as target (shorter at
// the end), both sequence-first [S, N]; BpttLoader iterates them for i = 0, bptt, 2 bptt, ... as the
// tutorial's training loop does, in the same order every epoch.
//
// Data parallelism splits the columns, not the windows: rank r of R takes the contiguous columns
// [r * N / R, (r + 1) * N / R) of every window (column_share; equal shares when R divides N, as
// training needs for its averaged gradients to be the serial ones), so every rank runs the same
// number of steps and the R shares together are the serial batch.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain {

// The tutorial's batchify(data, bsz): [tokens / batch, batch].
inline Tensor<std::int64_t> batchify(const std::vector<std::int64_t>& ids, std::int64_t batch) {
  check(batch >= 1, "batchify: batch ", batch, ": expected at least 1 column");
  const auto rows = static_cast<std::int64_t>(ids.size()) / batch;
  Tensor<std::int64_t> source(Shape{rows, batch});
  std::int64_t* out = source.data();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < batch; ++j) out[r * batch + j] = ids[static_cast<std::size_t>(j * rows + r)];
  return source;
}

struct ColumnShare {
  std::int64_t begin = 0, end = 0;
};

// Rank rank's contiguous share of columns among ranks ranks.
inline ColumnShare column_share(std::int64_t columns, int rank, int ranks) {
  check(ranks >= 1 && rank >= 0 && rank < ranks, "column_share: rank ", rank, " of ", ranks,
        ": expected 0 <= rank < ranks");
  check(columns >= ranks, "column_share: ", columns, " columns for ", ranks,
        " data-parallel ranks: expected at least one column per rank");
  return {columns * rank / ranks, columns * (rank + 1) / ranks};
}

// The columns of source [rows, N] that rank takes, [rows, share] (a copy).
inline Tensor<std::int64_t> rank_columns(const Tensor<std::int64_t>& source, int rank, int ranks) {
  check(source.rank() == 2, "rank_columns: source of shape ", source.shape(), ": expected [rows, columns]");
  const std::int64_t rows = source.size(0), columns = source.size(1);
  const ColumnShare share = column_share(columns, rank, ranks);
  const std::int64_t width = share.end - share.begin;
  Tensor<std::int64_t> mine(Shape{rows, width});
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy_n(source.data() + r * columns + share.begin, width, mine.data() + r * width);
  return mine;
}

// A window of tokens: inputs as the models take them (whole numbers held as float; exact below
// 2^24) and the next token of each position, both [S, N].
struct BpttBatch {
  Tensor<float> inputs;
  Tensor<std::int64_t> targets;
};

// The tutorial's get_batch(source, i): S = min(bptt, rows - 1 - i).
inline BpttBatch get_batch(const Tensor<std::int64_t>& source, std::int64_t i, std::int64_t bptt) {
  check(source.rank() == 2, "get_batch: source of shape ", source.shape(), ": expected [rows, columns]");
  check(bptt >= 1 && i >= 0 && i + 1 < source.size(0), "get_batch: window at row ", i, " (bptt ", bptt,
        ") of a source of ", source.size(0), " rows: expected bptt >= 1 and 0 <= i < rows - 1");
  const std::int64_t length = std::min(bptt, source.size(0) - 1 - i);
  const Tensor<std::int64_t> window = source.slice(i, i + length);
  Tensor<float> inputs(window.shape());
  std::copy_n(window.data(), window.numel(), inputs.data());
  return {std::move(inputs), source.slice(i + 1, i + 1 + length).clone()};
}

// A window batch-first, inputs and targets [N, S]: what a pipeline cuts into micro-batches (it splits
// the first dimension, and a window's columns are its samples).
inline BpttBatch batch_first(const BpttBatch& b) {
  const std::int64_t length = b.targets.size(0), columns = b.targets.size(1);
  BpttBatch out{Tensor<float>(Shape{columns, length}), Tensor<std::int64_t>(Shape{columns, length})};
  for (std::int64_t s = 0; s < length; ++s)
    for (std::int64_t n = 0; n < columns; ++n) {
      out.inputs.data()[n * length + s] = b.inputs.data()[s * columns + n];
      out.targets.data()[n * length + s] = b.targets.data()[s * columns + n];
    }
  return out;
}

// get_batch(source, i, bptt) for i = 0, bptt, 2 bptt, ... < rows - 1: the Trainer's loader;
// sequence-first batches, or batch-first ones (layout) for a model built batch_first.
class BpttLoader {
 public:
  enum class Layout { sequence_first, batch_first };

  BpttLoader(Tensor<std::int64_t> source, std::int64_t bptt, Layout layout = Layout::sequence_first)
      : source_(std::move(source)), bptt_(bptt), layout_(layout) {
    check(source_.rank() == 2 && source_.size(0) >= 2, "BpttLoader: source of shape ", source_.shape(),
          ": expected [rows, columns] with at least 2 rows (an input and its next token): too few tokens for "
          "the batch size");
    check(bptt_ >= 1, "BpttLoader: bptt ", bptt_, ": expected at least 1");
    const std::int64_t* ids = source_.data();
    for (std::int64_t k = 0; k < source_.numel(); ++k)
      check(ids[k] >= 0 && ids[k] < (std::int64_t{1} << 24), "BpttLoader: token id ", ids[k],
            ": expected 0 <= id < 2^24 (ids travel as float)");
  }

  const Tensor<std::int64_t>& source() const { return source_; }
  std::int64_t bptt() const { return bptt_; }
  std::size_t size() const { return static_cast<std::size_t>((source_.size(0) - 2) / bptt_ + 1); }
  // Tokens predicted in one pass: (rows - 1) * columns.
  std::int64_t tokens() const { return (source_.size(0) - 1) * source_.size(1); }
  void set_epoch(int) {}  // the tutorial reads the stream in order every epoch
  // Resuming mid-epoch: the next pass begins at window first (Trainer's checkpoints).
  void set_first_batch(std::int64_t first) { first_ = first; }

  class iterator {
   public:
    using value_type = BpttBatch;
    using difference_type = std::ptrdiff_t;
    iterator(const BpttLoader* loader, std::int64_t window) : loader_(loader), window_(window) {}
    BpttBatch operator*() const {
      BpttBatch b = get_batch(loader_->source_, window_ * loader_->bptt_, loader_->bptt_);
      return loader_->layout_ == Layout::batch_first ? batch_first(b) : b;
    }
    iterator& operator++() {
      ++window_;
      return *this;
    }
    bool operator==(const iterator& other) const { return window_ == other.window_; }

   private:
    const BpttLoader* loader_;
    std::int64_t window_;
  };
  iterator begin() {
    const auto first = std::min<std::int64_t>(std::exchange(first_, 0), static_cast<std::int64_t>(size()));
    return {this, first};
  }
  iterator end() const { return {this, static_cast<std::int64_t>(size())}; }

 private:
  Tensor<std::int64_t> source_;
  std::int64_t bptt_;
  Layout layout_;
  std::int64_t first_ = 0;
};

}  // namespace ptrain
