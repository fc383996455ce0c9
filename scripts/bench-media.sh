#!/usr/bin/env bash
# Media encoders side by side: `leap-ref bench --mmproj` and llama.cpp's llama-mtmd-cli on
# the same mmproj file, input and threads, in alternating rounds (as bench_side_by_side.py
# does for text), so neither always gets the quieter minute.
#
#   LLAMA_MTMD_CLI=.../llama-mtmd-cli scripts/bench-media.sh (image|audio) [-r ROUNDS] [-t THREADS] [--dir DIR]
#
# image: LFM2-VL-450M's vision tower (scripts/tools/make_lfm2_vl_gguf.py --preset 450m) on
#   Tests/Fixtures/images/medium-500x375.jpg (one 512x384 slice, 768 patches, 192 rows);
# audio: LFM2-Audio-1.5B's encoder (make_lfm2_audio_gguf.py --preset lfm2-audio-1.5b) on a
#   10-second 16 kHz clip made here (a seeded sweep plus noise).
# Both with random weights in the real shapes and tensor types; llama-mtmd-cli needs a
# language model of the projector's output width, so one is written too
# (make_lfm2_gguf.py --preset 350m or w2048-timing; its outputs mean nothing). Files go
# to DIR (default ~/.cache/leap-ref/bench-media) and are reused.
#
# Reported: llama-mtmd-cli's "mtmd batch encoding done in N ms" (the encoder only; it runs
# once per process), and leap-ref's encoder median of 3 runs after a warm-up (its
# preprocessing, timed apart, is printed too). Then the median of the rounds of each. For
# the image, also the F32 roof `bench --image` measures in the same process: the encode's
# matrix products timed alone as OpenBLAS sgemms of F32 operands (sgemm_roof_ms), and their
# FLOPs at the fastest shape's rate (peak_ms); peak_ms / encoder ms is the fraction of peak.
# Needs: pip install gguf==0.19.0 numpy; a release build of leap-ref; the SmolLM2 model of
# scripts/setup.sh (the generators copy its tokenizer). Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
KIND="${1:?usage: bench-media.sh (image|audio) [-r R] [-t T] [--dir DIR]}"
shift
R=5 T=2 DIR="${HOME}/.cache/leap-ref/bench-media"
while [ $# -gt 0 ]; do
    case "$1" in
        -r) R="$2"; shift 2 ;;
        -t) T="$2"; shift 2 ;;
        --dir) DIR="$2"; shift 2 ;;
        *) echo "bench-media: unknown argument $1" >&2; exit 2 ;;
    esac
done
MTMD="${LLAMA_MTMD_CLI:?set LLAMA_MTMD_CLI to the llama-mtmd-cli binary of llama.cpp}"
LEAP="${LEAP_REF_BIN:-.build/release/leap-ref}"
[ -x "$LEAP" ] || swift build -c release --product leap-ref
DONOR="${HOME}/.cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$DIR"
case "$KIND" in
    image)
        PROJ="$DIR/mmproj-lfm2-vl-450m-shape.gguf" LM="$DIR/lfm2-350m-shape-q4_0.gguf"
        INPUT="Tests/Fixtures/images/medium-500x375.jpg" FLAG=--image PROMPT="Describe"
        [ -f "$PROJ" ] || python3 scripts/tools/make_lfm2_vl_gguf.py --preset 450m --outdir "$DIR"
        [ -f "$LM" ] || python3 scripts/tools/make_lfm2_gguf.py --preset 350m --quant q4_0 --donor "$DONOR" -o "$LM"
        ;;
    audio)
        PROJ="$DIR/mmproj-lfm2-audio-1.5b-shape.gguf" LM="$DIR/lfm2-w2048-timing-q4_0.gguf"
        INPUT="$DIR/clip-10s-16k.wav" FLAG=--audio PROMPT="Transcribe"
        [ -f "$PROJ" ] || python3 scripts/tools/make_lfm2_audio_gguf.py --preset lfm2-audio-1.5b --outdir "$DIR"
        [ -f "$LM" ] || python3 scripts/tools/make_lfm2_gguf.py --preset w2048-timing --quant q4_0 --donor "$DONOR" -o "$LM"
        [ -f "$INPUT" ] || python3 - "$INPUT" <<'EOF'
import sys, wave
import numpy as np
rng = np.random.default_rng(7)
sr = 16000
t = np.arange(10 * sr) / sr
x = 0.3 * np.sin(2 * np.pi * (200 + 100 * np.sin(2 * np.pi * 0.5 * t)) * t) + 0.05 * rng.standard_normal(t.size)
with wave.open(sys.argv[1], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(sr)
    w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
EOF
        ;;
    *) echo "bench-media: image or audio" >&2; exit 2 ;;
esac
LEAP_CMD=("$LEAP" bench --model "$LM" --mmproj "$PROJ" "$FLAG" "$INPUT" -r 3 -t "$T" --json)
MTMD_CMD=("$MTMD" -m "$LM" --mmproj "$PROJ" "$FLAG" "$INPUT" -p "$PROMPT" -n 1 -t "$T" --temp 0)
echo "leap-ref: ${LEAP_CMD[*]}"
echo "llama.cpp: ${MTMD_CMD[*]}"
leap_ms=() llama_ms=() peak_ms=() roof_ms=()
run_leap() {
    local out ms peak roof
    out=$("${LEAP_CMD[@]}")
    read -r ms peak roof < <(python3 -c 'import json, sys; j = json.loads(sys.argv[1])
print(j["encode_ms"]["median"], j.get("peak_ms", 0), j.get("sgemm_roof_ms", 0))' "$out")
    leap_ms+=("$ms") peak_ms+=("$peak") roof_ms+=("$roof")
    if [ "$KIND" = image ]; then
        echo "round $1 leap-ref encoder ms: $ms (its products as F32 sgemms: $roof ms; at the best shape's rate: $peak ms)"
    else
        echo "round $1 leap-ref encoder ms: $ms"
    fi
}
run_llama() {
    local ms
    ms=$("${MTMD_CMD[@]}" 2>&1 | sed -n 's/.*mtmd batch encoding done in \([0-9]*\) ms.*/\1/p' | head -1)
    [ -n "$ms" ] || { echo "bench-media: llama-mtmd-cli printed no encode time" >&2; exit 1; }
    llama_ms+=("$ms")
    echo "round $1 llama.cpp encoder ms: $ms"
}
for ((i = 1; i <= R; i++)); do
    if ((i % 2)); then run_leap "$i"; run_llama "$i"; else run_llama "$i"; run_leap "$i"; fi
done
python3 - "${leap_ms[*]}" "${llama_ms[*]}" "${peak_ms[*]}" "${roof_ms[*]}" <<'EOF'
import statistics, sys
leap = [float(v) for v in sys.argv[1].split()]
llama = [float(v) for v in sys.argv[2].split()]
peak = [float(v) for v in sys.argv[3].split()]
roof = [float(v) for v in sys.argv[4].split()]
ml, mc = statistics.median(leap), statistics.median(llama)
print(f"| encoder ms (median of {len(leap)} rounds) | leap-ref {ml:.0f} | llama.cpp {mc:.0f} | llama.cpp / leap-ref {mc / ml:.2f}x |")
if min(peak) > 0:
    # Each round's encode against the F32 peak measured in the same process, then the median.
    fractions = [p / e for p, e in zip(peak, leap)]
    print(f"| F32 roof (same rounds) | products as sgemms {statistics.median(roof):.0f} ms "
          f"| at the peak rate {statistics.median(peak):.0f} ms | encoder at {statistics.median(fractions):.1%} of peak |")
EOF
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
