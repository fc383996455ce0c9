#!/usr/bin/env python3
"""Differential fuzzer of the JSON Schema compiler, matcher and token masks (docs/fuzzing.md).

Generates schemas of three families, round-robin:
  random   small schemas mixing every supported keyword ($defs/$ref, allOf-split objects...);
  hostile  deep nesting, huge enums, wide anyOf of objects, huge counts, nested-quantifier
           patterns, self/mutual $ref cycles in every position, extreme numbers...;
  mutated  MaskBench schemas from --corpus with cycles, wrappers, hostile pieces spliced in.
For each schema it sends instances (guided by the schema, random, and the corpus file's own)
to the Swift worker (Fuzz/SchemaFuzz), which compiles the schema, feeds the instances through
the masks and the matcher, and generates documents by seeded random walks over the masks.
python-jsonschema (the schema's declared draft, format checking) is the independent judge:

  finding  an instance the matcher accepts that jsonschema says is invalid; a generated
           document that is not JSON or is invalid; a mask that disagrees with the matcher;
           a crash of the worker; no answer within --timeout (a hang); a compilation longer
           than the compile-time budget (+ slack); a mask slower than --slow-mask-ms.

Findings are written to --out as JSON files (MaskBench format where that fits). Usage:
  swift build -c release --product SchemaFuzz
  python3 scripts/fuzz_schemas.py --seconds 600 --seed 1 --corpus ../shared/fixtures/maskbench-dev
"""
import argparse, copy, json, os, random, select, signal, subprocess, sys, time
from collections import Counter

import jsonschema

sys.setrecursionlimit(20000)
R = random.Random(1)

# ---------------------------------------------------------------- random (small) schemas

KEYS = ["a", "b", "c", "ab", "é"]
STRINGS = ["", "a", "ab", "abc", "é", "aé", "A1", "2024-02-29", "2023-02-29", "1.2.3.4", "x@y.z", "ab\n", "\"q\"", "zzzzzz"]
PATTERNS = ["^a", "b$", "^[a-z]+$", "\\d", "^(ab|c)*$", "é", "^.{2,3}$"]
FORMATS = ["date", "ipv4", "email", "uuid", "date-time"]
NUMS = [0, 1, 2, -1, 3, 0.5, -0.5, 2.5, 10, 1.25, 12345.0]
DRAFTS = ["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#",
          "http://json-schema.org/draft-04/schema#", None]
DEFS = {}


