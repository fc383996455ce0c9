#!/usr/bin/env python3
"""Regenerates cases.json: small templates rendered by Python's jinja2 the way Hugging
Face's apply_chat_template renders (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, HF's tojson, raise_exception, strftime_now fixed at
2026-01-15 09:30). Needs jinja2 3.1. The Swift tests only read cases.json."""
import json, os
from datetime import datetime
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError

def raise_exception(message):
    raise TemplateError(message)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 15, 9, 30).strftime(fmt)

here = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(here, "snippets.py"), encoding="utf-8").read())  # defines SNIPPETS

out = []
names = set()
for entry in SNIPPETS:
    name, template = entry[0], entry[1]
    context = entry[2] if len(entry) > 2 else {}
    assert name not in names, name
    names.add(name)
    case = {"name": name, "template": template, "context": context}
    try:
        case["expected"] = env.from_string(template).render(**context)
        assert " at 0x" not in case["expected"], name
    except Exception as e:
        case["error"] = f"{type(e).__name__}: {e}"
    out.append(case)

with open(os.path.join(here, "cases.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(out), "cases")
