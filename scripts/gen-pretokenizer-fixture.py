#!/usr/bin/env python3
"""Writes Tests/Fixtures/tokenizer/pretokenizer-pieces.json: the pre-token pieces of the
vocabulary test strings (plus a few extra strings) for each of leap-ref's pre-tokenizer
families, computed with Python's `regex` module by applying llama.cpp's regex lists the
way llama.cpp's unicode_regex_split does (each regex splits the pieces of the previous
one; the text between matches is a piece too). This is an independent check of the
hand-written scanners in Sources/Tokenizers/PreTokenizer.swift.

    pip install regex && python3 scripts/gen-pretokenizer-fixture.py
"""
import json
import pathlib

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

FAMILIES = {
    "gpt2": [GPT2],
    "llama3": [LLAMA3],
    "qwen2": [QWEN2],
    "smollm": [r"\p{N}", GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
}

EXTRA = [
    "3.14159 costs $1,234,567.89 (net) <= 10^6 | ~x + y = z",
    "line one\r\n\r\n  line two\t\ttabbed\u00a0nbsp\u3000ideographic",
    "I'M SURE THEY'RE HERE, AREN'T THEY? 'TIS",
    "emoji 🚀🔥 and ZWJ 👨\u200d👩\u200d👧 e\u0301 ﬁ ① ½ ٣ ४",
    "trailing spaces   ",
    "   leading spaces",
    "digits 1234567890 and ４５６ fullwidth",
]


def split(text, patterns):
    pieces = [text]
    for pattern in patterns:
        rx = regex.compile(pattern)
        out = []
        for piece in pieces:
            start = 0
            for m in rx.finditer(piece):
                if m.start() > start:
                    out.append(piece[start:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                start = m.end()
            if start < len(piece):
                out.append(piece[start:])
        pieces = out
    return pieces


root = pathlib.Path(__file__).resolve().parent.parent / "Tests" / "Fixtures" / "tokenizer"
inp = (root / "ggml-vocab-gpt-2.gguf.inp").read_text(encoding="utf-8")
strings = inp.split("\n__ggml_vocab_test__\n")[:-1] + EXTRA
result = [{"text": s, "pieces": {name: split(s, pats) for name, pats in FAMILIES.items()}} for s in strings]
(root / "pretokenizer-pieces.json").write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
print(f"wrote {len(result)} strings")
