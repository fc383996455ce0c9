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

from tokenizer_fuzz_strings import rand_text

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
