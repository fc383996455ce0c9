#!/usr/bin/env python3
"""llguidance's masks on a MaskBench directory, beside `leap-ref schema-bench` (issue 45, item 3).

    scripts/bench_llguidance.py DIR [--vocab FILE] [--json OUT] [--limit N] [--filter TEXT] [-v]
                                 [--slices general|json|none] [--coerce-one-of] [--venv DIR]

The same protocol, vocabulary and token sequences as
`leap-ref schema-bench DIR --vocab Tests/GrammarTests/Fixtures/smollm2-vocab.txt`
(Sources/Grammar/MaskBench.swift, Sources/leap-ref/SchemaBenchCommand.swift):

- files: DIR's *.json whose name contains --filter, sorted by name, the first --limit of them;
  a file is {"schema", "tests": [{"data", "valid"}]} (tests without "data" or a boolean
  "valid" are skipped; a file without "schema" or a "tests" array is a compile error);
- vocabulary: the dump of scripts/dump_vocab.py (`<id> <n|s> <hex bytes>`; `s` = special);
- tokenization: greedy longest match over the non-special, non-empty tokens, as
  `GreedyTokenizer` (Sources/Grammar/VocabularyDump.swift) does: at each position the longest
  token that is a prefix of the rest; a byte no token starts with ends the sequence there;
- each instance is serialized as `json.dumps(data, ensure_ascii=False)`;
- compile (timed): `LLMatcher.grammar_from_json_schema` plus the `LLMatcher` constructor; a
  schema it refuses (an exception, or the matcher in its error state) is a compile error;
- per instance, from a copy of the compiled matcher: for each token compute the mask (timed:
  only `LLMatcher.unsafe_compute_mask_ptr` into a preallocated bitmask), check the token is
  allowed, consume it. A valid instance must be allowed to the end and the matcher must then be
  accepting; an invalid one must be refused at some token or be incomplete at the end.
  A token the mask allowed that `consume_token` then refuses is a mask inconsistency.

llguidance's JSON options are its defaults, as MaskBench runs it: whitespace flexible (any JSON
whitespace between tokens, so json.dumps' ", " and ": " separators are accepted, as leap-ref's
grammars allow), `oneOf` only where provably `anyOf` (`--coerce-one-of` to treat every `oneOf` as
`anyOf`), unsupported keywords and formats refused (not lenient), properties in schema order,
default parser limits. LLTokenizer uses llguidance's general slices unless --slices says.

Single-threaded (LLMatcher computes a mask on the calling thread), timed with
time.perf_counter_ns around the one call, so each time includes Python's call overhead (printed).

llguidance is not a dependency of leap-ref or of any test: this script installs
llguidance==1.9.1 into a venv outside the repository (default ~/.cache/leap-ref/llguidance-venv,
or --venv / $LLGUIDANCE_VENV) and re-runs itself there.
"""
import argparse
import json
import os
import subprocess
import sys
import time

LLGUIDANCE_VERSION = "1.9.1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VOCAB = os.path.join(REPO, "Tests", "GrammarTests", "Fixtures", "smollm2-vocab.txt")
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "leap-ref", "llguidance-venv")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", help="directory of MaskBench *.json files")
    p.add_argument("--vocab", default=DEFAULT_VOCAB, help="vocabulary dump (scripts/dump_vocab.py); default: the SmolLM2 fixture")
    p.add_argument("--json", help="write per-file results and the summary as JSON (schema-bench --json's shape)")
    p.add_argument("--limit", type=int, help="only the first N files (sorted by name)")
    p.add_argument("--filter", help="only the files whose name contains this text")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per file")
    p.add_argument("--slices", choices=["general", "json", "none"], default="general",
                   help="LLTokenizer slices (mask optimization): general_slices() (llguidance's default), json_slices(), or none")
    p.add_argument("--coerce-one-of", action="store_true", help="llguidance option: treat every oneOf as anyOf")
    p.add_argument("--eos", type=int, default=2, help="EOS token id given to llguidance (default 2, SmolLM2-Instruct's <|im_end|>)")
    p.add_argument("--venv", default=os.environ.get("LLGUIDANCE_VENV", DEFAULT_VENV), help="venv holding llguidance")
    return p.parse_args()


# --- the venv -------------------------------------------------------------------------------

def installed_version():
    try:
        from importlib.metadata import version
        return version("llguidance")
    except Exception:
        return None


