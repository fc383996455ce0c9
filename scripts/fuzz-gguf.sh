#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer (see docs/fuzzing.md).
#   scripts/fuzz-gguf.sh [SECONDS] [extra libFuzzer flags...]
# Seeds the corpus with small valid GGUF files (built by the test suite's writer and the
# committed fixtures), then runs for SECONDS (default 600). Crashes land in fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"; shift || true
scratch=.build-fuzz
swift build -c release --product GGUFFuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DLEAP_FUZZ -Xswiftc -use-ld=lld
bin="$(swift build -c release --product GGUFFuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DLEAP_FUZZ -Xswiftc -use-ld=lld --show-bin-path)/GGUFFuzz"
mkdir -p fuzz-corpus fuzz-artifacts
# Seeds: the headers of the committed fixtures (first 64 KiB, so that mutations reach the
# tensor table quickly) and small complete files.
for f in Tests/Fixtures/models/*.gguf; do head -c 65536 "$f" > "fuzz-corpus/seed-$(basename "$f")"; done
python3 - <<'PY'
import struct
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
def kv_u32(k, v): return s(k) + struct.pack("<II", 4, v)
def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
def kv_arr(k, t, items): return s(k) + struct.pack("<IIQ", 9, t, len(items)) + b"".join(items)
hdr = b"GGUF" + struct.pack("<IQQ", 3, 2, 4)
kvs = kv_str("general.architecture", "llama") + kv_u32("general.alignment", 32) \
    + kv_arr("tokenizer.ggml.tokens", 8, [s("a"), s("b")]) + kv_arr("x", 6, [struct.pack("<f", 1.0)])
ti = s("w") + struct.pack("<IQQIQ", 2, 32, 2, 2, 0) + s("n") + struct.pack("<IQIQ", 1, 4, 0, 64)
body = hdr + kvs + ti
body += b"\0" * (-len(body) % 32) + bytes(range(36)) * 2 + b"\0" * 24 + b"\1" * 16
open("fuzz-corpus/seed-small.gguf", "wb").write(body)
PY
"$bin" fuzz-corpus -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz-artifacts/ -print_final_stats=1 "$@"
