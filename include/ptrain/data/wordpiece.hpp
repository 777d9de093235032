#pragma once
// BERT's and ALBERT's WordPiece tokenizer, token for token as HuggingFace's BertTokenizer (the
// Python one of transformers 4.x, and the Rust one) turns text into tokens and ids; uncased
// (do_lower_case, the default):
//  1. special tokens ([UNK] [CLS] [SEP] [MASK] [PAD]) written in the text are cut out whole and
//     kept as they are (the tokenizer's trie split);
//  2. the rest is lower-cased one code point at a time (Python's str.lower() of each character, so
//     capital sigma always becomes σ; transformers 5's Python tokenizer lowers whole words and
//     makes a word-final one ς);
//  3. cleaned: U+0000, U+FFFD and control characters (category C*, but tab, newline and carriage
//     return) dropped, whitespace (space, \t, \n, \r and category Zs) made a space;
//  4. CJK ideographs surrounded by spaces, the text split at Python's whitespace;
//  5. each word decomposed (NFD) and stripped of its accents (category Mn), then split before and
//     after every punctuation character (ASCII's non-alphanumeric symbols and category P*);
//  6. each piece matched greedily, longest first, against the vocabulary, a continuation written
//     "##piece"; a word of more than max_input_chars_per_word code points, or one that cannot be
//     matched through, is [UNK].
// HF also NFC-normalises before step 4; after lower-casing, NFD in step 5 makes that a no-op.
// Cased (lower_case off), steps 2 and 5's decomposition and accent stripping are left out. The
// Unicode tables are Python's (detail/unicode_bert_classes.hpp, detail/unicode_nfd.hpp,
// detail/unicode_lower.hpp).
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/data/basic_english.hpp"
#include "ptrain/data/detail/unicode_bert_classes.hpp"
#include "ptrain/data/detail/unicode_nfd.hpp"
#include "ptrain/data/special_tokens.hpp"
#include "ptrain/data/vocab.hpp"
#include "ptrain/data/wikitext.hpp"

