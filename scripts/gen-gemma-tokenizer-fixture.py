#!/usr/bin/env python3
"""Writes Tests/Fixtures/tokenizer/llamacpp-gemma3.json: what llama.cpp does with Gemma 3's
262,144-token SentencePiece vocabulary, for GemmaTokenizerTests. The vocabulary is only in
the real model (installed by `scripts/setup.sh --gemma`), so the fixture holds llama.cpp's
answers, not the vocabulary.

For each string (300 random ones as in gen-llamacpp-fuzz.py, seed 12345, with Gemma's
special texts mixed in, plus llama.cpp's 46 vocabulary test strings and hand-written ones:
control and user-defined tokens, whitespace runs, HTML tags, byte fallback): the ids
without BOS or special parsing (`plain`), the ids with BOS and special parsing
(`special`), and the concatenated pieces of `special` with control tokens rendered
(`pieces`, hex bytes). Plus llama.cpp's BOS, EOS, EOT and end-of-generation ids, read from
its load log.

It runs llama.cpp's `llama-server` (any build; set LLAMA_SERVER) on the model and asks its
/tokenize endpoint (`add_special`, `parse_special`, `with_pieces`):

    LLAMA_SERVER=/path/to/llama-server python3 scripts/gen-gemma-tokenizer-fixture.py [N]
"""
import json, os, pathlib, random, re, signal, subprocess, sys, tempfile, time, urllib.request

from tokenizer_fuzz_strings import SPECIALS, rand_text

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("LEAP_REF_CACHE", pathlib.Path.home() / ".cache/leap-ref"))
MODEL = CACHE / "models/gemma-3-270m-q4_k_m.gguf"
SERVER = os.environ.get("LLAMA_SERVER", "llama-server")
PORT = int(os.environ.get("PORT", "18734"))

GEMMA_SPECIALS = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]",
                  "<unused0>", "<unused6241>", "<start_of_image>", "<end_of_image>", "</s>", "<b>", "</b>", "<table>",
                  "<td>", "</h1>", "<code>", "\n\n\n", "\t\t", "    ", "<start_of_turn", "end_of_turn>"]
HAND_WRITTEN = [
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nhi<end_of_turn>",
    "<b> </b> <i>x</i>  <b>  </b>",
    "a  b   c    d\t\te\n\n\nf" + " " * 40 + "g" + "\n" * 40 + "h" + "\t" * 40,
    "</s><s><unused99>[multimodal]<mask><pad><unk>",
    "\ue000\U0010fffd\x01\x7f",
    "日本語のテキストと😀🚀👨‍👩‍👧",
    "  leading spaces", "trailing spaces  ", " ", "", "\n", "▁literal▁marks▁",
    "<start_of_turn><start_of_turn>user", "<<start_of_turn>>", "<end_of_turn\n>",
    "<p> </p> a> </b x>  </y >> <</", "→ ← ⟩ ⟨ >\u00a0</",
]


def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def tokenize(text, special):
    return post("/tokenize", {"content": text, "add_special": special, "parse_special": special})["tokens"]


def pieces(text):
    out = b""
    for t in post("/tokenize", {"content": text, "add_special": True, "parse_special": True, "with_pieces": True})["tokens"]:
        p = t["piece"]
        out += p.encode("utf-8") if isinstance(p, str) else bytes(p)
    return out.hex()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rng = random.Random(12345)
    texts = [rand_text(rng, SPECIALS + GEMMA_SPECIALS) for _ in range(n)]
    inp = (ROOT / "Tests/Fixtures/tokenizer/ggml-vocab-llama-spm.gguf.inp").read_text(encoding="utf-8")
    texts += inp.split("\n__ggml_vocab_test__\n")[:-1] + HAND_WRITTEN

    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    server = subprocess.Popen([SERVER, "-m", str(MODEL), "--port", str(PORT), "-c", "512", "-np", "1", "-t", "1", "-v"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:
                if server.poll() is not None:
                    sys.exit(f"llama-server exited; see {log.name}")
                time.sleep(0.5)
        cases = [{"text": t, "plain": tokenize(t, False), "special": tokenize(t, True), "pieces": pieces(t)} for t in texts]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    text = open(log.name, encoding="utf-8", errors="replace").read()
    os.unlink(log.name)

    def ids(label):
        return [int(m) for m in re.findall(rf"print_info: {label} token\s+= (\d+) ", text)]

    result = {"bos": ids("BOS")[0], "eos": ids("EOS")[0], "eot": ids("EOT")[0], "eog": sorted(set(ids("EOG"))),
              "cases": cases}
    out = ROOT / "Tests/Fixtures/tokenizer/llamacpp-gemma3.json"
    out.write_text(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print("wrote", out, len(cases), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
