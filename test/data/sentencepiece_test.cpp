#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/pretraining_batches.hpp>
#include <ptrain/data/sentencepiece.hpp>

#include "../common/files.hpp"
#include "../common/source_dir.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(sentencepiece_test)

using Ids = std::vector<std::int64_t>;
using test::contains;
using test::error_of;

namespace {

struct Case {
  std::string text;
  std::vector<std::string> pieces;
  Ids ids;
};

const std::vector<Case> reference_cases = {
#include "sentencepiece/cases.inc"
};

fs::path model_file() { return test::test_source("data/sentencepiece/albert_like.model"); }

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path path = test::temp_dir("sentencepiece_test") / name;
  test::write_bytes(path, std::vector<char>(text.begin(), text.end()));
  return path;
}

static_assert(PretrainingTokenizer<SentencePieceTokenizer>);
static_assert(PretrainingTokenizer<WordPieceTokenizer>);

}  // namespace

BOOST_AUTO_TEST_CASE(pieces_and_ids_are_huggingfaces) {
  const SentencePieceTokenizer tokenizer(model_file());
  BOOST_TEST(tokenizer.vocab_size() == 200);
  for (const auto& c : reference_cases) {
    BOOST_TEST_CONTEXT("text '" << c.text << "'") {
      BOOST_TEST(tokenizer.tokenize(c.text) == c.pieces, boost::test_tools::per_element());
      BOOST_TEST(tokenizer.encode(c.text) == c.ids, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(special_ids_are_albert_s) {
  const SentencePieceTokenizer tokenizer(model_file());
  BOOST_TEST((tokenizer.pad_id() == 0 && tokenizer.unk_id() == 1 && tokenizer.cls_id() == 2));
  BOOST_TEST((tokenizer.sep_id() == 3 && tokenizer.mask_id() == 4));
  const SpecialTokenIds special = tokenizer.special_ids();
  BOOST_TEST((special.pad == 0 && special.unk == 1 && special.cls == 2 && special.sep == 3 && special.mask == 4));
  BOOST_TEST(special.vocab_size == 200);
  for (std::int64_t id = 0; id < 5; ++id) BOOST_TEST(tokenizer.is_special(id));
  BOOST_TEST(!tokenizer.is_special(5));
  BOOST_TEST(tokenizer.id_to_piece(4) == "[MASK]");
  BOOST_TEST(tokenizer.piece_to_id("[SEP]") == 3);
  BOOST_TEST(tokenizer.piece_to_id("\xE2\x96\x81the") == tokenizer.encode("The").front());
  BOOST_TEST(tokenizer.piece_to_id("no such piece") == tokenizer.unk_id());
  BOOST_TEST(contains(error_of([&] { tokenizer.id_to_piece(200); }), "no piece of id 200: expected an id in [0, 200)"));
}

BOOST_AUTO_TEST_CASE(cased_keeps_case_and_accents) {
  const SentencePieceTokenizer tokenizer(model_file(), {.lower_case = false});
  BOOST_TEST(tokenizer.preprocess("  Café \t``NAÏVE''  ") == "Café \"NAÏVE\"");
  const SentencePieceTokenizer uncased(model_file());
  BOOST_TEST(uncased.preprocess("  Café \t``NAÏVE''  ") == "cafe \"naive\"");
}

// The pipeline takes either tokenizer: sentence-order pairs of a WikiText file, in batches.
BOOST_AUTO_TEST_CASE(pretraining_batches_from_sentencepiece_ids) {
  const SentencePieceTokenizer tokenizer(model_file());
  const fs::path raw = write_file("corpus.raw", " = Ship = \n The old ship sees the river . It follows the king .\n"
                                                " = Bird = \n The red bird hears the sea . It crosses the river .\n");
  const auto pairs = sentence_order_pairs(raw, tokenizer, {.max_seq_len = 32, .short_seq_prob = 0});
  BOOST_TEST_REQUIRE(pairs.size() == 2u);
  BOOST_TEST(pairs[0].input_ids.front() == tokenizer.cls_id());
  BOOST_TEST(pairs[0].input_ids.back() == tokenizer.sep_id());
  PretrainingLoader loader(pairs, tokenizer.special_ids(), {.batch_size = 2, .max_seq_len = 32});
  for (const auto& batch : loader) {
    BOOST_TEST(batch.input_ids.data()[31] == static_cast<float>(tokenizer.pad_id()));
    BOOST_TEST(batch.input_ids.shape() == (Shape{2, 32}));
  }
}

BOOST_AUTO_TEST_CASE(bad_models_are_refused_with_the_file_named) {
  const fs::path missing = test::temp_dir("sentencepiece_test") / "missing.model";
  BOOST_TEST(contains(error_of([&] { SentencePieceTokenizer{missing}; }),
                      "missing.model: cannot load a SentencePiece model"));
  const fs::path vocab = write_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n");
  BOOST_TEST(contains(error_of([&] { SentencePieceTokenizer{vocab}; }),
                      "vocab.txt: cannot load a SentencePiece model"));
  BOOST_TEST(contains(error_of([&] { SentencePieceTokenizer{vocab}; }), "expected a .model file written by spm_train"));
  const SentencePieceTokenizer tokenizer(model_file());
  BOOST_TEST(contains(error_of([&] { tokenizer.encode("ab\xff"); }), "byte 2 (0xff) of the text is not valid UTF-8"));
}

BOOST_AUTO_TEST_SUITE_END()
