#pragma once
// ALBERT's pre-training examples (create_pretraining_data.py of google-research/albert, with
// sentence-order prediction): documents of sentences, each sentence its token ids (WordPiece's or
// SentencePiece's, data/special_tokens.hpp), become [CLS] A [SEP] B [SEP] pairs of at most
// max_seq_len tokens. Per document, as BERT's create_instances_from_document: a target length
// (max_seq_len - 3, or with probability short_seq_prob a length drawn from [2, max_seq_len - 3]);
// sentences gathered into a chunk until it reaches the target or the document ends; the chunk cut
// at a random sentence boundary into A and B (a chunk of one sentence is cut at its middle token
// instead, so B is never empty); the two swapped half the time (sop_label 1, else 0); the pair
// trimmed to fit, one token at a time from the longer segment, from its front or back at random.
// Everything is drawn from one Rng(seed), so every rank and every run builds the same examples.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/data/special_tokens.hpp"
#include "ptrain/data/wikitext.hpp"

namespace ptrain {

struct SentenceOrderOptions {
  std::int64_t max_seq_len = 128;
  double short_seq_prob = 0.1;
  std::uint64_t seed = 12345;
};

// One pair, unpadded: input_ids is [CLS] A [SEP] B [SEP]; segment B (token type 1) starts at
// first_b and runs to the end.
struct SentenceOrderPair {
  std::vector<std::int64_t> input_ids;
  std::int64_t first_b = 0;
  std::int64_t sop_label = 0;  // 0: A then B as in the text; 1: swapped
};

// The sentences of a paragraph: cut after '.', '!' or '?' followed by a space (WikiText writes
// sentence ends " . "; an abbreviation such as "U.S. Army" is cut too). Spaces around are kept.
inline std::vector<std::string_view> split_sentences(std::string_view paragraph) {
  std::vector<std::string_view> out;
  std::size_t begin = 0;
  for (std::size_t i = 0; i + 1 < paragraph.size(); ++i)
    if ((paragraph[i] == '.' || paragraph[i] == '!' || paragraph[i] == '?') && paragraph[i + 1] == ' ') {
      out.push_back(paragraph.substr(begin, i + 1 - begin));
      begin = i + 1;
    }
  if (begin < paragraph.size()) out.push_back(paragraph.substr(begin));
  return out;
}

// Documents of paragraphs (read_wikitext_articles) as documents of sentences' ids; sentences without
// a token are left out.
inline std::vector<std::vector<std::vector<std::int64_t>>> tokenize_documents(
    const std::vector<std::vector<std::string>>& documents, const PretrainingTokenizer auto& tokenizer) {
  std::vector<std::vector<std::vector<std::int64_t>>> out;
  for (const auto& document : documents) {
    auto& sentences = out.emplace_back();
    for (const auto& paragraph : document)
      for (const std::string_view sentence : split_sentences(paragraph))
        if (auto ids = tokenizer.encode(sentence); !ids.empty()) sentences.push_back(std::move(ids));
  }
  return out;
}

namespace detail {
// BERT's truncate_seq_pair.
inline void truncate_pair(std::vector<std::int64_t>& a, std::vector<std::int64_t>& b, std::size_t max_tokens,
                          Rng& rng) {
  while (a.size() + b.size() > max_tokens) {
    auto& longer = a.size() > b.size() ? a : b;
    if (rng.uniform() < 0.5)
      longer.erase(longer.begin());
    else
      longer.pop_back();
  }
}
}  // namespace detail

// The pairs of all documents, document after document.
inline std::vector<SentenceOrderPair> sentence_order_pairs(
    const std::vector<std::vector<std::vector<std::int64_t>>>& documents, const SpecialTokenIds& special,
    const SentenceOrderOptions& options = {}) {
  check(options.max_seq_len >= 5, "sentence_order_pairs: max_seq_len ", options.max_seq_len,
        ", expected at least 5 ([CLS], [SEP] twice and a token of each segment)");
  check(options.short_seq_prob >= 0 && options.short_seq_prob <= 1, "sentence_order_pairs: short_seq_prob ",
        options.short_seq_prob, ", expected a probability in [0, 1]");
  const auto max_tokens = static_cast<std::size_t>(options.max_seq_len - 3);
  Rng rng(options.seed);
  std::vector<SentenceOrderPair> pairs;
  const auto emit = [&](std::vector<std::int64_t> a, std::vector<std::int64_t> b) {
    const bool swap = rng.uniform() < 0.5;
    if (swap) std::swap(a, b);
    detail::truncate_pair(a, b, max_tokens, rng);
    SentenceOrderPair pair;
    pair.input_ids.push_back(special.cls);
    pair.input_ids.insert(pair.input_ids.end(), a.begin(), a.end());
    pair.input_ids.push_back(special.sep);
    pair.first_b = static_cast<std::int64_t>(pair.input_ids.size());
    pair.input_ids.insert(pair.input_ids.end(), b.begin(), b.end());
    pair.input_ids.push_back(special.sep);
    pair.sop_label = swap ? 1 : 0;
    pairs.push_back(std::move(pair));
  };
  for (const auto& document : documents) {
    std::size_t target = max_tokens;
    if (rng.uniform() < options.short_seq_prob) target = 2 + rng.below(max_tokens - 1);
    std::vector<const std::vector<std::int64_t>*> chunk;
    std::size_t length = 0;
    for (std::size_t i = 0; i < document.size(); ++i) {
      chunk.push_back(&document[i]);
      length += document[i].size();
      if (i + 1 < document.size() && length < target) continue;
      std::vector<std::int64_t> a, b;
      if (chunk.size() == 1) {
        const auto& only = *chunk[0];
        const auto middle = static_cast<std::ptrdiff_t>(only.size() / 2);
        a.assign(only.begin(), only.begin() + middle);
        b.assign(only.begin() + middle, only.end());
      } else {
        const std::size_t a_end = 1 + rng.below(chunk.size() - 1);
        for (std::size_t k = 0; k < chunk.size(); ++k) {
          auto& segment = k < a_end ? a : b;
          segment.insert(segment.end(), chunk[k]->begin(), chunk[k]->end());
        }
      }
      if (!a.empty() && !b.empty()) emit(std::move(a), std::move(b));
      chunk.clear();
      length = 0;
    }
  }
  return pairs;
}

// The pairs of a WikiText raw file (read_wikitext_articles: one document per article).
inline std::vector<SentenceOrderPair> sentence_order_pairs(const std::filesystem::path& corpus,
                                                           const PretrainingTokenizer auto& tokenizer,
                                                           const SentenceOrderOptions& options = {}) {
  auto pairs = sentence_order_pairs(tokenize_documents(read_wikitext_articles(corpus), tokenizer),
                                    tokenizer.special_ids(), options);
  check(!pairs.empty(), corpus.string(), ": no sentence-order pair: expected an article of two tokens or more");
  return pairs;
}

}  // namespace ptrain