def ensure_llguidance(venv):
    """Returns when `import llguidance` gives 1.9.1 here; otherwise re-runs this script in `venv`."""
    if installed_version() == LLGUIDANCE_VERSION:
        return
    if os.environ.get("BENCH_LLGUIDANCE_REEXEC"):
        sys.exit(f"llguidance {LLGUIDANCE_VERSION} is not importable in {sys.executable} (found {installed_version()})")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"creating venv {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    probe = subprocess.run([py, "-c", "from importlib.metadata import version; print(version('llguidance'))"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != LLGUIDANCE_VERSION:
        print(f"installing llguidance=={LLGUIDANCE_VERSION} into {venv}", file=sys.stderr)
        subprocess.run([py, "-m", "pip", "install", "--quiet", f"llguidance=={LLGUIDANCE_VERSION}"], check=True)
    env = dict(os.environ, BENCH_LLGUIDANCE_REEXEC="1")
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# --- vocabulary and tokenization ------------------------------------------------------------

def read_vocab(path):
    """(tokens as bytes, special ids) from a scripts/dump_vocab.py dump, checked as parseDump does."""
    tokens, special = [], []
    with open(path, "rb") as f:
        for line in f.read().decode("utf-8").split("\n"):
            if not line:
                continue
            parts = line.split(" ")
            if len(parts) != 3 or int(parts[0]) != len(tokens):
                sys.exit(f"cannot read the vocabulary dump '{path}' (line {len(tokens) + 1})")
            if parts[1] == "s":
                special.append(len(tokens))
            tokens.append(bytes.fromhex(parts[2]))
    return tokens, special


class GreedyTokenizer:
    """GreedyTokenizer of Sources/Grammar/VocabularyDump.swift: longest match over the trie of the
    non-special, non-empty tokens (the prefix set below is that trie's node set; no two tokens
    of the SmolLM2 dump share bytes, and on a tie the trie keeps the lowest id, as here)."""

    def __init__(self, tokens, special):
        sp = set(special)
        self.ids = {}
        self.prefixes = set()
        for i, t in enumerate(tokens):
            if i in sp or not t:
                continue
            self.ids.setdefault(t, i)
            for k in range(1, len(t) + 1):
                self.prefixes.add(t[:k])

    def __call__(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        out, i, n = [], 0, len(data)
        ids, prefixes = self.ids, self.prefixes
        while i < n:
            best, best_len, j = -1, 0, i + 1
            while j <= n and data[i:j] in prefixes:
                t = ids.get(data[i:j])
                if t is not None:
                    best, best_len = t, j - i
                j += 1
            if best < 0:
                return out  # a byte no token starts with (cannot happen with byte-level vocabularies)
            out.append(best)
            i += best_len
        return out


class VocabForLLG:
    """What llguidance.TokenizerWrapper reads: tokens, eos/bos ids, special ids, and a tokenize call."""

    def __init__(self, tokens, special, eos, tokenize):
        self.tokens = tokens
        self.special_token_ids = special
        self.eos_token_id = eos
        self.bos_token_id = None
        self._tokenize = tokenize

    def __call__(self, data):
        return self._tokenize(data)


# --- the protocol ---------------------------------------------------------------------------

class Result:
    def __init__(self, id):
        self.id = id
        self.compile_error = None
        self.validation_error = False
        self.invalidation_error = False
        self.inconsistencies = 0
        self.matcher_errors = 0
        self.wrong_tests = []
        self.first_refusal = None
        self.first_matcher_error = None
        self.compile_us = 0.0
        self.tokens = 0
        self.mask_us = []

    @property
    def passed(self):
        return self.compile_error is None and not self.validation_error and not self.invalidation_error

    def line(self):
        if self.passed:
            status = "ok"
        elif self.compile_error is not None:
            status = "compile: " + self.compile_error
        else:
            status = "INVALIDATION" if self.invalidation_error else "validation"
        refusal = f" refused after: …{self.first_refusal[-160:]}" if self.first_refusal else ""
        err = f" matcher error: {self.first_matcher_error[:200]}" if self.first_matcher_error else ""
        return (f"{self.id}: {status} compile {int(self.compile_us)}us tokens {self.tokens} "
                f"maxmask {int(max(self.mask_us, default=0))}us wrong tests {self.wrong_tests}{refusal}{err}")

    def json(self):
        return {
            "id": self.id,
            "compile_error": self.compile_error if self.compile_error is not None else False,
            "validation_error": self.validation_error,
            "invalidation_error": self.invalidation_error,
            "compile_us": self.compile_us,
            "oneofs_as_anyof": 0,
            "num_tokens": self.tokens,
            "all_mask_us": [round(t * 100) / 100 for t in self.mask_us],
        }


class Bench:
    def __init__(self, llg, tokenizer, vocab_tokens, tokenize, coerce_one_of, eos):
        import ctypes
        self.llg = llg
        self.tokenizer = tokenizer
        self.vocab_tokens = vocab_tokens
        self.tokenize = tokenize
        self.defaults = {"whitespace_flexible": True}
        if coerce_one_of:
            self.defaults["coerce_one_of"] = True
        self.mask_bytes = (tokenizer.vocab_size + 31) // 32 * 4
        self.mask = bytearray(self.mask_bytes)
        self.mask_ptr = ctypes.addressof((ctypes.c_char * self.mask_bytes).from_buffer(self.mask))

    def measure(self, id, text):
        r = Result(id)
        try:
            f = json.loads(text)
            schema, tests = f["schema"], f["tests"]
            if not isinstance(tests, list):
                raise ValueError
        except Exception:
            r.compile_error = "bad file: not in the MaskBench format"
            return r
        tests = [(t["data"], t["valid"]) for t in tests
                 if isinstance(t, dict) and "data" in t and isinstance(t.get("valid"), bool)]
        LLMatcher = self.llg.LLMatcher
        t0 = time.perf_counter_ns()
        try:
            grammar = LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=self.defaults)
            matcher0 = LLMatcher(self.tokenizer, grammar, log_level=0)
            error = matcher0.get_error() if matcher0.is_error() else None
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        r.compile_us = (time.perf_counter_ns() - t0) / 1000
        if error is not None:
            r.compile_error = " ".join(error.split())[:300]
            return r
        for index, (data, valid) in enumerate(tests):
            accepted = self.run(json.dumps(data, ensure_ascii=False), matcher0.deep_copy(), r, report_refusal=valid)
            if accepted != valid:
                if valid:
                    r.validation_error = True
                else:
                    r.invalidation_error = True
                r.wrong_tests.append(index)
        return r

    def run(self, text, m, r, report_refusal):
        mask, ptr, size = self.mask, self.mask_ptr, self.mask_bytes
        clock = time.perf_counter_ns
        times = r.mask_us
        consumed = b""
        for t in self.tokenize(text.encode("utf-8", "surrogatepass")):
            r.tokens += 1
            t0 = clock()
            m.unsafe_compute_mask_ptr(ptr, size)
            t1 = clock()
            times.append((t1 - t0) / 1000)
            if m.is_error():
                r.matcher_errors += 1
                if r.first_matcher_error is None:
                    r.first_matcher_error = m.get_error()
                return False
            if not (mask[t >> 3] >> (t & 7)) & 1:
                if report_refusal and r.first_refusal is None:
                    r.first_refusal = (consumed.decode("utf-8", "replace") + " ⟨"
                                       + self.vocab_tokens[t].decode("utf-8", "replace") + "⟩")
                return False
            consumed += self.vocab_tokens[t]
            if not m.consume_token(t):
                r.inconsistencies += 1
                return False
        return m.is_accepting()


