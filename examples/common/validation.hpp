#pragma once
// A validation split for data that comes as one set (a labels CSV, a folder of image/mask pairs):
// a seeded shuffle of the indices cut in two. Both parts have one type whatever the source (image
// files, a tensor cache), so an example compiles one DataLoader type. EvalShard gives each rank
// every R-th validation example without the padding DistributedSampler adds, so metrics summed
// over the ranks count each example once.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ptrain/data/dataset.hpp>
#include <ptrain/data/sampler.hpp>

namespace examples {

class DatasetPart {
 public:
  using Source = std::function<ptrain::Example(std::int64_t)>;
  DatasetPart(std::shared_ptr<const Source> source, std::vector<std::int64_t> indices)
      : source_(std::move(source)), indices_(std::move(indices)) {}
  std::int64_t size() const { return static_cast<std::int64_t>(indices_.size()); }
  ptrain::Example get(std::int64_t i) const { return (*source_)(indices_.at(static_cast<std::size_t>(i))); }
  // Its first n examples; all of them when n is 0 or at least its size.
  DatasetPart first(std::int64_t n) const {
    if (n <= 0 || n >= size()) return *this;
    return DatasetPart(source_, {indices_.begin(), indices_.begin() + n});
  }

 private:
  std::shared_ptr<const Source> source_;
  std::vector<std::int64_t> indices_;
};

struct TrainVal {
  DatasetPart train, val;
};

// round(n * val_fraction) examples for validation (at least one when the fraction is positive),
// the rest for training; the same split on every rank for the same seed.
template <ptrain::Dataset D>
TrainVal split_train_val(std::shared_ptr<const D> dataset, double val_fraction, std::uint64_t seed) {
  const std::int64_t n = dataset->size();
  ptrain::check(val_fraction >= 0 && val_fraction < 1, "--val-fraction ", val_fraction, ": expected a value in [0, 1)");
  std::int64_t val = std::llround(static_cast<double>(n) * val_fraction);
  if (val_fraction > 0 && val == 0) val = 1;
  ptrain::check(n - val >= 1, "--val-fraction ", val_fraction, " leaves no training example of the ", n);
  const auto order = ptrain::RandomSampler(n, seed).indices(0);
  auto source = std::make_shared<const DatasetPart::Source>([dataset](std::int64_t i) { return dataset->get(i); });
  return {DatasetPart(source, {order.begin() + val, order.end()}),
          DatasetPart(source, {order.begin(), order.begin() + val})};
}

// Positions rank, rank + R, rank + 2R, ... of 0..n-1: ranks may hold one example more than others.
class EvalShard {
 public:
  EvalShard(std::int64_t n, int ranks, int rank) : n_(n), ranks_(ranks), rank_(rank) {}
  std::int64_t size() const { return n_ > rank_ ? (n_ - rank_ + ranks_ - 1) / ranks_ : 0; }
  std::vector<std::int64_t> indices(std::int64_t) const {
    std::vector<std::int64_t> mine;
    for (std::int64_t i = rank_; i < n_; i += ranks_) mine.push_back(i);
    return mine;
  }

 private:
  std::int64_t n_;
  int ranks_, rank_;
};

}  // namespace examples
