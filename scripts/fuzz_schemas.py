#!/usr/bin/env python3
"""Differential fuzzing of the schema compiler against python-jsonschema (draft 2020-12).

Writes random small schemas with random instances, labelled valid/invalid by jsonschema (with
format checking), as MaskBench files into OUT_DIR; then run
    swift run -c release SchemaBench OUT_DIR
Any invalidation error (an invalid instance accepted) is a bug. Usage: fuzz_schemas.py OUT_DIR [N] [SEED]
"""
import json, os, random, sys
import jsonschema

R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
KEYS = ["a", "b", "c", "ab", "é"]
STRINGS = ["", "a", "ab", "abc", "é", "aé", "A1", "2024-02-29", "2023-02-29", "1.2.3.4", "x@y.z", "ab\n", "\"q\"", "zzzzzz"]
PATTERNS = ["^a", "b$", "^[a-z]+$", "\\d", "^(ab|c)*$", "é", "^.{2,3}$"]
FORMATS = ["date", "ipv4", "email", "uuid", "date-time"]
NUMS = [0, 1, 2, -1, 3, 0.5, -0.5, 2.5, 10, 1.25]


def rnum():
    return R.choice(NUMS)


DEFS = {}


def schema(depth=0):
    if depth > 0 and R.random() < 0.08:
        name = f"d{len(DEFS)}"
        DEFS[name] = None
        DEFS[name] = schema(depth + 1)
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
            s[c] = R.choice([2, 3]) if c == "multipleOf" else rnum()
        elif k == "arr":
            c = R.choice(["items", "prefixItems", "minItems", "maxItems", "contains", "minContains", "maxContains"])
            if c in ("items", "contains"):
                s[c] = schema(depth + 1)
            elif c == "prefixItems":
                s[c] = [schema(depth + 1) for _ in range(R.randint(1, 2))]
            else:
                s[c] = R.randint(0, 3)
        elif k == "obj":
            c = R.choice(["properties", "required", "additionalProperties", "minProperties", "maxProperties", "propertyNames", "patternProperties"])
            if c == "properties":
                s[c] = {k2: schema(depth + 1) for k2 in R.sample(KEYS, R.randint(1, 3))}
            elif c == "required":
                s[c] = R.sample(KEYS, R.randint(1, 2))
            elif c == "additionalProperties":
                s[c] = schema(depth + 1)
            elif c == "propertyNames":
                s[c] = R.choice([{"maxLength": 1}, {"pattern": "^a"}, {"enum": ["a", "b"]}])
            elif c == "patternProperties":
                s[c] = {R.choice(["^a", "b", "é"]): schema(depth + 1)}
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
            s[c] = [schema(depth + 1) for _ in range(R.randint(1, 3))]
            if c == "allOf" and R.random() < 0.5:
                # object keywords split across allOf branches
                s[c].append({R.choice(["properties", "patternProperties"]): {R.choice(KEYS): schema(depth + 1)},
                             "additionalProperties": R.choice([False, True, {"type": "integer"}])})
        elif k == "not":
            s["not"] = schema(depth + 1)
        elif k == "if":
            s["if"] = schema(depth + 1)
            s["then"] = schema(depth + 1)
            if R.random() < 0.5:
                s["else"] = schema(depth + 1)
        elif k == "dep":
            s["dependentRequired"] = {R.choice(KEYS): R.sample(KEYS, 1)}
    return s


def value(depth=0):
    r = R.random()
    if depth > 2 or r < 0.45:
        return R.choice(STRINGS + NUMS + [None, True, False, 7, -3, 100, 0.125])
    if r < 0.7:
        return [value(depth + 1) for _ in range(R.randint(0, 3))]
    return {k: value(depth + 1) for k in R.sample(KEYS, R.randint(0, 3))}


def guided(s, depth=0):
    """A value shaped after the schema (often valid, sometimes near-valid)."""
    if depth > 3 or not isinstance(s, dict) or R.random() < 0.1:
        return value(depth)
    for c in ("enum", "const"):
        if c in s and R.random() < 0.8:
            return R.choice(s["enum"]) if c == "enum" else s["const"]
    for c in ("anyOf", "oneOf", "allOf"):
        if c in s and R.random() < 0.5:
            return guided(R.choice(s[c]), depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = R.choice(t)
    if t is None:
        t = R.choice(["string", "number", "array", "object"])
    if t == "string":
        return R.choice(STRINGS)
    if t in ("integer", "number"):
        pts = [s[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in s]
        base = R.choice(pts) if pts else R.choice(NUMS)
        x = base + R.choice([0, 0, 1, -1, 0.5, -0.5, 0.25])
        if t == "integer" or R.random() < 0.3:
            x = int(x)
        return x
    if t == "array":
        pre = s.get("prefixItems", [])
        n = R.randint(0, 4)
        return [guided(pre[i] if i < len(pre) else s.get("items", {}), depth + 1) for i in range(n)]
    if t == "object":
        out = {}
        props = s.get("properties", {})
        for k in props:
            if k in s.get("required", []) or R.random() < 0.6:
                out[k] = guided(props[k], depth + 1)
        for k in s.get("required", []):
            if k not in out:
                out[k] = value(depth + 1)
        if R.random() < 0.3:
            out[R.choice(KEYS + ["zz"])] = value(depth + 1)
        return out
    return value(depth)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    os.makedirs(out, exist_ok=True)
    V = jsonschema.Draft202012Validator
    written = 0
    while written < n:
        DEFS.clear()
        s = schema()
        if not isinstance(s, dict):
            continue
        if DEFS:
            s["$defs"] = dict(DEFS)
        s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        try:
            v = V(s, format_checker=V.FORMAT_CHECKER)
            tests = []
            for i in range(40):
                d = guided(s) if i % 2 else value()
                tests.append({"data": d, "valid": v.is_valid(d)})
        except Exception:
            continue
        with open(os.path.join(out, f"fuzz_{written:05d}.json"), "w") as f:
            json.dump({"schema": s, "tests": tests}, f, ensure_ascii=False)
        written += 1


main()
