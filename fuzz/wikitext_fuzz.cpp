// WikiText token files: the input is each of wiki.train.tokens, wiki.valid.tokens and
// wiki.test.tokens of a directory (UTF-8 checks, universal newlines, the basic_english tokenizer,
// the vocabulary and its <unk>), then batchified and walked in bptt windows. The tokenizer also
// takes the raw bytes (invalid UTF-8 included), and its tokens must be non-empty and free of
// whitespace: a token that breaks that is a finding.
#include <cstdlib>

#include "fuzz_input.hpp"
#include "ptrain/data/bptt_batches.hpp"
#include "ptrain/data/wikitext.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& token : ptrain::basic_english_tokenize(text))
    if (token.empty() || token.find_first_of(" \t\n\r\f\v") != std::string::npos) std::abort();
  const auto& dir = ptrain::fuzz::scratch();
  for (const char* split : ptrain::WikiText::split_names)
    ptrain::fuzz::input_file(data, size, ptrain::WikiText::file(".", split, ptrain::WikiTextFormat::tokens).filename());
  return ptrain::fuzz::refuse_cleanly([&] {
    const ptrain::WikiText wikitext(dir);
    ptrain::BpttLoader loader(ptrain::batchify(wikitext.train(), 2), 3);
    for (const auto& batch : loader)
      if (batch.inputs.numel() != batch.targets.numel()) std::abort();
  });
}
