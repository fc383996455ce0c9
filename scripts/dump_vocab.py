#!/usr/bin/env python3
"""Dump a GGUF vocabulary (GPT-2 byte-level BPE) as token bytes, one token per line.

Usage: python3 scripts/dump_vocab.py VOCAB.gguf OUT.txt   (needs `pip install gguf==0.19.0`)

Each line is `<id> <kind> <hex bytes>` where kind is `n` (normal) or `s` (special/control:
never matches grammar bytes). GPT-2 token strings map bytes to printable characters; the
mapping is inverted here so the file holds the real bytes.
"""
import sys
from gguf import GGUFReader


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    reader = GGUFReader(sys.argv[1])
    f = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    types = [int(reader.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in reader.fields["tokenizer.ggml.token_type"].data]
    dec = byte_decoder()
    with open(sys.argv[2], "w") as out:
        for i, t in enumerate(tokens):
            special = types[i] in (3, 4)  # CONTROL, USER_DEFINED
            if special:
                raw = t.encode("utf-8")
            else:
                raw = bytes(dec[c] for c in t)
            out.write(f"{i} {'s' if special else 'n'} {raw.hex()}\n")


if __name__ == "__main__":
    main()
