#!/usr/bin/env bash
# Measures leap-ref's speed on the models of docs/performance.md, in llama-bench's layout:
# SmolLM2-135M-Instruct as Q4_0, Q8_0, Q4_1 (shipped), Q4_K_M and Q5_K_M, Gemma 3 270M
# Q4_K_M, and random-weight models of
# LFM2-350M's exact shape and of an LFM2-MoE of 1.2B weights (32 experts, 4 per token;
# `--preset moe-1b`) in Q4_0, and of LFM2-1.2B and LFM2-2.6B (`--preset 1.2b`, `2.6b`) in
# Q4_0 and Q4_K_M (made by scripts/tools/make_lfm2_gguf.py, which needs
# `pip install gguf==0.19.0 numpy`; the Q4_K_M files by `leap-ref quantize --type q4_k_m`
# from an F16 file of the preset, which is deleted after). The LFM2-2.6B files are 1.5 GB
# each and take a few minutes to make; all are made once and reused.
#   scripts/bench-models.sh [extra leap-ref bench flags, e.g. -r 5 -t 1]
# Run it on a quiet machine: every other process competes for the same cores.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${LEAP_REF_CACHE:-$HOME/.cache/leap-ref}"
MODELS="$CACHE/models"
./scripts/setup.sh --gemma
swift build -c release --product leap-ref
./scripts/make-test-models.sh
bin="$(swift build -c release --show-bin-path)/leap-ref"
# make_shape PRESET FILE [QUANT]: a random-weight model of that shape in QUANT (default
# q4_0), made once.
make_shape() {
    [ -f "$2" ] && return
    python3 -c "import gguf" 2>/dev/null || python3 -m pip install --quiet "gguf==0.19.0" numpy
    python3 scripts/tools/make_lfm2_gguf.py --preset "$1" --quant "${3:-q4_0}" \
        --donor "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" -o "$2.part"
    mv "$2.part" "$2"
}
# make_kquant PRESET FILE: that shape in llama-quantize's Q4_K_M mixture, by leap-ref's
# quantizer from an F16 file of the preset (made and deleted here), made once.
make_kquant() {
    [ -f "$2" ] && return
    make_shape "$1" "$2.f16" f16
    "$bin" quantize "$2.f16" "$2.part" --type q4_k_m
    rm -f "$2.f16"
    mv "$2.part" "$2"
}
make_shape 350m "$MODELS/lfm2-350m-shape.Q4_0.gguf"
make_shape moe-1b "$MODELS/lfm2moe-1b-shape.Q4_0.gguf"
for size in 1.2b 2.6b; do
    make_shape "$size" "$MODELS/lfm2-$size-shape.Q4_0.gguf"
    make_kquant "$size" "$MODELS/lfm2-$size-shape.Q4_K_M.gguf"
done
# The K-quant mixtures of SmolLM2, made once from its F32 file by leap-ref's own quantizer
# (byte-identical to llama-quantize's output from that input, docs/kernels.md).
for t in Q4_K_M Q5_K_M; do
    f="$MODELS/SmolLM2-135M-Instruct.$t.gguf"
    [ -f "$f" ] || { "$bin" quantize "$MODELS/SmolLM2-135M-Instruct.F32.gguf" "$f.part" --type "${t,,}" && mv "$f.part" "$f"; }
done
traffic=""
echo "| model | size | params | backend | threads | test | t/s |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: |"
for m in SmolLM2-135M-Instruct.Q4_0.gguf SmolLM2-135M-Instruct.Q8_0.gguf SmolLM2-135M-Instruct.Q4_1.gguf \
    SmolLM2-135M-Instruct.Q4_K_M.gguf SmolLM2-135M-Instruct.Q5_K_M.gguf lfm2-350m-shape.Q4_0.gguf \
    gemma-3-270m-q4_k_m.gguf lfm2moe-1b-shape.Q4_0.gguf lfm2-1.2b-shape.Q4_0.gguf lfm2-1.2b-shape.Q4_K_M.gguf \
    lfm2-2.6b-shape.Q4_0.gguf lfm2-2.6b-shape.Q4_K_M.gguf; do
    out="$("$bin" bench --model "$MODELS/$m" -p 512 -n 128 "$@")"
    grep -E '^\| [a-z]' <<<"$out" | grep -v '^| model'
    traffic+="$m: $(grep '^weights read' <<<"$out" || true)"$'\n'
done
echo
printf '%s' "$traffic"
"$bin" bench --model "$MODELS/SmolLM2-135M-Instruct.Q4_0.gguf" -p 0 -n 1 -r 1 | grep '^kernels:'
echo "(machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