namespace ptrain {

namespace detail {

inline BertClass bert_class(std::uint32_t c) {
  const auto run = std::upper_bound(bert_class_runs.begin(), bert_class_runs.end(), c,
                                    [](std::uint32_t x, const BertClassRun& r) { return x < r.first; });
  return run == bert_class_runs.begin() || c > (run - 1)->last ? BertClass::none : (run - 1)->klass;
}

inline bool is_bert_punctuation(std::uint32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126) ||
         bert_class(c) == BertClass::punctuation;
}

// BasicTokenizer._is_chinese_char: the CJK Unified Ideographs blocks and their extensions.
inline bool is_cjk_ideograph(std::uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

inline std::uint8_t combining_class(std::uint32_t c) {
  const auto run = std::upper_bound(combining_runs.begin(), combining_runs.end(), c,
                                    [](std::uint32_t x, const CombiningRun& r) { return x < r.first; });
  return run == combining_runs.begin() || c > (run - 1)->last ? 0 : (run - 1)->combining_class;
}

// unicodedata.normalize("NFD", ...) of a word: the full decompositions, Hangul syllables by the
// Unicode formula, then each run of combining characters stably sorted by combining class.
inline std::vector<std::uint32_t> nfd(const std::vector<std::uint32_t>& word) {
  constexpr std::uint32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
  constexpr std::uint32_t t_count = 28, n_count = 21 * t_count, s_count = 19 * n_count;
  std::vector<std::uint32_t> out;
  for (const std::uint32_t c : word) {
    if (c >= s_base && c < s_base + s_count) {
      const std::uint32_t s = c - s_base;
      out.push_back(l_base + s / n_count);
      out.push_back(v_base + s % n_count / t_count);
      if (s % t_count != 0) out.push_back(t_base + s % t_count);
      continue;
    }
    const auto d = std::lower_bound(decompositions.begin(), decompositions.end(), c,
                                    [](const Decomposition& e, std::uint32_t x) { return e.code_point < x; });
    if (d == decompositions.end() || d->code_point != c) {
      out.push_back(c);
      continue;
    }
    for (const std::uint32_t x : d->nfd)
      if (x != 0) out.push_back(x);
  }
  for (std::size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
                     [](std::uint32_t a, std::uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

inline std::vector<std::uint32_t> code_points(std::string_view text) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char u = decode_utf8(text, i);
    check(u.code_point <= 0x10FFFF, "WordPieceTokenizer: byte ", i, " (0x", Hex{static_cast<unsigned char>(text[i])},
          ") is not valid UTF-8: expected UTF-8 text");
    out.push_back(u.code_point);
    i += u.length;
  }
  return out;
}

// Steps 2 to 5 of the file comment: the words of text without special tokens.
inline std::vector<std::string> bert_basic_tokenize(std::string_view text, bool lower_case) {
  std::string lowered;
  if (lower_case)
    for (const std::uint32_t c : code_points(text)) append_lower(lowered, c);
  std::vector<std::vector<std::uint32_t>> words(1);
  const auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (const std::uint32_t c : code_points(lower_case ? std::string_view(lowered) : text)) {
    const BertClass k = bert_class(c);
    if (c == 0 || c == 0xFFFD || (k == BertClass::control && c != '\t' && c != '\n' && c != '\r')) continue;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || k == BertClass::space || is_python_space(c)) {
      end_word();
    } else if (is_cjk_ideograph(c)) {
      end_word();
      words.back().push_back(c);
      end_word();
    } else {
      words.back().push_back(c);
    }
  }
  std::vector<std::string> out;
  for (const auto& word : words) {
    std::string piece;
    for (const std::uint32_t c : lower_case ? nfd(word) : word) {
      if (lower_case && bert_class(c) == BertClass::mark) continue;
      if (!is_bert_punctuation(c)) {
        append_utf8(piece, c);
        continue;
      }
      if (!piece.empty()) out.push_back(std::move(piece));
      piece.clear();
      append_utf8(piece, c);
      out.push_back(std::move(piece));
      piece.clear();
    }
    if (!piece.empty()) out.push_back(std::move(piece));
  }
  return out;
}

}  // namespace detail

struct WordPieceOptions {
  // do_lower_case: steps 2 and 5's accent stripping; off (a cased vocabulary), the text keeps its
  // case and accents, and is not normalised (as the Rust tokenizer; transformers 5's Python one
  // NFC-normalises it).
  bool lower_case = true;
  std::int64_t max_input_chars_per_word = 100;
};

class WordPieceTokenizer {
 public:
  static constexpr std::array<std::string_view, 5> special_tokens = {"[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]"};

  // vocab: its tokens in id order; source names it in errors (the vocabulary file).
  WordPieceTokenizer(Vocab vocab, std::string source, WordPieceOptions options = {})
      : vocab_(std::move(vocab)), source_(std::move(source)), options_(std::move(options)) {
    check(options_.max_input_chars_per_word >= 1, source_, ": max_input_chars_per_word ",
          options_.max_input_chars_per_word, ", expected at least 1");
    for (std::size_t k = 0; k < special_tokens.size(); ++k) {
      const auto id = vocab_.find(special_tokens[k]);
      check(id.has_value(), source_, ": no '", special_tokens[k], "' token: expected a BERT/ALBERT vocabulary with ",
            "[UNK], [CLS], [SEP], [MASK] and [PAD], one token per line");
      special_ids_[k] = *id;
    }
    vocab_.set_default_index(unk_id());
  }
  // A BERT/ALBERT vocab.txt: one token per line, the line number (from 0) its id.
  explicit WordPieceTokenizer(const std::filesystem::path& vocab_file, WordPieceOptions options = {})
      : WordPieceTokenizer(read_vocab_file(vocab_file), vocab_file.string(), std::move(options)) {}

