#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/pretraining_batches.hpp>
#include <ptrain/data/wikitext.hpp>
#include <ptrain/data/wordpiece.hpp>
#include <ptrain/models/albert.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>

#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(pretraining_batches_test)

using Ids = std::vector<std::int64_t>;
using test::contains;
using test::error_of;

namespace {

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path path = test::temp_dir("pretraining_batches_test") / name;
  test::write_bytes(path, std::vector<char>(text.begin(), text.end()));
  return path;
}

// [PAD] [UNK] [CLS] [SEP] [MASK] then the words w0 ... w<n-1>: word k has id 5 + k.
WordPieceTokenizer word_tokenizer(int words = 200) {
  std::vector<std::string> tokens{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int k = 0; k < words; ++k) tokens.push_back(std::string("w").append(std::to_string(k)));
  return WordPieceTokenizer(Vocab(tokens), "words");
}

// Documents of sentences with consecutive ids, so a pair's segments show where they came from:
// document d's sentences hold the ids first, first + 1, ... running on across its sentences.
std::vector<std::vector<Ids>> counting_documents(const std::vector<std::vector<int>>& sentence_lengths) {
  std::vector<std::vector<Ids>> docs;
  std::int64_t next = 5;
  for (const auto& lengths : sentence_lengths) {
    auto& doc = docs.emplace_back();
    for (const int n : lengths) {
      auto& s = doc.emplace_back();
      for (int k = 0; k < n; ++k) s.push_back(next++);
    }
  }
  return docs;
}

bool consecutive(const Ids& ids) {
  for (std::size_t k = 1; k < ids.size(); ++k)
    if (ids[k] != ids[k - 1] + 1) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(wikitext_articles_are_documents) {
  const fs::path raw = write_file("wiki.train.raw",
                                  " \n = Valkyria = \n \n The game began . It sold well . \n \n = = Plot = = \n"
                                  " \n The story . \r\n = Homarus = \r\n \r\n Lobsters are large . \n \n");
  const auto articles = read_wikitext_articles(raw);
  BOOST_TEST(articles.size() == 2u);
  BOOST_TEST(articles[0] == (std::vector<std::string>{"The game began . It sold well .", "The story ."}));
  BOOST_TEST(articles[1] == (std::vector<std::string>{"Lobsters are large ."}));
  BOOST_TEST(contains(error_of([&] { read_wikitext_articles(write_file("empty.raw", "")); }),
                      "empty.raw: empty: expected WikiText articles"));
  BOOST_TEST(contains(error_of([&] { read_wikitext_articles(write_file("titles.raw", " = A = \n\n = = B = = \n")); }),
                      "titles.raw: no paragraph of text"));
  const fs::path none = test::temp_dir("pretraining_batches_test") / "none.raw";
  BOOST_TEST(contains(error_of([&] { read_wikitext_articles(none); }), "none.raw: cannot open for reading"));
}

BOOST_AUTO_TEST_CASE(sentences_end_at_stops_before_a_space) {
  BOOST_TEST(split_sentences("The game began . It sold 1 @.@ 5 million ! Why ? No") ==
             (std::vector<std::string_view>{"The game began .", " It sold 1 @.@ 5 million !", " Why ?", " No"}));
  BOOST_TEST(split_sentences("").empty());
  const auto tokenizer = word_tokenizer();
  const auto docs = tokenize_documents({{"w1 w2 . W3 !", ". "}, {}}, tokenizer);
  BOOST_TEST(docs.size() == 2u);
  BOOST_TEST(docs[0] == (std::vector<Ids>{{6, 7, 1}, {8, 1}, {1}}));  // "." is not in the vocabulary: [UNK]
  BOOST_TEST(docs[1].empty());
}

BOOST_AUTO_TEST_CASE(pairs_are_consecutive_segments_in_or_out_of_order) {
  const auto tokenizer = word_tokenizer(2000);
  const auto docs = counting_documents({{5, 7, 3, 9, 4, 6, 8, 2, 5, 7, 3, 6}, {4, 4, 4, 4, 4, 4}, {20}, {1}});
  const SentenceOrderOptions options{.max_seq_len = 24, .short_seq_prob = 0.2, .seed = 7};
  const auto pairs = sentence_order_pairs(docs, tokenizer.special_ids(), options);
  BOOST_TEST_REQUIRE(pairs.size() >= 5u);
  int swapped = 0;
  for (const auto& p : pairs) {
    const auto& ids = p.input_ids;
    BOOST_TEST_REQUIRE(ids.size() <= 24u);
    BOOST_TEST(ids.front() == tokenizer.cls_id());
    BOOST_TEST(ids[static_cast<std::size_t>(p.first_b) - 1] == tokenizer.sep_id());
    BOOST_TEST(ids.back() == tokenizer.sep_id());
    const Ids a(ids.begin() + 1, ids.begin() + p.first_b - 1), b(ids.begin() + p.first_b, ids.end() - 1);
    BOOST_TEST_REQUIRE((!a.empty() && !b.empty()));
    // Each segment is a run of the text; in order, B starts where A ends (unless trimmed between).
    BOOST_TEST((consecutive(a) && consecutive(b)));
    const Ids& first = p.sop_label == 0 ? a : b;
    const Ids& second = p.sop_label == 0 ? b : a;
    BOOST_TEST(first.back() < second.front());
    swapped += static_cast<int>(p.sop_label);
  }
  BOOST_TEST(swapped > 0);
  BOOST_TEST(swapped < static_cast<int>(pairs.size()));
  // The one-sentence document of 20 tokens is cut at its middle; the one-token document gives none.
  const auto single =
      sentence_order_pairs(counting_documents({{20}, {1}}), tokenizer.special_ids(), {.short_seq_prob = 0});
  BOOST_TEST_REQUIRE(single.size() == 1u);
  BOOST_TEST(single[0].first_b == 1 + 10 + 1);
  // The same seed builds the same pairs; another builds others.
  const auto again = sentence_order_pairs(docs, tokenizer.special_ids(), options);
  const auto other =
      sentence_order_pairs(docs, tokenizer.special_ids(), {.max_seq_len = 24, .short_seq_prob = 0.2, .seed = 8});
  const auto same = [](const auto& x, const auto& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t k = 0; k < x.size(); ++k)
      if (x[k].input_ids != y[k].input_ids || x[k].sop_label != y[k].sop_label) return false;
    return true;
  };
  BOOST_TEST(same(pairs, again));
  BOOST_TEST(!same(pairs, other));
}

