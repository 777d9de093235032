#!/usr/bin/env python3
"""Writes test/data/sentencepiece/: albert_like.model, a small unigram SentencePiece model trained as
ALBERT's spiece.model was (google-research/albert's README: <pad>=0, <unk>=1, the control symbols
[CLS], [SEP], [MASK] at 2, 3, 4, its user-defined symbols) on sentencepiece/corpus.txt, lower-cased
as ALBERT's tokenizer sees text; and cases.inc, the pieces and ids of test/data/sentencepiece_test.cpp's
texts as HuggingFace's AlbertTokenizer (transformers 4.x, do_lower_case=True, remove_space=True,
keep_accents=False) gives them: its preprocess_text and _tokenize transcribed below over pip's
sentencepiece. Needs `pip install sentencepiece` (the model file is the same for 0.1.97 to 0.2.x):

    python3 test/data/make_sentencepiece_reference.py
"""
import io
import os
import sys
import unicodedata

import sentencepiece as spm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from make_basic_english_cases import cpp_string  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sentencepiece")
SPIECE_UNDERLINE = "\u2581"

CASES = [
    "The old cat sees the ship .",
    "  The   QUIET\tsea @-@ lion\ncrosses the River .  ",
    "The game sold 1,000 copies in 1998, and 2,500 more in 1999,",
    "``Who rules the sea?'' asked the king.",
    "Café NAÏVE Straße İstanbul",
    "The price rose from £3 to €4.50 – in a month (or two).",
    "zebra 中文 quixotic",
    "",
]


def preprocess_text(inputs, lower_case=True):
    """AlbertTokenizer.preprocess_text with remove_space=True, keep_accents=not lower_case."""
    outputs = " ".join(inputs.strip().split())
    outputs = outputs.replace("``", '"').replace("''", '"')
    if lower_case:
        outputs = unicodedata.normalize("NFKD", outputs)
        outputs = "".join([c for c in outputs if not unicodedata.combining(c)])
        outputs = outputs.lower()
    return outputs


def tokenize(sp, text):
    """AlbertTokenizer._tokenize of preprocess_text(text)."""
    pieces = sp.encode(preprocess_text(text), out_type=str)
    new_pieces = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur_pieces = sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
                if len(cur_pieces[0]) == 1:
                    cur_pieces = cur_pieces[1:]
                else:
                    cur_pieces[0] = cur_pieces[0][1:]
            cur_pieces.append(piece[-1])
            new_pieces.extend(cur_pieces)
        else:
            new_pieces.append(piece)
    return new_pieces


def train(model_file):
    """Trains from an iterator into memory: the model records no file name of this checkout."""
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        lines = [preprocess_text(line) for line in f if line.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="unigram", vocab_size=200,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols="[CLS],[SEP],[MASK]",
        user_defined_symbols='(,),",-,.,–,£,€', character_coverage=1.0, num_threads=1,
        shuffle_input_sentence=False, minloglevel=2)
    with open(model_file, "wb") as f:
        f.write(model.getvalue())


def main():
    model_file = os.path.join(HERE, "albert_like.model")
    train(model_file)
    sp = spm.SentencePieceProcessor(model_file=model_file)
    assert [sp.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    out = ["// Written by test/data/make_sentencepiece_reference.py: HuggingFace AlbertTokenizer's pieces and ids",
           "// of each text over albert_like.model (vocabulary %d)." % sp.get_piece_size()]
    for text in CASES:
        pieces = tokenize(sp, text)
        ids = [sp.piece_to_id(p) for p in pieces]
        out.append("{%s,\n {%s},\n {%s}}," % (cpp_string(text), ", ".join(cpp_string(p) for p in pieces),
                                           ", ".join(str(i) for i in ids)))
    with open(os.path.join(HERE, "cases.inc"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
