#!/usr/bin/env python3
"""Writes Tests/Fixtures/tokenizer/llamacpp-fuzz.json: what llama.cpp itself (through
llama-cpp-python) does with random strings, for each test vocabulary, SmolLM2 and
lfm2-tiny: ids without special tokens, ids with BOS and special parsing, and
llama_detokenize of both (plain, rendered specials, specials removed; hex bytes), plus its
BOS/EOS/EOT ids and end-of-generation set. LlamaCppFuzzTests compares leap-ref with it.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install llama-cpp-python==0.3.36
    /tmp/venv/bin/python scripts/gen-llamacpp-fuzz.py [N]
"""
import ctypes, json, pathlib, random, sys

import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parent.parent

VOCABS = {
    "gpt-2": str(ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-gpt-2.gguf"),
    "llama-bpe": str(ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-llama-bpe.gguf"),
    "qwen2": str(ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-qwen2.gguf"),
    "llama-spm": str(ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-llama-spm.gguf"),
    "phi-3": str(ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-phi-3.gguf"),
    "smollm2": str(pathlib.Path.home() / ".cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    "lfm2-tiny": str(ROOT / "Tests/Fixtures/models/lfm2-tiny.gguf"),
}
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<|eot_id|>", "<|begin_of_text|>",
            "<|user|>", "<|end|>", "[PAD151650]", "<|reserved_special_token_1|>", "<|reserved_special_token_10|>",
            "<|startoftext|>", "<|tool_call_start|>", "<think>", "<reponame>", "<|im_start", "im_end|>"]
WORDS = "the of and to in is you that it he was for on are as with his they I at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part".split()
ALPHA = list("abcXYZ   \t\n\r''sStTdDmMlLrReEvV0123456789.,!?;:-_()[]{}\"#%&*/@\\$+<=>^~|`") + \
    ["é","ß","Ω","中","文","ア","ñ","\u0301","\ufe0f","\u200d","🚀","👨","😁","🏽","٣","४","½","①","Ⅻ","\u00a0","\u3000","\u2028","\u0085",
     "\u0001","\u007f","\u200b","\ue000","’","“","—","…","€","°","™","\u000b","\u000c","ا","ل","ह","ि","한","국","ไ","ท","ย","Ж","ж","ğ","İ","ı","ſ","K","Å"]

def rand_text(rng):
    kind = rng.random()
    if kind < 0.35:
        return "".join(rng.choice(ALPHA) for _ in range(rng.randint(1, 40)))
    if kind < 0.75:
        parts = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.6: w = rng.choice(WORDS); w = w.capitalize() if rng.random() < 0.2 else (w.upper() if rng.random() < 0.05 else w)
            elif r < 0.75: w = str(rng.randint(0, 10**rng.randint(1, 9)))
            elif r < 0.85: w = rng.choice([",", ".", "!", "?", "'s", "'ll", "'RE", "n't", " '", "...", "--", ":", ";", "(", ")", '"'])
            elif r < 0.92: w = rng.choice(SPECIALS)
            else: w = "".join(rng.choice(ALPHA) for _ in range(rng.randint(1, 4)))
            parts.append(w)
            parts.append(rng.choice([" ", " ", " ", "", "  ", "\n", "\n\n", "\t", " \n", "\r\n", "   "]))
        return "".join(parts)
    if kind < 0.9:
        # random scalars from the whole range (Unicode-version differences show up here)
        out = []
        for _ in range(rng.randint(1, 20)):
            while True:
                c = rng.choice([rng.randint(0x20, 0x7F), rng.randint(0xA0, 0x2FFF), rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD), rng.randint(0x10000, 0x1FFFF)])
                if not (0xD800 <= c <= 0xDFFF): break
            out.append(chr(c))
        return "".join(out)
    return rng.choice(SPECIALS) + rng.choice(["", " ", "\n", "  "]) + rng.choice(WORDS) + rng.choice(SPECIALS)

def tokenize(vocab, data, add_special, parse_special):
    n = len(data) + 16
    buf = (llama_cpp.llama_token * n)()
    k = llama_cpp.llama_tokenize(vocab, data, len(data), buf, n, add_special, parse_special)
    if k < 0:
        buf = (llama_cpp.llama_token * (-k))(); k = llama_cpp.llama_tokenize(vocab, data, len(data), buf, -k, add_special, parse_special)
    return list(buf[:k])

def detokenize(vocab, ids, remove_special, unparse_special):
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    n = 64 + 64 * len(ids)
    out = ctypes.create_string_buffer(n)
    k = llama_cpp.llama_detokenize(vocab, arr, len(ids), out, n, remove_special, unparse_special)
    return out.raw[:k]

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
rng = random.Random(12345)
texts = [rand_text(rng) for _ in range(N)]
llama_cpp.llama_backend_init()
result = {}
for name, path in VOCABS.items():
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(model)
    eog = [i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    cases = []
    for t in texts:
        data = t.encode("utf-8")
        plain = tokenize(vocab, data, False, False)
        special = tokenize(vocab, data, True, True)
        cases.append({"text": t, "plain": plain, "special": special,
                      "detok": detokenize(vocab, plain, False, False).hex(),
                      "detok_special": detokenize(vocab, special, False, True).hex(),
                      "detok_remove": detokenize(vocab, special, True, False).hex()})
    result[name] = {"eog": eog, "bos": llama_cpp.llama_vocab_bos(vocab), "eos": llama_cpp.llama_vocab_eos(vocab), "eot": llama_cpp.llama_vocab_eot(vocab), "cases": cases}
    llama_cpp.llama_model_free(model)
    print(name, "done", len(cases), file=sys.stderr)
out = ROOT / "Tests/Fixtures/tokenizer/llamacpp-fuzz.json"
out.write_text(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
print("wrote", out, file=sys.stderr)
