#pragma once
// WikiText-2 (and WikiText-103, the same layout) as distributed: a directory holding
// wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens (or the raw variant, wiki.*.raw), UTF-8
// text of Wikipedia articles, one paragraph per line, headings as " = Title = " and " = = Section
// = = ", blank lines between, rare words already replaced by <unk> and in-word hyphens written
// " @-@ ". Read as PyTorch's language-modelling tutorial reads it: every line through torchtext's
// basic_english tokenizer (data/basic_english.hpp), a vocabulary built from the training split with
// the specials first and "<unk>" as the default index (data/vocab.hpp), and each split the
// concatenation of its lines' token indices (the tutorial's data_process). Batching into bptt
// windows is data/bptt_batches.hpp.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/data/basic_english.hpp"
#include "ptrain/data/detail/byte_reader.hpp"
#include "ptrain/data/vocab.hpp"

namespace ptrain {

// The lines of UTF-8 text as Python's text mode splits them (universal newlines: "\n", "\r\n" and
// "\r" each end a line; a last line without an end counts, an empty one after the last end does
// not). name is used in errors: a byte that is not UTF-8 is named by line and byte offset.
inline std::vector<std::string_view> text_lines(std::string_view text, const std::string& name) {
  std::vector<std::string_view> lines;
  std::size_t begin = 0;
  std::int64_t line = 1;
  for (std::size_t i = 0; i <= text.size();) {
    if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
      if (i > begin || i < text.size()) lines.push_back(text.substr(begin, i - begin));
      if (i == text.size()) break;
      i += text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n' ? 2 : 1;
      begin = i;
      ++line;
      continue;
    }
    const detail::Utf8Char c = detail::decode_utf8(text, i);
    check(c.code_point <= 0x10FFFF, name, ": line ", line, ", byte offset ", i, ": byte 0x",
          detail::Hex{static_cast<unsigned char>(text[i])}, " is not valid UTF-8: expected UTF-8 text");
    i += c.length;
  }
  return lines;
}

// Each line of text_lines through basic_english_tokenize.
inline std::vector<std::vector<std::string>> tokenize_lines(std::string_view text, const std::string& name) {
  std::vector<std::vector<std::string>> lines;
  for (const std::string_view line : text_lines(text, name)) lines.push_back(basic_english_tokenize(line));
  return lines;
}

// A whole file's bytes (a gzip-compressed file is read through zlib) and the name errors use.
struct TextFile {
  std::string text;
  std::string name;
};
inline TextFile read_text_file(const std::filesystem::path& path) {
  detail::ByteReader in(path);
  std::string text;
  char buffer[1 << 16];
  for (std::size_t got; (got = in.read(buffer, sizeof buffer)) > 0;) text.append(buffer, got);
  return {std::move(text), in.name()};
}

// A whole file's tokenized lines. A file without a single token is an error: a WikiText split is
// never empty.
inline std::vector<std::vector<std::string>> read_tokenized_lines(const std::filesystem::path& path) {
  const auto [text, name] = read_text_file(path);
  auto lines = tokenize_lines(text, name);
  std::size_t tokens = 0;
  for (const auto& l : lines) tokens += l.size();
  check(tokens > 0, name, ": ", text.empty() ? "empty" : "no tokens (only whitespace)",
        ": expected WikiText lines of text (' = Title = ' headings and paragraphs)");
  return lines;
}

// The articles of a WikiText file (wiki.train.raw, say), ALBERT's and BERT's documents: each
// article its paragraphs in order, a level-1 heading line (" = Title = ") starting the next one;
// headings of every level and blank lines are left out. A file without a paragraph is an error.
inline std::vector<std::vector<std::string>> read_wikitext_articles(const std::filesystem::path& path) {
  const auto [text, name] = read_text_file(path);
  std::vector<std::vector<std::string>> articles(1);
  for (std::string_view line : text_lines(text, name)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t") - first + 1);
    if (line.size() >= 3 && line.front() == '=' && line.back() == '=') {  // a heading
      if (line.substr(0, 3) != "= =" && !articles.back().empty()) articles.emplace_back();
      continue;
    }
    articles.back().emplace_back(line);
  }
  if (articles.back().empty()) articles.pop_back();
  check(!articles.empty(), name, ": ", text.empty() ? "empty" : "no paragraph of text",
        ": expected WikiText articles (' = Title = ' headings and paragraphs)");
  return articles;
}

enum class WikiTextFormat { tokens, raw };  // wiki.*.tokens, or wiki.*.raw

struct WikiTextOptions {
  WikiTextFormat format = WikiTextFormat::tokens;
  // Put first in the vocabulary; "<unk>" must be in it (here or in the training text): it is the
  // default index every token outside the vocabulary maps to.
  std::vector<std::string> specials{"<unk>"};
};

class WikiText {
 public:
  static constexpr std::array<const char*, 3> split_names = {"train", "valid", "test"};

  explicit WikiText(const std::filesystem::path& directory, const WikiTextOptions& options = {})
      : vocab_(std::vector<std::string>{}) {
    std::array<std::filesystem::path, 3> paths;
    for (std::size_t s = 0; s < 3; ++s) {
      paths[s] = file(directory, split_names[s], options.format);
      check(std::filesystem::is_regular_file(paths[s]), "WikiText: ", paths[s].string(), " not found: expected ",
            expected_files(options.format), " in ", directory.string(), " (the wikitext-2 folder of the archive)");
    }
    std::array<std::vector<std::vector<std::string>>, 3> lines;
    for (std::size_t s = 0; s < 3; ++s) lines[s] = read_tokenized_lines(paths[s]);
    TokenCounts counts;
    for (const auto& line : lines[0]) counts.add(line);
    vocab_ = build_vocab(counts, options.specials);
    const auto unk = vocab_.find("<unk>");
    check(unk.has_value(), "WikiText: the vocabulary built from ", paths[0].string(),
          " has no '<unk>': expected '<unk>' among the specials or in the training text, to stand for the "
          "validation and test tokens outside the vocabulary");
    vocab_.set_default_index(*unk);
    for (std::size_t s = 0; s < 3; ++s)
      for (const auto& line : lines[s])
        for (const auto& token : line) ids_[s].push_back(vocab_.index(token));
  }

  static std::filesystem::path file(const std::filesystem::path& directory, std::string_view split,
                                    WikiTextFormat format) {
    return directory / ("wiki." + std::string(split) + (format == WikiTextFormat::tokens ? ".tokens" : ".raw"));
  }

  const Vocab& vocab() const { return vocab_; }
  // Each split's token indices, its lines one after another.
  const std::vector<std::int64_t>& train() const { return ids_[0]; }
  const std::vector<std::int64_t>& valid() const { return ids_[1]; }
  const std::vector<std::int64_t>& test() const { return ids_[2]; }

 private:
  static std::string expected_files(WikiTextFormat format) {
    const std::string ext = format == WikiTextFormat::tokens ? ".tokens" : ".raw";
    return "wiki.train" + ext + ", wiki.valid" + ext + " and wiki.test" + ext;
  }

  Vocab vocab_;
  std::array<std::vector<std::int64_t>, 3> ids_;
};

}  // namespace ptrain