def small(depth=0):
    if depth > 0 and R.random() < 0.08:
        name = f"d{len(DEFS)}"
        DEFS[name] = None
        DEFS[name] = small(depth + 1)
        return {"$ref": f"#/$defs/{name}"}
    if depth > 2 or R.random() < 0.15:
        return R.choice([True, False, {}, {"type": R.choice(["string", "integer", "number", "boolean", "null"])}])
    s = {}
    t = R.choice(["string", "integer", "number", "array", "object", None, ["string", "null"], ["integer", "string"]])
    if t is not None:
        s["type"] = t
    ts = t if isinstance(t, list) else [t]
    for _ in range(R.randint(0, 3)):
        k = R.choice(["str", "num", "arr", "obj", "enum", "comb", "not", "if", "dep"])
        if k == "str" and (None in ts or "string" in ts):
            c = R.choice(["minLength", "maxLength", "pattern", "format"])
            s[c] = R.randint(0, 3) if "Length" in c else (R.choice(PATTERNS) if c == "pattern" else R.choice(FORMATS))
        elif k == "num":
            c = R.choice(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"])
            s[c] = R.choice([2, 3]) if c == "multipleOf" else R.choice(NUMS)
        elif k == "arr":
            c = R.choice(["items", "prefixItems", "minItems", "maxItems", "contains", "minContains", "maxContains"])
            if c in ("items", "contains"):
                s[c] = small(depth + 1)
            elif c == "prefixItems":
                s[c] = [small(depth + 1) for _ in range(R.randint(1, 2))]
            else:
                s[c] = R.randint(0, 3)
        elif k == "obj":
            c = R.choice(["properties", "required", "additionalProperties", "minProperties", "maxProperties", "propertyNames", "patternProperties"])
            if c == "properties":
                s[c] = {k2: small(depth + 1) for k2 in R.sample(KEYS, R.randint(1, 3))}
            elif c == "required":
                s[c] = R.sample(KEYS, R.randint(1, 2))
            elif c == "additionalProperties":
                s[c] = small(depth + 1)
            elif c == "propertyNames":
                s[c] = R.choice([{"maxLength": 1}, {"pattern": "^a"}, {"enum": ["a", "b"]}])
            elif c == "patternProperties":
                s[c] = {R.choice(["^a", "b", "é"]): small(depth + 1)}
            else:
                s[c] = R.randint(0, 3)
        elif k == "enum":
            vals = [R.choice(STRINGS + NUMS + [None, True, [1], {"a": 1}]) for _ in range(R.randint(1, 3))]
            if R.random() < 0.5:
                s["enum"] = vals
            else:
                s["const"] = vals[0]
        elif k == "comb":
            c = R.choice(["anyOf", "oneOf", "allOf", "allOf"])
            s[c] = [small(depth + 1) for _ in range(R.randint(1, 3))]
            if c == "allOf" and R.random() < 0.5:
                # object keywords split across allOf branches
                s[c].append({R.choice(["properties", "patternProperties"]): {R.choice(KEYS): small(depth + 1)},
                             "additionalProperties": R.choice([False, True, {"type": "integer"}])})
        elif k == "not":
            s["not"] = small(depth + 1)
        elif k == "if":
            s["if"] = small(depth + 1)
            s["then"] = small(depth + 1)
            if R.random() < 0.5:
                s["else"] = small(depth + 1)
        elif k == "dep":
            s["dependentRequired"] = {R.choice(KEYS): R.sample(KEYS, 1)}
    return s


def random_schema():
    DEFS.clear()
    s = small()
    if not isinstance(s, dict):
        s = {"allOf": [s]}
    if DEFS:
        s["$defs"] = dict(DEFS)
    draft = R.choice(DRAFTS)
    if draft:
        s["$schema"] = draft
        if "draft-04" in draft or "draft-07" in draft:
            s["definitions"] = s.pop("$defs", {})
            s = json.loads(json.dumps(s).replace("#/$defs/", "#/definitions/"))
    return s

# ---------------------------------------------------------------- hostile schemas

WRAPS = [
    lambda x: {"type": "object", "properties": {"a": x}},
    lambda x: {"type": "array", "items": x},
    lambda x: {"anyOf": [x, {"type": "null"}]},
    lambda x: {"oneOf": [x, {"type": "null"}]},
    lambda x: {"allOf": [x]},
    lambda x: {"not": x},
    lambda x: {"if": x, "then": {"minProperties": 1}},
    lambda x: {"prefixItems": [x], "items": False},
    lambda x: {"additionalProperties": x},
    lambda x: {"patternProperties": {"^p": x}},
    lambda x: {"contains": x},
    lambda x: {"propertyNames": x},
    lambda x: {"dependentSchemas": {"a": x}},
]
POSITIONS = [
    lambda r: {"allOf": [r]}, lambda r: {"anyOf": [r, {"type": "string"}]}, lambda r: {"oneOf": [r, {"type": "integer"}]},
    lambda r: {"not": r}, lambda r: {"type": "array", "items": r}, lambda r: {"type": "object", "additionalProperties": r},
    lambda r: {"prefixItems": [r]}, lambda r: {"patternProperties": {"^x": r}}, lambda r: {"properties": {"x": r}},
    lambda r: {"if": r, "then": {"type": "string"}}, lambda r: {"if": {"type": "object"}, "then": r, "else": r},
    lambda r: {"contains": r}, lambda r: {"propertyNames": r}, lambda r: {"dependentSchemas": {"x": r}}, lambda r: r,
]
NESTED_PATTERNS = [
    "^(a{%d}){%d}$", "(a|b)*c{%d}", "[ab]*a[ab]{%d}$", "^((a+)+)+b$", "(.*a){%d}", "^\\d{%d,%d}$", "^(?:x|y|z{1,%d})*$",
    "^(%s)$", "^[\\u0100-\\uffff]{%d}$", "(((((((((((((((((((((a)))))))))))))))))))))*", "a**", "((", "[z-a]", "(?=a)b", "\\1(a)",
]


def pattern():
    p = R.choice(NESTED_PATTERNS)
    n = p.count("%d") + p.count("%s")
    args = []
    for c in range(n):
        if "%s" in p:
            args.append("|".join(f"w{i}" for i in range(R.choice([10, 1000, 5000]))))
        else:
            args.append(R.choice([2, 20, 200, 2000, 20000, 200000]))
    try:
        return p % tuple(args)
    except TypeError:
        return p


def extreme():
    return R.choice([0, -1, 1, 2**31 - 1, 2**53 + 1, 2**63 - 1, 2**63, -2**63, 2**64, 10**30, 1e308, -1e308, 1e-300, 0.1, 1e-7,
                     123456789.123456789, 1e20, 1.5, -0.0])


LAST_HOSTILE = [""]


def hostile():
    kind = R.choice(["deep", "enum", "wide", "product", "counts", "pattern", "cycle", "props", "numbers", "strings",
                     "ids", "conditionals", "names"])
    LAST_HOSTILE[0] = kind
    if kind == "deep":
        s = R.choice([{}, {"type": "string"}, True])
        for _ in range(R.choice([20, 60, 130, 250, 400, 700])):
            s = R.choice(WRAPS)(s)
        return s
    if kind == "enum":
        n = R.choice([100, 10_000, 10_001, 50_000, 200_000])
        vals = [R.choice([lambda i: f"v{i}", lambda i: i, lambda i: i + 0.5, lambda i: [i], lambda i: {"k": i}])(i) for i in range(n)]
        s = {"enum": vals}
        if R.random() < 0.5:
            s.update(R.choice([{"type": "string", "minLength": 3}, {"type": "integer"}, {"type": "object", "required": ["k"]},
                               {"not": {"const": "v1"}}, {"maxLength": 4}]))
        return s
    if kind == "wide":
        n = R.choice([50, 500, 3000])
        return {"anyOf": [{"type": "object", "properties": {"t": {"const": f"k{i}"}, f"p{i}": {"type": "integer"}},
                           "required": ["t"] if R.random() < 0.5 else []} for i in range(n)]}
    if kind == "product":
        k, m = R.choice([(6, 4), (12, 2), (4, 10), (20, 2)])
        return {"type": "object", "allOf": [{R.choice(["anyOf", "oneOf"]): [{"required": [f"a{i}_{j}"]} for j in range(m)]}
                                            for i in range(k)]}
    if kind == "counts":
        key = R.choice(["minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength", "minContains", "maxContains"])
        s = {key: R.choice([1000, 10_000, 10_001, 100_000, 2**31 - 1, 2**63 - 1])}
        if "Contains" in key:
            s["contains"] = {"type": "integer"}
        if R.random() < 0.5:
            s["prefixItems"] = [{"type": "integer"}] * R.choice([1, 100])
        return s
    if kind == "pattern":
        return {"type": "string", "pattern": pattern()} if R.random() < 0.7 else {"patternProperties": {pattern(): {}, pattern(): {}}}
    if kind == "cycle":
        n = R.randint(1, 4)
        defs = {}
        for i in range(n):
            target = {"$ref": f"#/$defs/d{R.randrange(n)}"} if R.random() < 0.8 else {"$ref": "#"}
            defs[f"d{i}"] = R.choice(POSITIONS)(target)
        return {"$defs": defs, "$ref": "#/$defs/d0"} if R.random() < 0.5 else dict(R.choice(POSITIONS)({"$ref": "#/$defs/d0"}), **{"$defs": defs})
    if kind == "props":
        n = R.choice([200, 2000, 20_000])
        props = {f"p{i}": {"type": R.choice(["string", "integer"])} for i in range(n)}
        s = {"type": "object", "properties": props, "required": [f"p{i}" for i in range(0, n, R.choice([1, 7, n]))]}
        if R.random() < 0.5:
            s[R.choice(["minProperties", "maxProperties"])] = R.choice([2, 100, n])
        if R.random() < 0.3:
            s["not"] = {"additionalProperties": {"type": "string"}}
        return s
    if kind == "numbers":
        s = {"type": R.choice(["number", "integer", ["number", "string"]])}
        for key in R.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"], R.randint(1, 4)):
            s[key] = extreme()
        if R.random() < 0.3:
            s["not"] = {"type": "integer"}
        return s
    if kind == "strings":
        long = "x" * R.choice([1000, 100_000])
        return R.choice([{"const": long}, {"enum": [long, long + "y"]}, {"pattern": "^" + long[:20000] + "$"},
                         {"properties": {long: {"type": "integer"}}, "required": [long]}])
    if kind == "ids":
        return {"$id": "https://example.com/root.json", "$defs": {
            "a": {"$id": "nested/a.json", "$anchor": "A", "$ref": "#/$defs/b", "$defs": {"b": {"type": "integer"}}},
            "c": {"$ref": "nested/a.json#A"}, "d": {"$ref": "#/$defs/~1%25~0"}, "e": {"$ref": "urn:x"}},
            "$ref": R.choice(["#/$defs/a", "#/$defs/c", "#/$defs/d", "#/$defs/e", "nested/a.json", "#A", "#/$defs/zz"])}
    if kind == "conditionals":
        s = {"type": "object"}
        for _ in range(R.choice([5, 20, 60])):
            s = {"if": {"properties": {"k": {"const": R.randint(0, 9)}}}, "then": s, "else": {"required": [f"r{R.randint(0, 9)}"]}}
        return s
    return {"type": "object", "propertyNames": R.choice([{"pattern": pattern()}, {"enum": [f"k{i}" for i in range(5000)]},
                                                         {"maxLength": 2**40}, False, {"not": {"pattern": "^a"}}]),
            "additionalProperties": {"type": "integer"}, "minProperties": R.choice([0, 1, 3])}

# ---------------------------------------------------------------- mutated corpus schemas

SUBSCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]
SUBSCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"]
SUBSCHEMA_ONES = ["additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames", "additionalItems"]


