// WordPiece vocabularies and text: the input is read as a vocab.txt (UTF-8 checks, universal
// newlines, duplicate and missing special tokens); when it loads, the same bytes are tokenized with
// it, and always with a small fixed vocabulary. Every token must be a vocabulary entry (so never
// empty) or [UNK], and its id the entry's: anything else is a finding. The input is also read as a
// WikiText raw file and made into ALBERT's pre-training batches (articles, sentence-order pairs,
// masking, padding), whose shapes are checked.
#include <cstdlib>

#include "fuzz_input.hpp"
#include "ptrain/data/pretraining_batches.hpp"
#include "ptrain/data/wikitext.hpp"
#include "ptrain/data/wordpiece.hpp"

namespace {

void check_tokens(const ptrain::WordPieceTokenizer& tokenizer, std::string_view text) {
  ptrain::fuzz::refuse_cleanly([&] {  // text that is not UTF-8 is refused
    const auto tokens = tokenizer.tokenize(text);
    const auto ids = tokenizer.encode(text);
    if (ids.size() != tokens.size()) std::abort();
    for (std::size_t k = 0; k < tokens.size(); ++k)
      if (!tokenizer.vocab().contains(tokens[k]) || tokenizer.vocab().index(tokens[k]) != ids[k]) std::abort();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const ptrain::WordPieceTokenizer fixed(
      ptrain::Vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "##b", "the", "é", ".", "中"}),
      "fixed vocabulary");
  check_tokens(fixed, text);
  const auto path = ptrain::fuzz::input_file(data, size, "vocab.txt");
  ptrain::fuzz::refuse_cleanly([&] {
    const ptrain::WordPieceTokenizer tokenizer(path);
    check_tokens(tokenizer, text);
  });
  return ptrain::fuzz::refuse_cleanly([&] {
    const auto articles = ptrain::read_wikitext_articles(path);
    auto pairs = ptrain::sentence_order_pairs(ptrain::tokenize_documents(articles, fixed), fixed.special_ids(),
                                              {.max_seq_len = 8, .short_seq_prob = 0.5});
    pairs.resize(std::min<std::size_t>(pairs.size(), 64));
    ptrain::PretrainingLoader loader(std::move(pairs), fixed.special_ids(), {.batch_size = 2, .max_seq_len = 8});
    for (const auto& batch : loader)
      if (batch.input_ids.size(1) != 8 || batch.mlm_labels.numel() != batch.input_ids.numel()) std::abort();
  });
}
