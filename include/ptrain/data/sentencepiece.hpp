#pragma once
// ALBERT's SentencePiece tokenizer, through the SentencePiece library itself (libsentencepiece; the
// ptrain::sentencepiece component, which defines PTRAIN_HAS_SENTENCEPIECE): a .model file as
// spm_train writes it (ALBERT's spiece.model), and text turned into ids as HuggingFace's
// AlbertTokenizer turns it (do_lower_case=True, remove_space=True, keep_accents=False):
//  1. the text split at Python's whitespace and joined again with one space (" ".join(t.split()));
//  2. `` and '' written as ";
//  3. accents stripped: each code point decomposed and the combining marks dropped. HF decomposes
//     with NFKD, this with NFD; the model's own NFKC normalisation folds the compatibility forms
//     afterwards, so the two differ only where a compatibility decomposition holds a combining
//     mark (ǅ, say: HF gives "dz", this "dž");
//  4. lower-cased one code point at a time (Python's str.lower() of each character);
//  5. the model's pieces (its normalisation, then the most likely segmentation), where a piece
//     ending in an ASCII digit and a comma ("▁9,") is encoded again without the comma and the
//     comma added as its own piece (AlbertTokenizer._tokenize).
// Special tokens written in the text are not cut out as HF's added tokens are: the pipeline places
// [CLS], [SEP] and [MASK] by id. Without lower_case steps 3 and 4 are left out.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sentencepiece_processor.h>

#include "ptrain/core/error.hpp"
#include "ptrain/data/basic_english.hpp"
#include "ptrain/data/special_tokens.hpp"
#include "ptrain/data/wordpiece.hpp"

namespace ptrain {

struct SentencePieceOptions {
  bool lower_case = true;  // do_lower_case, with keep_accents=False: steps 3 and 4
};

class SentencePieceTokenizer {
 public:
  static constexpr std::string_view word_start = "\xE2\x96\x81";  // U+2581, the piece's mark of a space

  explicit SentencePieceTokenizer(const std::filesystem::path& model_file, SentencePieceOptions options = {})
      : source_(model_file.string()), options_(options) {
    auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->Load(source_);
    check(status.ok(), source_, ": cannot load a SentencePiece model (", status.ToString(),
          "): expected a .model file written by spm_train, such as ALBERT's spiece.model");
    processor_ = std::move(processor);
    special_.vocab_size = processor_->GetPieceSize();
    special_.unk = processor_->unk_id();
    special_.pad = processor_->pad_id();
    check(special_.pad >= 0, source_, ": the model has no <pad> piece (trained with --pad_id=-1): expected ",
          "ALBERT's pieces <pad>, <unk>, [CLS], [SEP] and [MASK]");
    special_.cls = special_piece("[CLS]");
    special_.sep = special_piece("[SEP]");
    special_.mask = special_piece("[MASK]");
  }

  std::int64_t vocab_size() const { return special_.vocab_size; }
  std::int64_t unk_id() const { return special_.unk; }
  std::int64_t cls_id() const { return special_.cls; }
  std::int64_t sep_id() const { return special_.sep; }
  std::int64_t mask_id() const { return special_.mask; }
  std::int64_t pad_id() const { return special_.pad; }
  bool is_special(std::int64_t id) const { return special_.is_special(id); }
  SpecialTokenIds special_ids() const { return special_; }

  // The id of a piece ("▁the", "[MASK]"), unk_id() for a string that is no piece of the model.
  std::int64_t piece_to_id(std::string_view piece) const { return processor_->PieceToId(piece); }
  const std::string& id_to_piece(std::int64_t id) const {
    check(id >= 0 && id < vocab_size(), source_, ": no piece of id ", id, ": expected an id in [0, ", vocab_size(),
          ")");
    return processor_->IdToPiece(static_cast<int>(id));
  }

