#!/usr/bin/env python3
"""Prints the expected tokens of test/data/basic_english_test.cpp's cases: torchtext's
basic_english tokenizer (torchtext/data/utils.py, _basic_english_normalize), written out here so
that it runs without torch:

    python3 test/data/make_basic_english_cases.py
"""
import re

_patterns = [r"\'", r"\"", r"\.", r"<br \/>", r",", r"\(", r"\)", r"\!", r"\?", r"\;", r"\:", r"\s+"]
_replacements = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]
_patterns_dict = list((re.compile(p), r) for p, r in zip(_patterns, _replacements))


def basic_english_normalize(line):
    line = line.lower()
    for pattern_re, replaced_str in _patterns_dict:
        line = pattern_re.sub(replaced_str, line)
    return line.split()


CASES = [
    " = Valkyria Chronicles III = \n",
    " Senjō no Valkyria 3 : <unk> Chronicles ( Japanese : 戦場のヴァルキュリア3 , lit . Valkyria of the Battlefield 3 ) ,"
    " commonly referred to as Valkyria Chronicles III outside Japan , is a tactical role @-@ playing video game .\n",
    " = = Gameplay = = \n",
    " The game 's battle system , the BliTZ system , is carried over directly from Valkyira Chronicles . \n",
    " It cost $ 1 @,@ 000 @.@ 5 million ; \"it was\" worth it !? Yes:no\n",
    "Don't STOP... \"believing\"<br />Hold<BR />on<\"br />x\n",
    "ÉCOLE Straße İstanbul ΑΘΗΝΑ Москва ǅemal\u00a0tab\tand\u2003em\u3000space\r\n",
    "ΟΔΥΣΣΕΥΣ ΣΑ ΑΣ. ΑΣ\u0301Β ΑΣ's Σ\n",
    "   \n",
    "",
]


def cpp_string(s):
    """A C++ literal of s: printable text as it is (the source is UTF-8), the rest escaped."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = ""
    for c in s:
        if c in escapes:
            out += escapes[c]
        elif c.isprintable() and not c.isspace() or c == " ":
            out += c
        else:
            out += "\\u%04x" % ord(c)
    return '"' + out + '"'


if __name__ == "__main__":
    for case in CASES:
        tokens = basic_english_normalize(case)
        print("    {%s,\n     {%s}}," % (cpp_string(case), ", ".join(cpp_string(t) for t in tokens)))