BOOST_AUTO_TEST_CASE(long_segments_are_trimmed_to_max_seq_len) {
  const auto tokenizer = word_tokenizer(2000);
  // Each sentence passes the target alone: two chunks of one sentence, each cut at its middle.
  const auto pairs = sentence_order_pairs(counting_documents({{300, 201}}), tokenizer.special_ids(),
                                          {.max_seq_len = 32, .short_seq_prob = 0});
  BOOST_TEST_REQUIRE(pairs.size() == 2u);
  for (const auto& p : pairs) {
    BOOST_TEST(p.input_ids.size() == 32u);
    // Trimmed after the swap, the longer segment first (B on a tie): 15 and 14 tokens remain.
    BOOST_TEST(p.first_b == 1 + 15 + 1);
  }
  const std::vector<std::vector<Ids>> none;
  BOOST_TEST(contains(error_of([&] { sentence_order_pairs(none, tokenizer.special_ids(), {.max_seq_len = 4}); }),
                      "max_seq_len 4, expected at least 5"));
}

BOOST_AUTO_TEST_CASE(masking_depends_on_seed_epoch_and_example_only) {
  const auto tokenizer = word_tokenizer(1000);
  Ids ids{tokenizer.cls_id()};
  for (int k = 0; k < 98; ++k) ids.push_back(10 + k);
  ids.push_back(tokenizer.sep_id());
  const MaskingOptions options{.seed = 3};
  const auto m = mask_tokens(ids, tokenizer.special_ids(), options, 2, 17);
  BOOST_TEST(m.input_ids == mask_tokens(ids, tokenizer.special_ids(), options, 2, 17).input_ids);
  BOOST_TEST(m.labels == mask_tokens(ids, tokenizer.special_ids(), options, 2, 17).labels);
  BOOST_TEST(m.labels != mask_tokens(ids, tokenizer.special_ids(), options, 3, 17).labels);
  BOOST_TEST(m.labels != mask_tokens(ids, tokenizer.special_ids(), options, 2, 18).labels);
  BOOST_TEST(m.labels != mask_tokens(ids, tokenizer.special_ids(), {.seed = 4}, 2, 17).labels);
  // round(0.15 * 98) = 15 of the 98 non-special tokens, labelled with their ids; the rest -100.
  int chosen = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (m.labels[i] == ignored_label) {
      BOOST_TEST(m.input_ids[i] == ids[i]);
      continue;
    }
    ++chosen;
    BOOST_TEST(m.labels[i] == ids[i]);
    BOOST_TEST(!tokenizer.is_special(ids[i]));
  }
  BOOST_TEST(chosen == 15);
  BOOST_TEST(mask_tokens({tokenizer.cls_id(), tokenizer.sep_id()}, tokenizer.special_ids(), options, 0, 0).labels ==
             (Ids{ignored_label, ignored_label}));
  BOOST_TEST(mask_tokens(ids, tokenizer.special_ids(), {.mask_prob = 0}, 0, 0).input_ids == ids);
}

