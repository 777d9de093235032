#pragma once
// Masked language modelling's corruption of one example, drawn afresh each epoch from
// Rng(seed, epoch, example) alone, so every rank and every run masks an example the same way: of
// the tokens that are not special ([CLS], [SEP], [PAD], ...), round(mask_prob * count) (at least
// one, none when mask_prob is 0) are chosen uniformly without replacement, as BERT's
// create_masked_lm_predictions chooses them; each chosen one becomes [MASK] with probability 0.8,
// a token drawn uniformly from the whole vocabulary with 0.1, and stays itself with 0.1. Its label
// is its original id; every other position's label is -100 (ignored by the loss, as in
// HuggingFace).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/data/special_tokens.hpp"

namespace ptrain {

inline constexpr std::int64_t ignored_label = -100;

struct MaskingOptions {
  double mask_prob = 0.15;
  std::uint64_t seed = 0;
};

struct MaskedTokens {
  std::vector<std::int64_t> input_ids;
  std::vector<std::int64_t> labels;  // the original id where predicted, ignored_label elsewhere
};

inline MaskedTokens mask_tokens(const std::vector<std::int64_t>& ids, const SpecialTokenIds& special,
                                const MaskingOptions& options, std::int64_t epoch, std::int64_t example) {
  check(options.mask_prob >= 0 && options.mask_prob <= 1, "mask_tokens: mask_prob ", options.mask_prob,
        ", expected a probability in [0, 1]");
  Rng rng(detail::mix_seed(options.seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(example)));
  MaskedTokens out{ids, std::vector<std::int64_t>(ids.size(), ignored_label)};
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!special.is_special(ids[i])) candidates.push_back(i);
  if (candidates.empty() || options.mask_prob == 0) return out;
  const auto share = static_cast<std::size_t>(std::llround(options.mask_prob * static_cast<double>(candidates.size())));
  const std::size_t chosen = std::min(candidates.size(), std::max<std::size_t>(1, share));
  const auto vocab_size = static_cast<std::uint64_t>(special.vocab_size);
  for (std::size_t k = 0; k < chosen; ++k) {
    std::swap(candidates[k], candidates[k + rng.below(candidates.size() - k)]);  // a partial Fisher-Yates shuffle
    const std::size_t i = candidates[k];
    out.labels[i] = ids[i];
    const double r = rng.uniform();
    if (r < 0.8)
      out.input_ids[i] = special.mask;
    else if (r < 0.9)
      out.input_ids[i] = static_cast<std::int64_t>(rng.below(vocab_size));
  }
  return out;
}

}  // namespace ptrain
