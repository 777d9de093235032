// Writes a small corpus in WikiText-2's distributed form for the transformer_lm smoke tests:
// `make_wikitext_data DIR` fills DIR/wiki.{train,valid,test}.tokens with articles the way WikiText
// lays them out (" = Title = " and " = = Section = = " headings between blank lines, paragraphs of
// one line, " @-@ " inside hyphenated words, <unk> for rare words). The sentences come from a small
// grammar, "the ADJ NOUN VERB the NOUN .", where each noun has its own verb: a model that learns
// the structure reaches a perplexity near 2, where a unigram model stays near 15 and a uniform
// guess at the vocabulary size (about 30).
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

// articles articles of sections sections of paragraphs paragraphs of 4..8 sentences.
void write_split(const fs::path& path, ptrain::Rng& rng, int articles, int sections, int paragraphs) {
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
    write_split(root / "wiki.train.tokens", rng, 16, 3, 6);
    write_split(root / "wiki.valid.tokens", rng, 2, 2, 4);
    write_split(root / "wiki.test.tokens", rng, 2, 2, 4);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_wikitext_data: %s\n", e.what());
    return 1;
  }
  return 0;
}