BOOST_AUTO_TEST_CASE(chosen_tokens_are_masked_replaced_or_kept_80_10_10) {
  const auto tokenizer = word_tokenizer(1000);
  Ids ids;
  for (int k = 0; k < 100; ++k) ids.push_back(500 + k);
  int masked = 0, replaced = 0, kept = 0;
  for (std::int64_t example = 0; example < 400; ++example) {  // 400 x 15 = 6000 chosen tokens
    const auto m = mask_tokens(ids, tokenizer.special_ids(), {.seed = 11}, 0, example);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (m.labels[i] == ignored_label) continue;
      if (m.input_ids[i] == tokenizer.mask_id())
        ++masked;
      else if (m.input_ids[i] == ids[i])
        ++kept;  // includes the 1 in 1000 random draws of the same token
      else
        ++replaced;
    }
  }
  BOOST_TEST(masked + replaced + kept == 6000);
  // Binomial standard deviations: 31 for 80%, 23 for 10%; bounds at about 5 of them.
  BOOST_TEST(std::abs(masked - 4800) < 160);
  BOOST_TEST(std::abs(replaced - 600) < 120);
  BOOST_TEST(std::abs(kept - 600) < 120);
}

BOOST_AUTO_TEST_CASE(batches_are_padded_and_split_across_ranks) {
  const auto tokenizer = word_tokenizer(2000);
  const auto docs = counting_documents({{5, 7, 3, 9, 4, 6, 8, 2, 5, 7}, {4, 4, 4, 4, 4, 4, 9, 9}, {6, 6, 6}});
  auto pairs = sentence_order_pairs(docs, tokenizer.special_ids(), {.max_seq_len = 16, .short_seq_prob = 0.3});
  BOOST_TEST_REQUIRE(pairs.size() >= 6u);
  pairs.resize(6);
  const PretrainingLoaderOptions serial_options{.batch_size = 6, .max_seq_len = 16, .seed = 5};
  PretrainingLoader serial(pairs, tokenizer.special_ids(), serial_options);
  BOOST_TEST(serial.size() == 1u);
  serial.set_epoch(1);
  const PretrainingBatch b = *serial.begin();
  BOOST_TEST(b.input_ids.shape() == (Shape{6, 16}));
  BOOST_TEST(b.sop_labels.shape() == (Shape{6}));
  auto sorted = b.indices;
  std::sort(sorted.begin(), sorted.end());
  BOOST_TEST(sorted == (Ids{0, 1, 2, 3, 4, 5}));
  for (std::int64_t r = 0; r < 6; ++r) {
    const auto& pair = pairs[static_cast<std::size_t>(b.indices[static_cast<std::size_t>(r)])];
    const auto length = static_cast<std::int64_t>(pair.input_ids.size());
    const auto masked =
        mask_tokens(pair.input_ids, tokenizer.special_ids(), {.seed = 5}, 1, b.indices[static_cast<std::size_t>(r)]);
    BOOST_TEST(b.sop_labels.data()[r] == pair.sop_label);
    for (std::int64_t t = 0; t < 16; ++t) {
      const std::int64_t at = r * 16 + t;
      const bool token = t < length;
      BOOST_TEST(b.attention_mask.data()[at] == (token ? 1.0f : 0.0f));
      BOOST_TEST(b.token_type_ids.data()[at] == (t >= pair.first_b ? 1.0f : 0.0f));
      BOOST_TEST(b.input_ids.data()[at] ==
                 static_cast<float>(token ? masked.input_ids[static_cast<std::size_t>(t)] : tokenizer.pad_id()));
      BOOST_TEST(b.mlm_labels.data()[at] == (token ? masked.labels[static_cast<std::size_t>(t)] : ignored_label));
    }
  }
  // Another epoch: another order and other masks.
  serial.set_epoch(2);
  const PretrainingBatch next = *serial.begin();
  BOOST_TEST(next.indices != b.indices);
  // 2 and 3 ranks: contiguous shares of the rows that together are the serial batch.
  for (const int ranks : {2, 3}) {
    std::vector<float> joined_ids, joined_types;
    Ids joined_labels, joined_indices;
    for (int rank = 0; rank < ranks; ++rank) {
      auto options = serial_options;
      options.rank = rank;
      options.ranks = ranks;
      PretrainingLoader share(pairs, tokenizer.special_ids(), options);
      share.set_epoch(1);
      const PretrainingBatch part = *share.begin();
      BOOST_TEST(part.input_ids.size(0) == 6 / ranks);
      const auto ids = part.input_ids.to_vector(), types = part.token_type_ids.to_vector();
      const auto labels = part.mlm_labels.to_vector();
      joined_ids.insert(joined_ids.end(), ids.begin(), ids.end());
      joined_types.insert(joined_types.end(), types.begin(), types.end());
      joined_labels.insert(joined_labels.end(), labels.begin(), labels.end());
      joined_indices.insert(joined_indices.end(), part.indices.begin(), part.indices.end());
    }
    BOOST_TEST(joined_ids == b.input_ids.to_vector());
    BOOST_TEST(joined_types == b.token_type_ids.to_vector());
    BOOST_TEST(joined_labels == b.mlm_labels.to_vector());
    BOOST_TEST(joined_indices == b.indices);
  }
  BOOST_TEST(
      contains(error_of([&] { PretrainingLoader({}, tokenizer.special_ids(), {}); }), "no sentence-order pairs"));
  BOOST_TEST(contains(
      error_of([&] { PretrainingLoader(pairs, tokenizer.special_ids(), {.batch_size = 6, .max_seq_len = 8}); }),
                      "expected at most max_seq_len 8 tokens"));
  PretrainingLoader uneven(pairs, tokenizer.special_ids(), {.batch_size = 4, .max_seq_len = 16, .rank = 2, .ranks = 3});
  BOOST_TEST(uneven.size() == 2u);
  BOOST_TEST(contains(error_of([&] { uneven.batch(0, 1, uneven.order(0)); }),
                      "the last batch has 2 pairs for 3 data-parallel ranks"));
}