def esc(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def subschemas(s, pointer=""):
    """(container, key, pointer) of every subschema below s."""
    out = []
    if not isinstance(s, dict):
        return out
    for k in SUBSCHEMA_MAPS:
        if isinstance(s.get(k), dict):
            for name, v in s[k].items():
                p = f"{pointer}/{esc(k)}/{esc(name)}"
                out.append((s[k], name, p))
                out += subschemas(v, p)
    for k in SUBSCHEMA_LISTS + ["items"]:
        if isinstance(s.get(k), list):
            for i, v in enumerate(s[k]):
                p = f"{pointer}/{k}/{i}"
                out.append((s[k], i, p))
                out += subschemas(v, p)
    for k in SUBSCHEMA_ONES:
        if k in s and not isinstance(s[k], list):
            p = f"{pointer}/{k}"
            out.append((s, k, p))
            out += subschemas(s[k], p)
    return out


def mutate(schema):
    s = copy.deepcopy(schema)
    if not isinstance(s, dict):
        s = {"allOf": [s]}
    for _ in range(R.randint(1, 4)):
        subs = subschemas(s)
        if not subs:
            s = {"anyOf": [s, hostile()]}
            continue
        container, key, pointer = R.choice(subs)
        op = R.choice(["cycle", "cycle", "wrap", "hostile", "extreme", "delete", "defs"])
        if op == "cycle":
            target = R.choice([p for (_, _, p) in subs] + [""])
            container[key] = R.choice(POSITIONS)({"$ref": "#" + target})
        elif op == "wrap":
            container[key] = R.choice(WRAPS)(container[key])
        elif op == "hostile":
            container[key] = hostile()
        elif op == "extreme" and isinstance(container[key], dict):
            k = R.choice(["minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "multipleOf", "maxProperties"])
            container[key][k] = extreme() if "imum" in k or k == "multipleOf" else R.choice([0, 1, 10_001, 2**63 - 1])
        elif op == "delete" and isinstance(container[key], dict) and container[key]:
            container[key].pop(R.choice(list(container[key])))
        else:
            s.setdefault("$defs", {})["m1"] = {"$ref": "#/$defs/m2"}
            s["$defs"]["m2"] = R.choice(POSITIONS)({"$ref": "#/$defs/m1"})
            container[key] = {"$ref": "#/$defs/m1"}
    return s

# ---------------------------------------------------------------- instances


def value(depth=0):
    r = R.random()
    if depth > 2 or r < 0.45:
        return R.choice(STRINGS + NUMS + [None, True, False, 7, -3, 100, 0.125, 2**70, "k0", "v1"])
    if r < 0.7:
        return [value(depth + 1) for _ in range(R.randint(0, 3))]
    return {k: value(depth + 1) for k in R.sample(KEYS + ["t", "k", "p0", "x"], R.randint(0, 3))}


def guided(s, depth=0):
    """A value shaped after the schema (often valid, sometimes near-valid)."""
    if depth > 4 or not isinstance(s, dict) or R.random() < 0.1:
        return value(depth)
    for c in ("enum", "const"):
        if c in s and R.random() < 0.8:
            return R.choice(s["enum"]) if c == "enum" and s["enum"] else s.get("const")
    for c in ("anyOf", "oneOf", "allOf"):
        if isinstance(s.get(c), list) and s[c] and R.random() < 0.5:
            return guided(R.choice(s[c]), depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = R.choice(t) if t else None
    if t is None:
        t = R.choice(["string", "number", "array", "object"])
    if t == "string":
        return R.choice(STRINGS)
    if t in ("integer", "number"):
        pts = [s[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if isinstance(s.get(k), (int, float))
               and not isinstance(s.get(k), bool) and abs(s[k]) < 1e15]
        x = (R.choice(pts) if pts else R.choice(NUMS)) + R.choice([0, 0, 1, -1, 0.5, -0.5, 0.25])
        if t == "integer" or R.random() < 0.3:
            x = int(x) if R.random() < 0.8 else float(int(x))
        return x
    if t == "array":
        pre = s.get("prefixItems", []) if isinstance(s.get("prefixItems"), list) else []
        items = s.get("items", {})
        return [guided(pre[i] if i < len(pre) else items, depth + 1) for i in range(R.randint(0, 4))]
    if t == "object":
        out = {}
        props = s.get("properties", {}) if isinstance(s.get("properties"), dict) else {}
        req = s.get("required", []) if isinstance(s.get("required"), list) else []
        for k in list(props)[:50]:
            if k in req or R.random() < 0.6:
                out[k] = guided(props[k], depth + 1)
        for k in req[:50]:
            if isinstance(k, str) and k not in out:
                out[k] = value(depth + 1)
        if R.random() < 0.3:
            out[R.choice(KEYS + ["zz"])] = value(depth + 1)
        return out
    return value(depth)

# ---------------------------------------------------------------- judging


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


signal.signal(signal.SIGALRM, _alarm)


def judge(schema):
    """A function data -> True/False/None (None: jsonschema cannot decide: error or too slow)."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    except Exception:
        return lambda data: None

    def is_valid(data):
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        try:
            return v.is_valid(data)
        except (Timeout, RecursionError, Exception):
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return is_valid


def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys")
    return dict(pairs)

# ---------------------------------------------------------------- worker


class Worker:
    def __init__(self, cmd, log):
        self.cmd, self.log = cmd, log
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.buf = b""

    def restart(self):
        self.p.kill()
        self.p.wait()
        self.start()

    def ask(self, request, timeout):
        """The worker's answer; 'crash' if it died; 'hang' if it did not answer in time."""
        try:
            self.p.stdin.write((json.dumps(request, ensure_ascii=False) + "\n").encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            return "crash"
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "hang"
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return "crash"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

# ---------------------------------------------------------------- main loop


def load_corpus(dirs):
    corpus = []
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f)) as fh:
                    doc = json.load(fh)
                corpus.append((f, doc["schema"], [t["data"] for t in doc.get("tests", [])]))
    return corpus


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz-schemas", help="directory for findings")
    ap.add_argument("--corpus", action="append", help="MaskBench directories to mutate (default: the test fixtures)")
    ap.add_argument("--worker", default=".build/release/SchemaFuzz")
    ap.add_argument("--vocab", default="Tests/GrammarTests/Fixtures/smollm2-vocab.txt")
    ap.add_argument("--timeout", type=float, default=60, help="seconds without an answer that count as a hang")
    ap.add_argument("--budget-ms", type=float, default=2000, help="the compile-time budget (JSONSchemaCompiler.Limits)")
    ap.add_argument("--slack-ms", type=float, default=2000, help="tolerance over the budget (thread start, a loaded machine)")
    ap.add_argument("--slow-mask-ms", type=float, default=2000)
    ap.add_argument("--walks", type=int, default=6)
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per schema")
    ap.add_argument("--dump-requests", metavar="FILE",
                    help="write the requests (JSON lines) instead of running the worker: a run is replayed with "
                         "`SchemaFuzz < FILE` (the worker's caches carry state from request to request)")
    ap.add_argument("--count", type=int, default=0, help="with --dump-requests: how many")
    args = ap.parse_args()
    R.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    corpus = load_corpus(args.corpus or ["Tests/GrammarTests/Fixtures/maskbench-sample", "Tests/GrammarTests/Fixtures/maskbench-regressions"])
    log = open(os.path.join(args.out, "worker-stderr.log"), "ab")
    dump = open(args.dump_requests, "w") if args.dump_requests else None
    worker = None if dump else Worker([args.worker, "--vocab", args.vocab], log)
    stats, errors, findings = Counter(), Counter(), Counter()
    start = last_report = time.monotonic()
    n = 0
    while time.monotonic() - start < args.seconds:
        family = ["random", "hostile", "mutated"][n % 3]
        n += 1
        origin = family
        corpus_data = []
        if family == "random":
            schema = random_schema()
        elif family == "hostile":
            schema = hostile()
            origin = "hostile " + LAST_HOSTILE[0]
        else:
            origin, base, corpus_data = R.choice(corpus)
            schema = mutate(base)
            origin = "mutated " + origin
        try:
            schema_text = json.dumps(schema, ensure_ascii=False, allow_nan=False)
        except (ValueError, RecursionError):
            continue
        if len(schema_text) > 50_000_000:
            continue
        data = [guided(schema) for _ in range(10)] + [value() for _ in range(5)] + R.sample(corpus_data, min(len(corpus_data), 10))
        texts, kept = [], []
        for d in data:
            try:
                texts.append(json.dumps(d, ensure_ascii=False, allow_nan=False))
                kept.append(d)
            except (ValueError, RecursionError):
                pass
        request = {"id": n, "schema": schema_text, "texts": texts, "walks": args.walks, "seed": n}
        if args.verbose:
            print(f"{time.monotonic() - start:7.1f} s  #{n} {origin}: {len(schema_text)} bytes", flush=True)
        stats["schemas"] += 1
        stats["schemas " + family] += 1
        if dump:
            dump.write(json.dumps(request, ensure_ascii=False) + "\n")
            if n >= args.count:
                break
            continue
        answer = worker.ask(request, args.timeout)
        if answer in ("crash", "hang"):
            findings[answer] += 1
            save(args.out, f"{answer}-{n}", {"kind": answer, "origin": origin, "schema": schema_text, "texts": texts})
            worker.restart()
            continue
        if answer.get("compile") != "ok":
            errors[answer.get("kind", "?")] += 1
            if answer.get("compile_ms", 0) > args.budget_ms + args.slack_ms:
                findings["compile over budget"] += 1
                save(args.out, f"slow-compile-{n}", {"kind": "slow compile", "ms": answer["compile_ms"], "schema": schema_text})
            continue
        stats["compiled"] += 1
        if answer["compile_ms"] > args.budget_ms + args.slack_ms:
            findings["compile over budget"] += 1
            save(args.out, f"slow-compile-{n}", {"kind": "slow compile", "ms": answer["compile_ms"], "schema": schema_text})
        if answer.get("max_mask_ms", 0) > args.slow_mask_ms:
            findings["slow mask"] += 1
            save(args.out, f"slow-mask-{n}", {"kind": "slow mask", "ms": answer["max_mask_ms"], "schema": schema_text, "texts": texts})
        for k in ("truncated_masks", "overflows", "dead_ends"):
            stats[k] += answer.get(k, 0)
        if answer.get("inconsistencies"):
            findings["mask inconsistency"] += 1
            save(args.out, f"inconsistency-{n}", {"kind": "mask inconsistency", "detail": answer["inconsistencies"], "schema": schema_text,
                                                 "texts": texts})
        check_answer(args, n, origin, schema, schema_text, kept, answer, stats, findings)
        if time.monotonic() - last_report > 60:
            last_report = time.monotonic()
            report(start, stats, errors, findings)
    if worker:
        report(start, stats, errors, findings)
        worker.p.kill()


def check_answer(args, n, origin, schema, schema_text, data, answer, stats, findings):
    is_valid = judge(schema)
    for d, accepted in zip(data, answer.get("accepted", [])):
        stats["instances"] += 1
        verdict = is_valid(d)
        if verdict is None:
            stats["instances unjudged"] += 1
        elif accepted and not verdict:
            findings["invalid instance accepted"] += 1
            save(args.out, f"invalid-accepted-{n}", {"kind": "invalid accepted", "origin": origin, "schema": schema,
                                                   "tests": [{"data": d, "valid": False}]})
        elif verdict and not accepted:
            stats["valid instances refused"] += 1
        elif accepted:
            stats["valid instances accepted"] += 1
    for doc in answer.get("generated", []):
        stats["generated"] += 1
        try:
            d = json.loads(doc)
        except ValueError:
            findings["generated text is not JSON"] += 1
            save(args.out, f"not-json-{n}", {"kind": "not JSON", "schema": schema_text, "document": doc})
            continue
        try:
            json.loads(doc, object_pairs_hook=no_duplicate_keys)
            duplicates = False
        except ValueError:
            duplicates = True  # JSON allows them; Python keeps the last value
            stats["generated with duplicate keys"] += 1
        verdict = is_valid(d)
        if verdict is None:
            stats["generated unjudged"] += 1
        elif not verdict:
            kind = "generated document invalid" + (" (duplicate keys)" if duplicates else "")
            findings[kind] += 1
            save(args.out, f"invalid-generated-{n}", {"kind": "generated invalid", "origin": origin, "schema": schema,
                                                    "tests": [{"data": d, "valid": False}], "text": doc})
        else:
            stats["generated valid"] += 1


def save(out, name, doc):
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(doc, f, ensure_ascii=False)


def report(start, stats, errors, findings):
    print(f"--- {time.monotonic() - start:.0f} s: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    print("    compile errors: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    print("    FINDINGS: " + (", ".join(f"{k} {v}" for k, v in findings.items()) or "none"), flush=True)


if __name__ == "__main__":
    main()