class Summary:
    def __init__(self, results):
        self.files = len(results)
        self.passed = sum(r.passed for r in results)
        self.compile_errors = sum(r.compile_error is not None for r in results)
        self.validation_errors = sum(r.validation_error for r in results)
        self.invalidation_errors = sum(r.invalidation_error for r in results)
        self.inconsistencies = sum(r.inconsistencies for r in results)
        self.matcher_errors = sum(r.matcher_errors for r in results)
        compiled = sorted(r.compile_us for r in results if r.compile_error is None)
        masks = sorted(t for r in results for t in r.mask_us)
        self.tokens = len(masks)
        self.compile = self.stats(compiled)
        self.mask = self.stats(masks)

    @staticmethod
    def stats(xs):
        # as SchemaBenchSummary: p50 = xs[n/2], p99 = xs[min(n-1, Int(n*0.99))]
        if not xs:
            return (0.0, 0.0, 0.0, 0.0)
        n = len(xs)
        return (sum(xs) / n, xs[n // 2], xs[min(n - 1, int(n * 0.99))], xs[-1])

    def json(self):
        c, m = self.compile, self.mask
        return {
            "files": self.files, "passed": self.passed,
            "pass_rate": self.passed / self.files if self.files else 0,
            "compile_errors": self.compile_errors, "validation_errors": self.validation_errors,
            "invalidation_errors": self.invalidation_errors, "mask_inconsistencies": self.inconsistencies,
            "matcher_errors": self.matcher_errors,
            "oneof_as_anyof": 0, "oneof_as_anyof_passed": 0,
            "compile_us_mean": c[0], "compile_us_p50": c[1], "compile_us_p99": c[2], "compile_us_max": c[3],
            "tokens": self.tokens,
            "mask_us_mean": m[0], "mask_us_p50": m[1], "mask_us_p99": m[2], "mask_us_max": m[3],
        }

    def text(self, coerce_one_of):
        c, m = self.compile, self.mask
        extra = f", MASK INCONSISTENCIES: {self.inconsistencies}" if self.inconsistencies else ""
        if self.matcher_errors:
            extra += f", matcher errors during masks: {self.matcher_errors}"
        pct = self.passed * 100 // self.files if self.files else 0
        oneof = "all (coerce_one_of)" if coerce_one_of else "none (llguidance refuses a oneOf it cannot prove is an anyOf)"
        return "\n".join([
            f"schemas passed: {self.passed} / {self.files} ({pct}%)",
            f"compile errors: {self.compile_errors}, validation errors: {self.validation_errors}, "
            f"invalidation errors: {self.invalidation_errors}{extra}",
            f"overlapping oneOf compiled as anyOf: {oneof}",
            f"compile time: mean {c[0] / 1000:.1f} ms, p50 {c[1] / 1000:.1f} ms, p99 {c[2] / 1000:.1f} ms, max {c[3] / 1000:.1f} ms",
            f"mask time ({self.tokens} tokens): mean {m[0]:.1f} µs, p50 {m[1]:.1f} µs, p99 {m[2]:.1f} µs, max {m[3]:.1f} µs",
        ])


def timer_overhead_us():
    """Median of perf_counter_ns() pairs around an empty body and around a trivial C call."""
    clock = time.perf_counter_ns
    xs = []
    for _ in range(20001):
        t0 = clock()
        t1 = clock()
        xs.append(t1 - t0)
    xs.sort()
    return xs[len(xs) // 2] / 1000


def main():
    args = parse_args()
    ensure_llguidance(args.venv)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    import llguidance as llg

    tokens, special = read_vocab(args.vocab)
    tokenize = GreedyTokenizer(tokens, special)
    slices = {"general": None, "json": llg.LLTokenizer.json_slices(), "none": []}[args.slices]
    t0 = time.perf_counter_ns()
    wrapper = llg.TokenizerWrapper(VocabForLLG(tokens, special, args.eos, tokenize))
    tokenizer = llg.LLTokenizer(wrapper, n_vocab=len(tokens), eos_token=args.eos, slices=slices)
    setup_ms = (time.perf_counter_ns() - t0) / 1e6

    try:
        names = os.listdir(args.directory)
    except OSError:
        sys.exit(f"cannot list directory '{args.directory}'")
    files = sorted(n for n in names if n.endswith(".json") and (args.filter is None or args.filter in n))
    if args.limit is not None:
        files = files[:max(0, args.limit)]
    if not files:
        sys.exit(f"no *.json files in '{args.directory}'")

    options = (f"llguidance {llg.__version__} ({llg.get_version()}), LLMatcher, single thread; "
               f"JSON defaults {{whitespace_flexible: true, coerce_one_of: {str(args.coerce_one_of).lower()}, lenient: false}}, "
               f"separators ',' ':' with flexible whitespace; slices: {args.slices}"
               f"{'' if args.slices != 'general' else ' (llguidance default)'}; default LLParserLimits; "
               f"vocab {os.path.relpath(args.vocab, REPO) if args.vocab.startswith(REPO) else args.vocab}: "
               f"{len(tokens)} tokens, {len(special)} special, eos {args.eos}; "
               f"tokenizer build {setup_ms:.0f} ms; perf_counter_ns pair {timer_overhead_us():.2f} µs")
    print(options)

    bench = Bench(llg, tokenizer, tokens, tokenize, args.coerce_one_of, args.eos)
    results = []
    for name in files:
        try:
            with open(os.path.join(args.directory, name), encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            sys.exit(f"cannot read '{name}'")
        r = bench.measure(name, text)
        if args.verbose or r.invalidation_error or r.inconsistencies or r.matcher_errors:
            print(r.line(), flush=True)
        results.append(r)
    summary = Summary(results)
    print(summary.text(args.coerce_one_of))

    if args.json:
        doc = {"property_order": "schema", "engine": {"name": "llguidance", "version": llg.__version__, "options": options},
               "files": [r.json() for r in results], "summary": summary.json()}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))


if __name__ == "__main__":
    main()
