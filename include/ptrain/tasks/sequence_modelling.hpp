#pragma once
// SequenceModelling: a token to predict at each position. Targets are a host Tensor<std::int64_t>
// [N, L] of token ids, ignore_index where there is none (padding); the model's output holds the
// scores over the vocabulary last, [N, L, V] (any [N, ..., V] with one row per target). The loss
// is the mean cross entropy over the tokens that are not ignored, the metric "perplexity" is
// exp(mean token loss) over the epoch's tokens.
//
//   Trainer<TinyLm, SequenceModelling> t(model, adam, {}, SequenceModelling{.ignore_index = 0});
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/embedding.hpp"
#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/ops/reduce.hpp"
#include "ptrain/autograd/ops/shape.hpp"

namespace ptrain {

struct SequenceModelling {
  using target_type = Tensor<std::int64_t>;
  std::int64_t ignore_index = -100;  // PyTorch's default

  std::int64_t rows(const target_type& targets) const {
    check(targets.rank() >= 1, "SequenceModelling: targets of shape ", targets.shape(), "; expected [N, L]");
    return targets.size(0);
  }
  target_type slice(const target_type& targets, std::int64_t begin, std::int64_t end) const {
    return targets.slice(begin, end);
  }
  double loss_weight(const target_type& targets) const { return static_cast<double>(kept_tokens(targets)); }

  // The rows of the [tokens, V] scores whose target is kept, picked in one gather (torch.index_select
  // over rows, which is embedding's gather: its backward writes one [tokens, V] gradient, where cutting
  // the runs out one by one would write one per run); a batch of nothing but padding has a loss of 0
  // and no gradient.
  template <class T, class D>
  Var<T, D> loss(const Var<T, D>& output, const target_type& targets, double grad_scale) const {
    const std::int64_t tokens = targets.numel();
    check(output.shape().rank() >= 2 && output.numel() == tokens * output.shape()[output.shape().rank() - 1],
          "SequenceModelling: scores of shape ", output.shape(), " for targets of shape ", targets.shape(),
          "; expected [N, L, vocabulary] with N * L = ", tokens, " rows");
    const Var<T, D> rows = reshape(output, {tokens, -1});
    const std::int64_t* t = targets.data();
    std::vector<std::int64_t> kept, positions;
    for (std::int64_t i = 0; i < tokens; ++i)
      if (t[i] != ignore_index) {
        kept.push_back(t[i]);
        positions.push_back(i);
      }
    if (kept.empty()) return scale(sum(rows), T(0));
    const Var<T, D> scores =
        std::ssize(kept) == tokens
            ? rows
            : embedding(std::span<const std::int64_t>(positions), Shape{std::ssize(positions)}, rows);
    return cross_entropy(scores, std::span<const std::int64_t>(kept), 0.0, grad_scale);
  }

  // [loss summed over tokens, tokens]
  std::size_t state_size() const { return 2; }
  template <class T, class D>
  void accumulate(const Tensor<T, D>&, const target_type& targets, double loss, std::span<double> state) const {
    const auto tokens = static_cast<double>(kept_tokens(targets));
    if (tokens == 0) return;
    state[0] += loss * tokens;
    state[1] += tokens;
  }
  std::vector<std::string> metric_names() const { return {"perplexity"}; }
  std::vector<double> metric_values(std::span<const double> state) const {
    return {state[1] > 0 ? std::exp(state[0] / state[1]) : std::nan("")};
  }

 private:
  std::int64_t kept_tokens(const target_type& targets) const {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < targets.numel(); ++i) n += targets.data()[i] != ignore_index;
    return n;
  }
};

}  // namespace ptrain
