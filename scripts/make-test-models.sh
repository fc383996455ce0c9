#!/usr/bin/env bash
# Derives the re-encoded models the golden tests use with `leap-ref quantize`: SmolLM2's
# Q8_0, Q4_0 and F32 from the shipped Q4_1, and the F32 (stored-weights) forms of the
# lfm2-audio-tiny and lfm2-audio-out-tiny fixtures; checks each against the sha256 of the
# file the golden logits were computed with (for lfm2-audio-out-tiny, whose goldens were
# computed on its Q4_0 values widened to float32, the sha256 of that widening as
# `leap-ref quantize --type f32` writes it). Needs scripts/setup.sh; uses $LEAP_REF_BIN when set,
# else builds leap-ref in release.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${LEAP_REF_CACHE:-$HOME/.cache/leap-ref}"
MODELS="$CACHE/models"
src="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
bin="${LEAP_REF_BIN:-$(swift build -c release --show-bin-path)/leap-ref}"
[ -x "$bin" ] || swift build -c release --product leap-ref
while read -r type name sum source; do
    out="$MODELS/$name"
    in="$src"
    if [ -n "${source:-}" ]; then in="$source"; fi
    if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then continue; fi
    echo "make-test-models: $name (leap-ref quantize --type $type)" >&2
    "$bin" quantize "$in" "$out.part" --type "$type"
    if ! echo "$sum  $out.part" | sha256sum -c --status; then
        echo "make-test-models: $name does not match the golden model's checksum" >&2
        rm -f "$out.part"
        exit 1
    fi
    mv "$out.part" "$out"
done <<'LIST'
q8_0 SmolLM2-135M-Instruct.Q8_0.gguf 0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387
q4_0 SmolLM2-135M-Instruct.Q4_0.gguf dc51cbdc90dfb5c74a00a173bbc5ff4609f0df10a2a535040d484246c347da16
f32 SmolLM2-135M-Instruct.F32.gguf f0089e79d6755eb5fbbf61cf4a16ba6bd79641f199875d1dc38cef994afdd0fd
f32 lfm2-audio-tiny.F32.gguf 3d94113d4c2a546b6889422ad084a93b76f7659354cf4b06ccd00f809fe0f001 Tests/Fixtures/models/lfm2-audio-tiny.gguf
f32 lfm2-audio-out-tiny.F32.gguf eee386d68c2c3d8fefe243189a1c4d004a6cb8ffe450703231d8e18178134a9b Tests/Fixtures/models/lfm2-audio-out-tiny.gguf
LIST