  static Vocab read_vocab_file(const std::filesystem::path& path) {
    const auto [text, name] = read_text_file(path);
    std::vector<std::string> tokens;
    for (const std::string_view line : text_lines(text, name)) tokens.emplace_back(line);
    check(!tokens.empty(), name, ": empty: expected a vocabulary, one token per line");
    std::unordered_map<std::string_view, std::int64_t> first_line;
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      const auto [at, added] = first_line.emplace(tokens[k], static_cast<std::int64_t>(k) + 1);
      check(added, name, ": line ", k + 1, ": token '", tokens[k], "' already on line ", at->second,
            ": expected each token once");
    }
    return Vocab(std::move(tokens));
  }

  const Vocab& vocab() const { return vocab_; }
  std::int64_t unk_id() const { return special_ids_[0]; }
  std::int64_t cls_id() const { return special_ids_[1]; }
  std::int64_t sep_id() const { return special_ids_[2]; }
  std::int64_t mask_id() const { return special_ids_[3]; }
  std::int64_t pad_id() const { return special_ids_[4]; }
  bool is_special(std::int64_t id) const {
    return std::find(special_ids_.begin(), special_ids_.end(), id) != special_ids_.end();
  }
  SpecialTokenIds special_ids() const {
    return {.unk = unk_id(), .cls = cls_id(), .sep = sep_id(), .mask = mask_id(), .pad = pad_id(),
            .vocab_size = vocab_.size()};
  }

  // The tokens of UTF-8 text (BertTokenizer.tokenize).
  std::vector<std::string> tokenize(std::string_view text) const {
    std::vector<std::string> out;
    std::size_t begin = 0;
    const auto flush = [&](std::size_t end) {
      for (const auto& word : detail::bert_basic_tokenize(text.substr(begin, end - begin), options_.lower_case))
        word_pieces(word, out);
    };
    for (std::size_t i = 0; i < text.size();) {
      const std::string_view* special = special_at(text, i);
      if (!special) {
        ++i;
        continue;
      }
      flush(i);
      out.emplace_back(*special);
      i += special->size();
      begin = i;
    }
    flush(text.size());
    return out;
  }
  // Their ids (BertTokenizer.encode without [CLS] and [SEP]).
  std::vector<std::int64_t> encode(std::string_view text) const {
    std::vector<std::int64_t> ids;
    for (const auto& token : tokenize(text)) ids.push_back(vocab_.index(token));
    return ids;
  }

 private:
  const std::string_view* special_at(std::string_view text, std::size_t i) const {
    if (text[i] != '[') return nullptr;
    for (const auto& s : special_tokens)
      if (text.substr(i, s.size()) == s) return &s;
    return nullptr;
  }

  // WordpieceTokenizer.tokenize of one word.
  void word_pieces(const std::string& word, std::vector<std::string>& out) const {
    std::vector<std::size_t> starts;  // the byte offset of each code point, then the end
    for (std::size_t i = 0; i < word.size(); i += detail::decode_utf8(word, i).length) starts.push_back(i);
    if (static_cast<std::int64_t>(starts.size()) > options_.max_input_chars_per_word) {
      out.emplace_back(special_tokens[0]);
      return;
    }
    starts.push_back(word.size());
    std::vector<std::string> pieces;
    for (std::size_t start = 0; start + 1 < starts.size();) {
      std::size_t end = starts.size() - 1;
      std::string piece;
      for (; end > start; --end) {
        piece = start > 0 ? "##" : "";
        piece.append(word, starts[start], starts[end] - starts[start]);
        if (vocab_.contains(piece)) break;
      }
      if (end == start) {
        out.emplace_back(special_tokens[0]);
        return;
      }
      pieces.push_back(std::move(piece));
      start = end;
    }
    for (auto& p : pieces) out.push_back(std::move(p));
  }

  Vocab vocab_;
  std::string source_;
  WordPieceOptions options_;
  std::array<std::int64_t, 5> special_ids_{};
};

}  // namespace ptrain
