#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/data/vocab.hpp>

#include "../common/files.hpp"

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(vocab_test)

using Tokens = std::vector<std::string>;
using test::contains;
using test::error_of;

// torchtext's build_vocab_from_iterator: specials first, then frequency descending, ties in code
// point order (not order of appearance).
BOOST_AUTO_TEST_CASE(order_is_torchtexts) {
  TokenCounts counts;
  counts.add({"the", "cat", "<unk>", "sat", "on", "the", "mat"});
  counts.add({"zebra", "the", "cat", "é", "Z", "<unk>"});
  // counts: the 3; cat 2, <unk> 2; sat, on, mat, zebra, é, Z 1.
  const Vocab vocab = build_vocab(counts, {"<unk>", "<pad>"});
  BOOST_TEST(vocab.tokens() == (Tokens{"<unk>", "<pad>", "the", "cat", "Z", "mat", "on", "sat", "zebra", "é"}));
  BOOST_TEST(vocab.index("cat") == 3);
  BOOST_TEST(vocab.token(9) == "é");
  BOOST_TEST(counts.count("the") == 3);
  BOOST_TEST(counts.count("dog") == 0);
}

BOOST_AUTO_TEST_CASE(min_freq_and_no_specials) {
  TokenCounts counts;
  counts.add({"b", "a", "b", "c", "a", "b"});
  BOOST_TEST(build_vocab(counts).tokens() == (Tokens{"b", "a", "c"}));
  BOOST_TEST(build_vocab(counts, {}, 2).tokens() == (Tokens{"b", "a"}));
}

BOOST_AUTO_TEST_CASE(default_index_maps_unknown_tokens) {
  TokenCounts counts;
  counts.add({"a", "b"});
  Vocab vocab = build_vocab(counts, {"<unk>"});
  const std::string message = error_of([&] { vocab.index("zzz"); });
  BOOST_TEST(contains(message, "'zzz' is not in the vocabulary, which has no default index"), message);
  vocab.set_default_index(*vocab.find("<unk>"));
  BOOST_TEST(vocab.index("zzz") == 0);
  BOOST_TEST(!vocab.find("zzz").has_value());
  BOOST_TEST(contains(error_of([&] { vocab.set_default_index(3); }), "default index 3 out of range"));
}

BOOST_AUTO_TEST_CASE(duplicate_tokens_are_refused) {
  const std::string message = error_of([] { Vocab(Tokens{"a", "b", "a"}); });
  BOOST_TEST(contains(message, "token 'a' appears twice (at 0 and 2)"), message);
}

BOOST_AUTO_TEST_SUITE_END()