// The Trainer's batch: inputs in AlbertForPreTraining's one-tensor form (as albert_inputs packs
// them), targets that AlbertPreTraining's batch_targets reads back as the MLM and SOP labels.
BOOST_AUTO_TEST_CASE(trainer_batch_is_the_model_inputs_and_the_task_targets) {
  const auto tokenizer = word_tokenizer(2000);
  auto pairs = sentence_order_pairs(counting_documents({{5, 7, 3, 9, 4, 6}, {4, 4, 9, 9}, {6, 6, 6}}),
                                    tokenizer.special_ids(), {.max_seq_len = 16});
  BOOST_TEST_REQUIRE(pairs.size() >= 3u);
  PretrainingLoader loader(pairs, tokenizer.special_ids(), {.batch_size = 3, .max_seq_len = 16, .seed = 2});
  const PretrainingBatch b = *loader.begin();
  const Batch t = trainer_batch(b);
  const auto whole = [](const Tensor<float>& x) {
    const auto v = x.to_vector();
    return Ids(v.begin(), v.end());
  };
  BOOST_TEST(t.inputs.shape() == (Shape{3, 3, 16}));
  BOOST_TEST(t.inputs.to_vector() ==
             albert_inputs<float>(whole(b.input_ids), whole(b.token_type_ids), whole(b.attention_mask), 3, 16)
                 .to_vector());
  BOOST_TEST(t.indices == b.indices);
  const AlbertTargets targets = AlbertPreTraining{.vocab_size = 2005}.batch_targets(t);
  BOOST_TEST(targets.mlm_labels.shape() == (Shape{3, 16}));
  BOOST_TEST(targets.mlm_labels.to_vector() == b.mlm_labels.to_vector());
  BOOST_TEST(targets.sop_labels == b.sop_labels.to_vector());
}

