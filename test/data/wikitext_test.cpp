#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/wikitext.hpp>

#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(wikitext_test)

using Ids = std::vector<std::int64_t>;
using Tokens = std::vector<std::string>;
using test::contains;
using test::error_of;

namespace {

const std::string train_text =
    " \n = Valkyria Chronicles = \n \n The game 's <unk> system , the BliTZ system , is carried over . \n"
    " It 's a role @-@ playing game . \n \n";
const std::string valid_text = " \n = Homarus = \n \n The game is an <unk> lobster . \n";
const std::string test_text = " = Test = \r\n The cat 's game .\r\n";  // Windows line ends

void write_text(const fs::path& path, const std::string& text) {
  test::write_bytes(path, std::vector<char>(text.begin(), text.end()));
}

// A wikitext-2 directory with the three splits in `format`'s file names.
fs::path write_wikitext(const std::string& name, WikiTextFormat format = WikiTextFormat::tokens,
                        const std::string& train = train_text) {
  const fs::path root = test::temp_dir("wikitext_test") / name;
  write_text(WikiText::file(root, "train", format), train);
  write_text(WikiText::file(root, "valid", format), valid_text);
  write_text(WikiText::file(root, "test", format), test_text);
  return root;
}

}  // namespace

// Vocabulary and ids as torchtext and the tutorial's data_process give them for these files
// (computed by Python with make_basic_english_cases.py's tokenizer and build_vocab_from_iterator's
// ordering).
BOOST_AUTO_TEST_CASE(splits_as_the_tutorial_reads_them) {
  for (const auto format : {WikiTextFormat::tokens, WikiTextFormat::raw}) {
    const WikiText data(write_wikitext(format == WikiTextFormat::tokens ? "tokens" : "raw", format),
                        {.format = format});
    BOOST_TEST(data.vocab().tokens() ==
               (Tokens{"<unk>", "'", ",", ".", "=", "game", "s", "system", "the", "@-@", "a", "blitz", "carried",
                       "chronicles", "is", "it", "over", "playing", "role", "valkyria"}));
    BOOST_TEST(data.vocab().default_index().value_or(-1) == 0);
    BOOST_TEST(data.train() == (Ids{4, 19, 13, 4, 8, 5, 1, 6, 0, 7, 2, 8, 11, 7, 2, 14, 12, 16, 3, 15, 1, 6, 10, 18,
                                    9, 17, 5, 3}));
    BOOST_TEST(data.valid() == (Ids{4, 0, 4, 8, 5, 14, 0, 0, 0, 3}));
    BOOST_TEST(data.test() == (Ids{4, 0, 4, 8, 0, 1, 6, 5, 3}));
  }
}

BOOST_AUTO_TEST_CASE(lines_split_as_python_text_mode) {
  // \n, \r\n and \r each end a line; no empty line after the last line end.
  const auto lines = tokenize_lines(" A \r b\r\nc\n\nD", "x");
  BOOST_TEST(lines.size() == 5u);
  BOOST_TEST(lines[0] == Tokens{"a"});
  BOOST_TEST(lines[3].empty());
  BOOST_TEST(lines[4] == Tokens{"d"});
  BOOST_TEST(tokenize_lines("a\n", "x").size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_missing_split_is_named) {
  const fs::path root = write_wikitext("missing");
  fs::remove(WikiText::file(root, "valid", WikiTextFormat::tokens));
  const std::string message = error_of([&] { WikiText data(root); });
  BOOST_TEST(contains(message, (root / "wiki.valid.tokens").string() +
                                   " not found: expected wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens in " +
                                   root.string()),
             message);
  // The raw variant's names are the ones expected when it is asked for.
  const std::string raw = error_of([&] { WikiText data(root, {.format = WikiTextFormat::raw}); });
  BOOST_TEST(contains(raw, "wiki.train.raw not found: expected wiki.train.raw, wiki.valid.raw and wiki.test.raw"), raw);
}

BOOST_AUTO_TEST_CASE(an_empty_file_is_named) {
  const fs::path root = write_wikitext("empty");
  write_text(WikiText::file(root, "test", WikiTextFormat::tokens), "");
  std::string message = error_of([&] { WikiText data(root); });
  BOOST_TEST(contains(message, (root / "wiki.test.tokens").string() + ": empty: expected WikiText lines of text"),
             message);
  write_text(WikiText::file(root, "test", WikiTextFormat::tokens), " \n \n\t\n");
  message = error_of([&] { WikiText data(root); });
  BOOST_TEST(contains(message, "wiki.test.tokens: no tokens (only whitespace): expected WikiText lines"), message);
}

BOOST_AUTO_TEST_CASE(a_vocabulary_without_unk_is_named) {
  // No "<unk>" in the training text and none among the specials.
  const fs::path root = write_wikitext("no_unk", WikiTextFormat::tokens, " = Title = \n The game . \n");
  const std::string message = error_of([&] { WikiText data(root, {.specials = {}}); });
  BOOST_TEST(contains(message, "the vocabulary built from " + (root / "wiki.train.tokens").string() +
                                   " has no '<unk>': expected '<unk>' among the specials or in the training text"),
             message);
  // "<unk>" in the training text suffices, as for torchtext without specials: it takes its place
  // by frequency.
  const WikiText data(write_wikitext("unk_in_text"), {.specials = {}});
  BOOST_TEST(data.vocab().token(0) == "'");
  BOOST_TEST(data.vocab().token(*data.vocab().default_index()) == "<unk>");
}

BOOST_AUTO_TEST_CASE(text_that_is_not_utf8_is_named_by_line_and_offset) {
  const fs::path root = write_wikitext("latin1");
  write_text(WikiText::file(root, "valid", WikiTextFormat::tokens), " = Title = \n Caf\xe9 . \n");
  const std::string message = error_of([&] { WikiText data(root); });
  BOOST_TEST(contains(message, "wiki.valid.tokens: line 2, byte offset 16: byte 0xe9 is not valid UTF-8: expected "
                               "UTF-8 text"),
             message);
}

BOOST_AUTO_TEST_SUITE_END()
