#!/usr/bin/env bash
# The engine never uses the plain references (Sources/Reference: ReferenceForward and the
# reference media encoders). They are the oracles the tests hold the engine to; an engine
# that ran one, or shared a rule with one, would be checked against itself. Two checks,
# each of which fails with the offenders named:
#   1. the package's dependency graph (`swift package dump-package`, Package.swift as
#      SwiftPM reads it): every target that depends on Reference, directly or through other
#      targets of the package, is a test target;
#   2. no Swift file outside Sources/Reference and Tests imports Reference (an import that
#      SwiftPM could resolve from the build directory without a declared dependency).
# scripts/test.sh runs it; it takes a few seconds (no build).
set -euo pipefail
cd "$(dirname "$0")/.."

swift package dump-package | python3 -c '
import json, sys
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
if "Reference" not in targets:
    sys.exit("check-reference-isolation: Package.swift has no Reference target")

def dependencies(target):
    for d in target.get("dependencies", []):
        for kind in ("byName", "target"):
            if kind in d and d[kind][0] in targets:
                yield d[kind][0]

memo = {}
def reaches_reference(name, path=()):
    if name == "Reference":
        return True
    if name in path:
        return False
    if name not in memo:
        memo[name] = any(reaches_reference(d, path + (name,)) for d in dependencies(targets[name]))
    return memo[name]

bad = sorted(n for n, t in targets.items() if n != "Reference" and t["type"] != "test" and reaches_reference(n))
if bad:
    sys.exit("check-reference-isolation: these non-test targets depend on Reference: " + ", ".join(bad)
             + " (only test targets may; see Package.swift)")
'

imports=$(grep -rnE --include='*.swift' \
    '^[[:space:]]*(@[A-Za-z_]+(\([^)]*\))?[[:space:]]+)*import[[:space:]]+((struct|class|enum|protocol|func|var|let|typealias)[[:space:]]+)?Reference([.[:space:]]|$)' \
    Sources Benchmarks Fuzz | grep -v '^Sources/Reference/' || true)
if [ -n "$imports" ]; then
    echo "check-reference-isolation: only the tests may import Reference:" >&2
    echo "$imports" >&2
    exit 1
fi