  // Steps 1 to 4 of the file comment (AlbertTokenizer.preprocess_text).
  std::string preprocess(std::string_view text) const {
    std::vector<std::vector<std::uint32_t>> words;
    bool in_word = false;
    for (std::size_t i = 0; i < text.size();) {
      const detail::Utf8Char u = detail::decode_utf8(text, i);
      check(u.code_point <= 0x10FFFF, "SentencePieceTokenizer (", source_, "): byte ", i, " (0x",
            detail::Hex{static_cast<unsigned char>(text[i])},
            ") of the text is not valid UTF-8: expected UTF-8 text");
      i += u.length;
      if (detail::is_python_space(u.code_point)) {
        in_word = false;
        continue;
      }
      if (!in_word) words.emplace_back();
      in_word = true;
      words.back().push_back(u.code_point);
    }
    std::string joined;
    for (const auto& word : words) {
      if (!joined.empty()) joined += ' ';
      for (const std::uint32_t c : word) detail::append_utf8(joined, c);
    }
    std::string quoted;
    for (std::size_t i = 0; i < joined.size(); ++i) {
      const bool pair = i + 1 < joined.size() && joined[i + 1] == joined[i] && (joined[i] == '`' || joined[i] == '\'');
      quoted += pair ? '"' : joined[i];
      if (pair) ++i;
    }
    if (!options_.lower_case) return quoted;
    std::vector<std::uint32_t> code_points;
    for (std::size_t i = 0; i < quoted.size(); i += detail::decode_utf8(quoted, i).length)
      code_points.push_back(detail::decode_utf8(quoted, i).code_point);
    std::string out;
    for (const std::uint32_t c : detail::nfd(code_points))
      if (detail::combining_class(c) == 0) detail::append_lower(out, c);
    return out;
  }

  // The pieces of UTF-8 text (AlbertTokenizer.tokenize).
  std::vector<std::string> tokenize(std::string_view text) const {
    std::vector<std::string> out;
    for (std::string& piece : pieces(preprocess(text))) {
      if (!ends_in_digit_and_comma(piece)) {
        out.push_back(std::move(piece));
        continue;
      }
      std::string digits = piece.substr(0, piece.size() - 1);
      for (std::size_t at; (at = digits.find(word_start)) != std::string::npos;) digits.erase(at, word_start.size());
      std::vector<std::string> again = pieces(digits);
      if (!piece.starts_with(word_start) && !again.empty() && again.front().starts_with(word_start)) {
        if (again.front().size() == word_start.size())
          again.erase(again.begin());
        else
          again.front().erase(0, word_start.size());
      }
      for (auto& p : again) out.push_back(std::move(p));
      out.emplace_back(",");
    }
    return out;
  }
  // Their ids (AlbertTokenizer.encode without [CLS] and [SEP]).
  std::vector<std::int64_t> encode(std::string_view text) const {
    std::vector<std::int64_t> ids;
    for (const auto& piece : tokenize(text)) ids.push_back(piece_to_id(piece));
    return ids;
  }

 private:
  std::int64_t special_piece(std::string_view piece) const {
    const int id = processor_->PieceToId(piece);
    check(processor_->IdToPiece(id) == piece, source_, ": no '", piece, "' piece: expected ALBERT's pieces <pad>, ",
          "<unk>, [CLS], [SEP] and [MASK] (spm_train --control_symbols=[CLS],[SEP],[MASK])");
    return id;
  }

  std::vector<std::string> pieces(const std::string& text) const {
    std::vector<std::string> out;
    const auto status = processor_->Encode(text, &out);
    check(status.ok(), source_, ": cannot encode text of ", text.size(), " bytes (", status.ToString(), ")");
    return out;
  }

  static bool ends_in_digit_and_comma(const std::string& piece) {
    return piece.size() >= 2 && piece.back() == ',' && piece[piece.size() - 2] >= '0' && piece[piece.size() - 2] <= '9';
  }

  std::string source_;
  SentencePieceOptions options_;
  // Shared and const: a loaded model is only read, so copies of the tokenizer share one.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  SpecialTokenIds special_;
};

}  // namespace ptrain
