#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/wordpiece.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using namespace std::string_literals;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(wordpiece_test)

using Tokens = std::vector<std::string>;
using test::contains;
using test::error_of;

namespace {

struct Case {
  std::string text;
  Tokens tokens;
};

const Tokens vocabulary = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "aff", "##a", "##b", "a", "b", "c", "##c", "ecole", "istanbul", "straße", "strasse", "σ", "οδυσσευς", "σα", "ας", "ασβ", ",", ".", "!", "?", "'", "\"", "(", ")", "-", "@", "$", "¿", "«", "»", "中", "国", "人", "한", "##국", "ᄒ", "##ᅡ", "##ᆫ", "x", "##x", "don", "t", "##y", "cafe", "naive", "hello", "world", "##s", "game", "valkyria", "chronicles", "iii", "=", "3", "s", "it", "5", "1", "000", "lo", "##ng", "long", "𝒜", "ﬁ", "ℌ", "The", "Un", "É", "##É", "Valkyria", "III", "Café", "Σ", "Ω", "Straße", "İstanbul"};

// What HuggingFace's BertTokenizer gives for these texts over that vocabulary, uncased and cased:
// printed by make_wordpiece_cases.py, checked there against transformers 5.24's Python and Rust
// tokenizers (accents, CJK, Hangul, punctuation, control characters, Unicode spaces, words over 100
// characters, pieces outside the vocabulary, special tokens in the text).
const std::vector<Case>& reference_cases(bool lower_case) {
  static const std::vector<Case> uncased = {
    {"UNaffable the Unaffable"s,
     {"un", "##aff", "##able", "the", "un", "##aff", "##able"}},
    {" = Valkyria Chronicles III = \n"s,
     {"=", "valkyria", "chronicles", "iii", "="}},
    {"Don't STOP... \"believing\" (the game's 1 @,@ 000 $)!"s,
     {"don", "'", "t", "[UNK]", ".", ".", ".", "\"", "[UNK]", "\"", "(", "the", "game", "'", "s", "1", "@", ",", "@", "000", "$", ")", "!"}},
    {"ÉCOLE İstanbul Straße STRASSE Café NAÏVE naïve"s,
     {"ecole", "istanbul", "straße", "strasse", "cafe", "naive", "naive"}},
    {"ΟΔΥΣΣΕΥΣ ΣΑ ΑΣ. ΑΣ́Β Σ"s,
     {"[UNK]", "σα", "[UNK]", ".", "ασβ", "σ"}},
    {"中国人 x中y 한국 한 ¿Qué? «a-b»"s,
     {"中", "国", "人", "x", "中", "[UNK]", "[UNK]", "ᄒ", "##ᅡ", "##ᆫ", "¿", "[UNK]", "?", "«", "a", "-", "b", "»"}},
    {"hello\u00a0world\u2003the\u3000it\u2028a\u2029b\u0085c\tx\r\ny"s,
     {"hello", "world", "the", "it", "a", "b", "##c", "x", "[UNK]"}},
    {"he\u0000llo wo�rld a\u200bb c\u00adx x\u0007x"s,
     {"hello", "world", "a", "##b", "c", "##x", "x", "##x"}},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaé"s,
     {"a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "[UNK]", "[UNK]"}},
    {"abc cba zzz xq aaab bax"s,
     {"a", "##b", "##c", "c", "##b", "##a", "[UNK]", "[UNK]", "a", "##a", "##a", "##b", "b", "##a", "##x"}},
    {"[CLS] hello [SEP] the[MASK]game [mask] [PAD]x[UNK] [SEP"s,
     {"[CLS]", "hello", "[SEP]", "the", "[MASK]", "game", "[UNK]", "[UNK]", "[UNK]", "[PAD]", "x", "[UNK]", "[UNK]", "[UNK]"}},
    {"𝒜 ﬁ ℌ Ǆ ǅ ǆ Ω Å `"s,
     {"𝒜", "ﬁ", "ℌ", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "a", "[UNK]"}},
    {"à֮̀̕b thé́"s,
     {"a", "##b", "the"}},
    {""s,
     {}},
    {"   \n\t "s,
     {}},
  };
  static const std::vector<Case> cased = {
    {"UNaffable the Unaffable"s,
     {"[UNK]", "the", "Un", "##aff", "##able"}},
    {" = Valkyria Chronicles III = \n"s,
     {"=", "Valkyria", "[UNK]", "III", "="}},
    {"Don't STOP... \"believing\" (the game's 1 @,@ 000 $)!"s,
     {"[UNK]", "'", "t", "[UNK]", ".", ".", ".", "\"", "[UNK]", "\"", "(", "the", "game", "'", "s", "1", "@", ",", "@", "000", "$", ")", "!"}},
    {"ÉCOLE İstanbul Straße STRASSE Café NAÏVE naïve"s,
     {"[UNK]", "İstanbul", "Straße", "[UNK]", "Café", "[UNK]", "[UNK]"}},
    {"ΟΔΥΣΣΕΥΣ ΣΑ ΑΣ. ΑΣ́Β Σ"s,
     {"[UNK]", "[UNK]", "[UNK]", ".", "[UNK]", "Σ"}},
    {"中国人 x中y 한국 한 ¿Qué? «a-b»"s,
     {"中", "国", "人", "x", "中", "[UNK]", "한", "##국", "한", "¿", "[UNK]", "?", "«", "a", "-", "b", "»"}},
    {"hello\u00a0world\u2003the\u3000it\u2028a\u2029b\u0085c\tx\r\ny"s,
     {"hello", "world", "the", "it", "a", "b", "##c", "x", "[UNK]"}},
    {"he\u0000llo wo�rld a\u200bb c\u00adx x\u0007x"s,
     {"hello", "world", "a", "##b", "c", "##x", "x", "##x"}},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa aéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaéaé"s,
     {"a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "##a", "[UNK]", "[UNK]"}},
    {"abc cba zzz xq aaab bax"s,
     {"a", "##b", "##c", "c", "##b", "##a", "[UNK]", "[UNK]", "a", "##a", "##a", "##b", "b", "##a", "##x"}},
    {"[CLS] hello [SEP] the[MASK]game [mask] [PAD]x[UNK] [SEP"s,
     {"[CLS]", "hello", "[SEP]", "the", "[MASK]", "game", "[UNK]", "[UNK]", "[UNK]", "[PAD]", "x", "[UNK]", "[UNK]", "[UNK]"}},
    {"𝒜 ﬁ ℌ Ǆ ǅ ǆ Ω Å `"s,
     {"𝒜", "ﬁ", "ℌ", "[UNK]", "[UNK]", "[UNK]", "Ω", "[UNK]", "[UNK]"}},
    {"à֮̀̕b thé́"s,
     {"[UNK]", "[UNK]"}},
    {""s,
     {}},
    {"   \n\t "s,
     {}},
  };
  return lower_case ? uncased : cased;
}

fs::path write_vocab(const std::string& name, const std::string& text) {
  const fs::path path = test::temp_dir("wordpiece_test") / name;
  test::write_bytes(path, std::vector<char>(text.begin(), text.end()));
  return path;
}

std::string lines(const Tokens& tokens) {
  std::string out;
  for (const auto& t : tokens) out += t + "\n";
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokens_are_huggingfaces) {
  const fs::path vocab = write_vocab("vocab.txt", lines(vocabulary));
  for (const bool lower_case : {true, false}) {
    const WordPieceTokenizer tokenizer(vocab, {.lower_case = lower_case});
    BOOST_TEST(tokenizer.vocab().size() == static_cast<std::int64_t>(vocabulary.size()));
    for (const auto& c : reference_cases(lower_case)) {
      BOOST_TEST_CONTEXT("text '" << c.text << "', lower_case " << lower_case) {
        BOOST_TEST(tokenizer.tokenize(c.text) == c.tokens);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(ids_are_line_numbers_and_unknown_words_unk) {
  // Windows line ends and no end on the last line: Python's text mode reads the same tokens.
  const WordPieceTokenizer tokenizer(write_vocab("crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nthe\r\n##s"));
  BOOST_TEST(tokenizer.encode("The thes zz") == (std::vector<std::int64_t>{5, 5, 6, 1}));
  BOOST_TEST((tokenizer.pad_id() == 0 && tokenizer.unk_id() == 1 && tokenizer.cls_id() == 2));
  BOOST_TEST((tokenizer.sep_id() == 3 && tokenizer.mask_id() == 4));
  BOOST_TEST(tokenizer.is_special(4));
  BOOST_TEST(!tokenizer.is_special(5));
}

BOOST_AUTO_TEST_CASE(bad_vocabularies_are_refused_with_the_file_named) {
  const fs::path missing = test::temp_dir("wordpiece_test") / "missing.txt";
  BOOST_TEST(contains(error_of([&] { WordPieceTokenizer{missing}; }), "missing.txt: cannot open for reading"));
  const fs::path no_mask = write_vocab("no_mask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  BOOST_TEST(contains(error_of([&] { WordPieceTokenizer{no_mask}; }),
                      "no_mask.txt: no '[MASK]' token: expected a BERT/ALBERT vocabulary"));
  const fs::path empty = write_vocab("empty.txt", "");
  BOOST_TEST(contains(error_of([&] { WordPieceTokenizer{empty}; }), "empty.txt: empty: expected a vocabulary"));
  const fs::path twice = write_vocab("twice.txt", "[PAD]\n[UNK]\nthe\n[CLS]\nthe\n");
  BOOST_TEST(contains(error_of([&] { WordPieceTokenizer{twice}; }),
                      "twice.txt: line 5: token 'the' already on line 3"));
  const fs::path latin1 = write_vocab("latin1.txt", "[PAD]\nsch\xf6n\n");
  BOOST_TEST(contains(error_of([&] { WordPieceTokenizer{latin1}; }), "latin1.txt: line 2, byte offset 9"));
  const WordPieceTokenizer tokenizer(write_vocab("ok.txt", lines(vocabulary)));
  BOOST_TEST(contains(error_of([&] { tokenizer.tokenize("ab\xff"); }), "byte 2 (0xff) is not valid UTF-8"));
}

BOOST_AUTO_TEST_SUITE_END()
