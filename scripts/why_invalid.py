#!/usr/bin/env python3
"""Print python-jsonschema's verdict and errors for chosen tests of a MaskBench file.
Usage: why_invalid.py FILE.json IDX [IDX...]"""
import json, sys, jsonschema
d = json.load(open(sys.argv[1]))
V = jsonschema.validators.validator_for(d["schema"])
v = V(d["schema"], format_checker=V.FORMAT_CHECKER)
for i in map(int, sys.argv[2:]):
    t = d["tests"][i]
    print(f"--- test {i} labeled valid={t['valid']}: {json.dumps(t['data'], ensure_ascii=False)[:600]}")
    for e in v.iter_errors(t["data"]):
        print("   error:", e.validator, list(e.absolute_path), str(e.message)[:300])
