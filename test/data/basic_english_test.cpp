#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/data/basic_english.hpp>

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(basic_english_test)

using Tokens = std::vector<std::string>;

namespace {

struct Case {
  std::string line;
  Tokens tokens;
};

// What torchtext's basic_english gives for these lines: printed by make_basic_english_cases.py
// (the tokenizer's Python, run by Python 3.11; Greek capital sigma lowers to ς at a word's end).
const std::vector<Case>& python_cases() {
  static const std::vector<Case> cases = {
    {" = Valkyria Chronicles III = \n",
     {"=", "valkyria", "chronicles", "iii", "="}},
    {" Senjō no Valkyria 3 : <unk> Chronicles ( Japanese : 戦場のヴァルキュリア3 , lit . Valkyria of the Battlefield 3 ) , commonly referred to as Valkyria Chronicles III outside Japan , is a tactical role @-@ playing video game .\n",
     {"senjō", "no", "valkyria", "3", "<unk>", "chronicles", "(", "japanese", "戦場のヴァルキュリア3", ",", "lit", ".", "valkyria", "of", "the", "battlefield", "3", ")", ",", "commonly", "referred", "to", "as", "valkyria", "chronicles", "iii", "outside", "japan", ",", "is", "a", "tactical", "role", "@-@", "playing", "video", "game", "."}},
    {" = = Gameplay = = \n",
     {"=", "=", "gameplay", "=", "="}},
    {" The game 's battle system , the BliTZ system , is carried over directly from Valkyira Chronicles . \n",
     {"the", "game", "'", "s", "battle", "system", ",", "the", "blitz", "system", ",", "is", "carried", "over", "directly", "from", "valkyira", "chronicles", "."}},
    {" It cost $ 1 @,@ 000 @.@ 5 million ; \"it was\" worth it !? Yes:no\n",
     {"it", "cost", "$", "1", "@", ",", "@", "000", "@", ".", "@", "5", "million", "it", "was", "worth", "it", "!", "?", "yes", "no"}},
    {"Don't STOP... \"believing\"<br />Hold<BR />on<\"br />x\n",
     {"don", "'", "t", "stop", ".", ".", ".", "believing", "hold", "on", "x"}},
    {"ÉCOLE Straße İstanbul ΑΘΗΝΑ Москва ǅemal\u00a0tab\tand\u2003em\u3000space\r\n",
     {"école", "straße", "i̇stanbul", "αθηνα", "москва", "ǆemal", "tab", "and", "em", "space"}},
    {"ΟΔΥΣΣΕΥΣ ΣΑ ΑΣ. ΑΣ́Β ΑΣ's Σ\n",
     {"οδυσσευς", "σα", "ας", ".", "ασ́β", "ασ", "'", "s", "σ"}},
    {"   \n",
     {}},
    {"",
     {}},
  };
  return cases;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokens_are_torchtexts) {
  for (const auto& c : python_cases()) {
    BOOST_TEST_CONTEXT("line '" << c.line << "'") { BOOST_TEST(basic_english_tokenize(c.line) == c.tokens); }
  }
}

BOOST_AUTO_TEST_CASE(substitutions_apply_in_order) {
  // ' -> " '  " comes before " is removed: an apostrophe is its own token even inside quotes.
  BOOST_TEST(basic_english_tokenize("\"'\"") == Tokens{"'"});
  // ; and : become spaces (not tokens); ! and ? are tokens.
  BOOST_TEST(basic_english_tokenize("a;b:c!d?e") == (Tokens{"a", "b", "c", "!", "d", "?", "e"}));
  // <br /> only in that spelling (after lower-casing); "<br/>" stays a token.
  BOOST_TEST(basic_english_tokenize("x<br/>y") == Tokens{"x<br/>y"});
  // Other punctuation is left inside tokens.
  BOOST_TEST(basic_english_tokenize("@-@ e-mail [1] <unk>") == (Tokens{"@-@", "e-mail", "[1]", "<unk>"}));
}

BOOST_AUTO_TEST_CASE(lower_case_follows_python) {
  // ASCII, Latin-1, Greek, Cyrillic; İ becomes two code points (i and a combining dot) as in Python.
  BOOST_TEST(basic_english_tokenize("ABC ÀÖØÞ ΩΔ ЖЯ Ǆ İ") ==
             (Tokens{"abc", "àöøþ", "ωδ", "жя", "ǆ", "i\u0307"}));
  // Characters without a lower case are kept; ß stays ß (lower(), not casefold()).
  BOOST_TEST(basic_english_tokenize("ß 3 戦") == (Tokens{"ß", "3", "戦"}));
}

BOOST_AUTO_TEST_CASE(whitespace_is_pythons) {
  // \s and split() cut at Unicode spaces (NBSP, thin space, line separator), not at ZWSP.
  BOOST_TEST(basic_english_tokenize("a\u00a0b\u2009c\u2028d\u200be") == (Tokens{"a", "b", "c", "d\u200be"}));
  BOOST_TEST(basic_english_tokenize("  \t\r\n ").empty());
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_utf8_pass_through) {
  // read_tokenized_lines refuses such files; the tokenizer itself neither crashes nor drops them.
  const std::string bad = std::string("A\xff") + "B \xc3";
  BOOST_TEST(basic_english_tokenize(bad) == (Tokens{std::string("a\xff") + "b", "\xc3"}));
}

BOOST_AUTO_TEST_SUITE_END()
