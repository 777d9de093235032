#!/usr/bin/env python3
"""Prints the vocabulary and the expected tokens of test/data/wordpiece_test.cpp's cases: HuggingFace
transformers' BertTokenizer (the Python one, do_lower_case=True) as transformers 4.x writes it
(tokenization_utils.py's tokenize and models/bert/tokenization_bert.py's BasicTokenizer and
WordpieceTokenizer), transcribed below; where transformers is importable, its tokenizers are
checked against the transcription first:

    python3 test/data/make_wordpiece_cases.py
"""
import os
import re
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from make_basic_english_cases import cpp_string  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "aff", "##a", "##b", "a",
         "b", "c", "##c", "ecole", "istanbul", "straße", "strasse", "σ", "οδυσσευς", "σα", "ας", "ασβ", ",", ".",
         "!", "?", "'", "\"", "(", ")", "-", "@", "$", "¿", "«", "»", "中", "国", "人", "한", "##국", "ᄒ", "##ᅡ",
         "##ᆫ", "x", "##x", "don", "t", "##y", "cafe", "naive", "hello", "world", "##s", "game", "valkyria",
         "chronicles", "iii", "=", "3", "s", "it", "5", "1", "000", "lo", "##ng", "long", "𝒜", "ﬁ", "ℌ", "The", "Un",
         "É", "##É", "Valkyria", "III", "Café", "Σ", "Ω", "Straße", "İstanbul"]

CASES = [
    "UNaffable the Unaffable",
    " = Valkyria Chronicles III = \n",
    "Don't STOP... \"believing\" (the game's 1 @,@ 000 $)!",
    "ÉCOLE İstanbul Straße STRASSE Café NAÏVE naïve",
    "ΟΔΥΣΣΕΥΣ ΣΑ ΑΣ. ΑΣ\u0301Β Σ",
    "中国人 x中y 한국 한 ¿Qué? «a-b»",
    "hello\u00a0world\u2003the\u3000it\u2028a\u2029b\u0085c\tx\r\ny",
    "he\u0000llo wo\ufffdrld a\u200bb c\u00adx x\u0007x",
    "a" * 100 + " " + "a" * 101 + " " + "aé" * 60,
    "abc cba zzz xq aaab bax",
    "[CLS] hello [SEP] the[MASK]game [mask] [PAD]x[UNK] [SEP",
    "𝒜 ﬁ ℌ Ǆ ǅ ǆ Ω \u212b \u1fef",
    "a\u0315\u0300\u05ae\u0300b the\u0301\u0301",
    "",
    "   \n\t ",
]


def reference_tokenize(vocab, text, lower_case=True):
    """BertTokenizer(vocab_file, do_lower_case=lower_case).tokenize(text), transcribed."""
    specials = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]
    pattern = r"(" + r"|".join(re.escape(s) for s in specials) + r")|" + r"(.+?)"
    if lower_case:
        text = re.sub(pattern, lambda m: m.groups()[0] or m.groups()[1].lower(), text)
    # The trie split: none of the specials is a prefix of another.
    pieces = re.split("(" + "|".join(re.escape(s) for s in specials) + ")", text)
    out = []
    for piece in pieces:
        if piece in specials:
            out.append(piece)
        elif piece:
            for word in basic_tokenize(piece, lower_case):
                out.extend(wordpiece(vocab, word))
    return out


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    return c not in "\t\n\r" and unicodedata.category(c).startswith("C")


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_chinese_char(cp):
    return any(a <= cp <= b for a, b in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                                         (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF),
                                         (0x2F800, 0x2FA1F)])


def basic_tokenize(text, lower_case):
    text = "".join(" " if is_whitespace(c) else c for c in text
                   if ord(c) not in (0, 0xFFFD) and not is_control(c))
    text = "".join(" %s " % c if is_chinese_char(ord(c)) else c for c in text)
    # NFC: a no-op before the NFD below. Cased, transformers' Python tokenizer normalises the text
    # too from 4.3x on; the Rust tokenizer and older ones do not, and neither does this one.
    if lower_case:
        text = unicodedata.normalize("NFC", text)
    split = []
    for token in text.strip().split():
        if lower_case:
            token = token.lower()
            token = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn")
        words = []
        start_new = True
        for c in token:
            if is_punctuation(c):
                words.append([c])
                start_new = True
            else:
                if start_new:
                    words.append([])
                start_new = False
                words[-1].append(c)
        split.extend("".join(w) for w in words)
    return " ".join(split).strip().split()


def wordpiece(vocab, word, max_chars=100):
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            piece = ("##" if start > 0 else "") + word[start:end]
            if piece in vocab:
                found = piece
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def tokenizers(lower_case):
    """transformers' Python BertTokenizer over VOCAB (BertTokenizerLegacy from transformers 5 on, whose
    BertTokenizer is the Rust one, also checked), or [] without transformers."""
    try:
        import transformers
    except ImportError:
        return []
    path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    classes = [getattr(transformers, name) for name in ("BertTokenizerLegacy", "BertTokenizer")
               if hasattr(transformers, name)]
    return [(c.__name__, c(path, do_lower_case=lower_case)) for c in classes]


if __name__ == "__main__":
    print("    // vocabulary:", ", ".join(cpp_string(t) for t in VOCAB))
    for lower_case in (True, False):
        checked = tokenizers(lower_case)
        print("    // %s: the transcribed algorithm%s" % ("uncased" if lower_case else "cased", "".join(
            ", equal to transformers %s's %s" % (__import__("transformers").__version__, name) for name, _ in checked)))
        for case in CASES:
            tokens = reference_tokenize(set(VOCAB), case, lower_case)
            for name, hf in checked:
                # transformers 5's Python tokenizer lowers whole words, so a word-final capital sigma
                # becomes ς; 4.x's Python tokenizer and the Rust one (5's BertTokenizer) lower each
                # character (σ), as the transcription does. Cased, it NFC-normalises the text.
                if name == "BertTokenizerLegacy" and ("\u03a3" in case if lower_case else
                                                      unicodedata.normalize("NFC", case) != case):
                    continue
                assert hf.tokenize(case) == tokens, (name, case, hf.tokenize(case), tokens)
            # The case as a std::string literal ("..."s): it may hold U+0000.
            print("    {%ss,\n     {%s}}," % (cpp_string(case), ", ".join(cpp_string(t) for t in tokens)))