// A run of steps reads the loader's batches on across its epochs, cut into periods (the
// Trainer's epochs); a period resumed mid-way begins at its batch.
BOOST_AUTO_TEST_CASE(pretraining_steps_read_on_across_epochs_in_periods) {
  const auto tokenizer = word_tokenizer(2000);
  auto pairs = sentence_order_pairs(counting_documents({{5, 7, 3, 9, 4, 6, 8, 2, 5, 7}, {4, 4, 4, 4, 4, 9, 9}}),
                                    tokenizer.special_ids(), {.max_seq_len = 16});
  BOOST_TEST_REQUIRE(pairs.size() >= 6u);
  pairs.resize(6);
  const PretrainingLoader loader(pairs, tokenizer.special_ids(), {.batch_size = 2, .max_seq_len = 16, .seed = 3});
  BOOST_TEST_REQUIRE(loader.size() == 3u);
  // Run batch g: batch g % 3 of the loader's epoch g / 3.
  const auto expected = [&](std::int64_t g) { return trainer_batch(loader.batch(g / 3, g % 3, loader.order(g / 3))); };
  PretrainingSteps run(loader, 7, 3);
  BOOST_TEST(run.periods() == 3);
  std::int64_t g = 0;
  for (int period = 0; period < run.periods(); ++period) {
    run.set_epoch(period);
    BOOST_TEST(run.size() == (period < 2 ? 3u : 1u));
    for (const Batch& b : run) {
      const Batch want = expected(g++);
      BOOST_TEST(b.indices == want.indices);
      BOOST_TEST(b.index == want.index);
      BOOST_TEST(b.inputs.to_vector() == want.inputs.to_vector());
      BOOST_TEST(b.targets == want.targets);
    }
  }
  BOOST_TEST(g == 7);
  run.set_epoch(1);
  run.set_first_batch(2);
  std::vector<std::int64_t> read;
  for (const Batch& b : run) read.push_back(b.index);
  BOOST_TEST(read == (Ids{2}));  // run batch 5: the loader's epoch 1, batch 2
  BOOST_TEST(contains(error_of([&] { PretrainingSteps(loader, 0, 3); }), "0 steps in periods of 3"));
}

// A vocab.txt and a WikiText raw file to batches: what examples/albert_pretrain reads.
BOOST_AUTO_TEST_CASE(wikitext_and_vocab_files_to_batches) {
  const WordPieceTokenizer tokenizer(
      write_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ngame\n##s\n.\nit\nsold\nwell\nlobster\n"));
  const fs::path raw = write_file("corpus.raw", " = Game = \n The games sold well . It sold . The game sold .\n"
                                                " = Lobster = \n The lobster sold . It sold well .\n");
  const auto pairs = sentence_order_pairs(raw, tokenizer, {.max_seq_len = 12, .short_seq_prob = 0});
  // Game's sentences of 6, 3 and 4 tokens reach the target of 9 at the second; the third, left
  // alone at the document's end, is cut at its middle. Lobster's two (4 + 4) end their document.
  BOOST_TEST_REQUIRE(pairs.size() == 3u);
  BOOST_TEST(pairs[0].input_ids.size() == 12u);
  BOOST_TEST(pairs[1].input_ids.size() == 7u);
  BOOST_TEST(pairs[2].input_ids.size() == 11u);
  BOOST_TEST(contains(error_of([&] { sentence_order_pairs(write_file("short.raw", " = A = \n the\n"), tokenizer); }),
                      "short.raw: no sentence-order pair: expected an article of two tokens or more"));
  PretrainingLoader loader(pairs, tokenizer.special_ids(), {.batch_size = 2, .max_seq_len = 12});
  std::vector<Shape> shapes;
  for (const auto& batch : loader) shapes.push_back(batch.input_ids.shape());
  BOOST_TEST(shapes == (std::vector<Shape>{{2, 12}, {1, 12}}));
}

BOOST_AUTO_TEST_SUITE_END()
