#pragma once
// What ALBERT's pre-training pipeline (sentence_order.hpp, masked_lm.hpp, pretraining_batches.hpp)
// needs of a tokenizer: text to ids, the ids of its special tokens and the vocabulary's size.
// WordPieceTokenizer (a BERT/ALBERT vocab.txt) and SentencePieceTokenizer (ALBERT's spiece.model)
// both give them, so the pipeline is written once for either. The parts that only place or skip
// special tokens take the plain SpecialTokenIds, a value the loader keeps for as long as it lives.
#include <concepts>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ptrain {

struct SpecialTokenIds {
  std::int64_t unk = 0;   // [UNK] or <unk>
  std::int64_t cls = 0;   // [CLS]
  std::int64_t sep = 0;   // [SEP]
  std::int64_t mask = 0;  // [MASK]
  std::int64_t pad = 0;   // [PAD] or <pad>
  std::int64_t vocab_size = 0;

  // Special tokens are never masked nor predicted.
  bool is_special(std::int64_t id) const {
    return id == unk || id == cls || id == sep || id == mask || id == pad;
  }
};

template <class T>
concept PretrainingTokenizer = requires(const T& tokenizer, std::string_view text) {
  { tokenizer.encode(text) } -> std::same_as<std::vector<std::int64_t>>;
  { tokenizer.special_ids() } -> std::same_as<SpecialTokenIds>;
};

}  // namespace ptrain
