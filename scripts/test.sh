#!/usr/bin/env bash
# Sets up what the tests need (scripts/setup.sh: OpenBLAS, the SmolLM2 model) and runs the
# whole test suite. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
swift build --build-tests
swift test --skip-build "$@"
