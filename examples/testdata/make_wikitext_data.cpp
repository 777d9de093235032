// Writes a small corpus in WikiText-2's distributed form for the transformer_lm smoke tests:
// `make_wikitext_data DIR` fills DIR/wiki.{train,valid,test}.tokens with articles the way WikiText
// lays them out (" = Title = " and " = = Section = = " headings between blank lines, paragraphs of
// one line, " @-@ " inside hyphenated words, <unk> for rare words). The sentences come from a small
// grammar, "the ADJ NOUN VERB the NOUN .", where each noun has its own verb: a model that learns
// the structure reaches a perplexity near 2, where a unigram model stays near 15 and a uniform
// guess at the vocabulary size (about 30).
// For albert_pretrain's smoke tests it also writes the training split as WikiText's raw files have
// it, DIR/wiki.train.raw (a rare word itself where the .tokens file has <unk>), and DIR/vocab.txt, a
// WordPiece vocabulary in BERT's format (one token per line, [PAD] first): the special tokens, the
// punctuation, the words, some as a stem and ##-pieces; the rare word is not in it ([UNK]).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/io/atomic_file.hpp>

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> adjectives = {"old", "small", "red", "quiet"};
const std::vector<std::string> nouns = {"cat", "ship", "sea @-@ lion", "king", "river", "bird"};
const std::vector<std::string> verbs = {"sees", "carries", "follows", "rules", "crosses", "hears"};

template <class V>
const auto& pick(ptrain::Rng& rng, const V& values) {
  return values[static_cast<std::size_t>(rng.below(values.size()))];
}

std::string sentence(ptrain::Rng& rng) {
  const std::size_t noun = static_cast<std::size_t>(rng.below(nouns.size()));
  // One adjective in ten is a rare word, as WikiText writes them.
  const std::string adjective = rng.below(10) == 0 ? "<unk>" : pick(rng, adjectives);
  return "the " + adjective + " " + nouns[noun] + " " + verbs[noun] + " the " + pick(rng, nouns) + " . ";
}

const char* const rare_word = "ancient";

const std::vector<std::string> word_pieces = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "@", "-", "<", ">", "unk", "the", "old", "small", "red",
    "quiet", "cat", "ship", "sea", "lion", "king", "river", "bird", "sees", "carr", "##ies", "follow", "##s",
    "rules", "cross", "##es", "hears"};

// articles articles of sections sections of paragraphs paragraphs of 4..8 sentences; returns the text.
std::string write_split(const fs::path& path, ptrain::Rng& rng, int articles, int sections, int paragraphs) {
  std::string text;
  for (int a = 0; a < articles; ++a) {
    text += " \n = Article " + std::to_string(a + 1) + " = \n \n";
    for (int s = 0; s < sections; ++s) {
      if (s > 0) text += " \n = = Section " + std::to_string(s + 1) + " = = \n \n";
      for (int p = 0; p < paragraphs; ++p) {
        text += " ";
        const int count = 4 + static_cast<int>(rng.below(5));
        for (int k = 0; k < count; ++k) text += sentence(rng);
        text += "\n";
      }
    }
  }
  ptrain::io::write_atomically(path, [&](std::ostream& out) { out << text; });
  return text;
}

// The text with every <unk> written as the rare word, as WikiText's raw files keep it.
std::string raw_text(std::string text) {
  const std::string unk = "<unk>";
  for (std::size_t at = text.find(unk); at != std::string::npos; at = text.find(unk, at))
    text.replace(at, unk.size(), rare_word);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_wikitext_data DIR\n");
    return 2;
  }
  try {
    const fs::path root = argv[1];
    ptrain::Rng rng(2025);
    const std::string train = write_split(root / "wiki.train.tokens", rng, 16, 3, 6);
    write_split(root / "wiki.valid.tokens", rng, 2, 2, 4);
    write_split(root / "wiki.test.tokens", rng, 2, 2, 4);
    ptrain::io::write_atomically(root / "wiki.train.raw", [&](std::ostream& out) { out << raw_text(train); });
    ptrain::io::write_atomically(root / "vocab.txt", [&](std::ostream& out) {
      for (const std::string& piece : word_pieces) out << piece << "\n";
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_wikitext_data: %s\n", e.what());
    return 1;
  }
  return 0;
}
