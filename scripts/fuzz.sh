#!/usr/bin/env bash
# Fuzzes a reader of untrusted input with libFuzzer and AddressSanitizer (docs/fuzzing.md).
#   scripts/fuzz.sh gguf|media [SECONDS] [extra libFuzzer flags...]
# gguf: the GGUF reader (Fuzz/GGUFFuzz). media: the PNG, JPEG and WAV decoders and what
# follows them, LFM2-VL's image preprocessing and the log-mel spectrogram (Fuzz/MediaFuzz).
# Seeds the corpus fuzz-corpus/TARGET/ from the committed fixtures, then runs for SECONDS
# (default 600). Crashes, leaks and timeouts land in fuzz-artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: scripts/fuzz.sh gguf|media [SECONDS] [libFuzzer flags...]}"; shift
seconds="${1:-600}"; shift || true
case "$target" in
    gguf) product=GGUFFuzz; max_len=65536 ;;
    media) product=MediaFuzz; max_len=131072 ;;
    *) echo "unknown fuzz target '$target': gguf or media" >&2; exit 2 ;;
esac
scratch=.build-fuzz
flags=(-c release --product "$product" --scratch-path "$scratch"
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DLEAP_FUZZ -Xswiftc -use-ld=lld)
swift build "${flags[@]}"
bin="$(swift build "${flags[@]}" --show-bin-path)/$product"
corpus="fuzz-corpus/$target" artifacts="fuzz-artifacts/$target"
mkdir -p "$corpus" "$artifacts"
if [ "$target" = gguf ]; then
    # Seeds: the headers of the committed fixtures (first 64 KiB, so that mutations reach
    # the tensor table quickly) and a small complete file.
    for f in Tests/Fixtures/models/*.gguf; do head -c 65536 "$f" > "$corpus/seed-$(basename "$f")"; done
    python3 - "$corpus" <<'PY'
import struct, sys
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
open(sys.argv[1] + "/seed-small.gguf", "wb").write(body)
PY
else
    # Seeds: every committed image variant and clip that fits the length limit (each PNG
    # colour type, bit depth and interlacing; baseline, progressive, restart and CMYK
    # JPEGs; 16-bit and float WAVs at 16 and 22.05 kHz).
    for f in Tests/Fixtures/images/variants/*.png Tests/Fixtures/images/variants/*.jpg Tests/Fixtures/images/*.png \
        Tests/Fixtures/images/*.jpg Tests/Fixtures/audio/*.wav; do
        if [ -f "$f" ] && [ "$(stat -c %s "$f")" -le "$max_len" ]; then cp "$f" "$corpus/seed-$(basename "$f")"; fi
    done
fi
"$bin" "$corpus" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@"
