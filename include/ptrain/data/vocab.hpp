#pragma once
// A vocabulary: tokens and their indices, built as torchtext's build_vocab_from_iterator builds it
// (torchtext/vocab/vocab_factory.py): the specials first, in the order given, then every other
// token seen at least min_freq times, by frequency descending, ties in code-point order (Python's
// string order, which is UTF-8 byte order). A default index (torchtext's set_default_index) is
// what a token outside the vocabulary maps to; without one, looking such a token up is an error.
//
//   TokenCounts counts;  for (const auto& line : lines) counts.add(basic_english_tokenize(line));
//   Vocab vocab = build_vocab(counts, {"<unk>"});  vocab.set_default_index(vocab.index("<unk>"));
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain {

// How often each token occurs (Python's Counter of the tokens).
class TokenCounts {
 public:
  void add(const std::vector<std::string>& tokens) {
    for (const auto& token : tokens) ++counts_[token];
  }
  std::int64_t count(const std::string& token) const {
    const auto it = counts_.find(token);
    return it == counts_.end() ? 0 : it->second;
  }
  const std::unordered_map<std::string, std::int64_t>& counts() const { return counts_; }

 private:
  std::unordered_map<std::string, std::int64_t> counts_;
};

class Vocab {
 public:
  // tokens in index order; each once.
  explicit Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const bool added = indices_.emplace(tokens_[i], static_cast<std::int64_t>(i)).second;
      check(added, "Vocab: token '", tokens_[i], "' appears twice (at ", indices_.at(tokens_[i]), " and ", i,
            "): expected each token once");
    }
  }

  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::string& token(std::int64_t index) const {
    check(index >= 0 && index < size(), "Vocab: index ", index, " out of range: expected 0 to ", size() - 1);
    return tokens_[static_cast<std::size_t>(index)];
  }
  bool contains(std::string_view token) const { return indices_.contains(std::string(token)); }
  std::optional<std::int64_t> find(std::string_view token) const {
    const auto it = indices_.find(std::string(token));
    return it == indices_.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
  }

  void set_default_index(std::int64_t index) {
    check(index >= 0 && index < size(), "Vocab: default index ", index, " out of range: expected 0 to ", size() - 1);
    default_index_ = index;
  }
  std::optional<std::int64_t> default_index() const { return default_index_; }

  // The index of token, or the default index for a token outside the vocabulary.
  std::int64_t index(std::string_view token) const {
    if (const auto i = find(token)) return *i;
    check(default_index_.has_value(), "Vocab: token '", token,
          "' is not in the vocabulary, which has no default index (set_default_index) to map it to");
    return *default_index_;
  }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int64_t> indices_;
  std::optional<std::int64_t> default_index_;
};

// torchtext's build_vocab_from_iterator(iterator, min_freq, specials, special_first=True); no
// default index is set.
inline Vocab build_vocab(const TokenCounts& counts, const std::vector<std::string>& specials = {},
                         std::int64_t min_freq = 1) {
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.counts().begin(), counts.counts().end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> tokens = specials;
  for (auto& [token, count] : sorted)
    if (count >= min_freq && std::find(specials.begin(), specials.end(), token) == specials.end())
      tokens.push_back(std::move(token));
  return Vocab(std::move(tokens));
}

}  // namespace ptrain
