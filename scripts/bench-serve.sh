#!/usr/bin/env bash
# Side-by-side serving benchmark: leap-ref serve and (when LLAMA_SERVER names its binary)
# llama-server, same model file, same slots and threads, measured by the same client
# (Benchmarks/ServeBench): C concurrent clients, N streamed completions of exactly
# --max-tokens tokens each, distinct prompts. Prints one table row per server.
#   scripts/bench-serve.sh [MODEL.gguf] [-c C] [-n N] [--max-tokens M] [--parallel P] [-t T]
# Release builds are used (swift build -c release). Run on a quiet machine; see
# docs/performance.md ("Serving").
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${HOME}/.cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then MODEL="$1"; shift; fi
C=4 N=32 M=64 P=4 T=2
while [ $# -gt 0 ]; do
    case "$1" in
        -c) C="$2"; shift 2 ;;
        -n) N="$2"; shift 2 ;;
        --max-tokens) M="$2"; shift 2 ;;
        --parallel) P="$2"; shift 2 ;;
        -t) T="$2"; shift 2 ;;
        *) echo "bench-serve: unknown argument $1" >&2; exit 2 ;;
    esac
done
swift build -c release --product leap-ref >/dev/null
swift build -c release --product ServeBench >/dev/null
BIN="$(swift build -c release --show-bin-path)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d /tmp/leap-ref-bench-serve.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$work"' EXIT

wait_ready() {  # $1: port, $2: log
    for _ in $(seq 1 1200); do
        if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
        kill -0 "$pid" 2>/dev/null || { cat "$2" >&2; return 1; }
        sleep 0.25
    done
    return 1
}

port=$(free_port)
"$BIN/leap-ref" serve --model "$MODEL" --port "$port" --parallel "$P" --threads "$T" --ctx-size 1024 >"$work/leap.log" 2>&1 &
pid=$!
wait_ready "$port" "$work/leap.log"
echo "leap-ref serve (--parallel $P, -t $T):"
"$BIN/ServeBench" --url "http://127.0.0.1:$port" -c "$C" -n "$N" --max-tokens "$M"
kill -TERM "$pid"; wait "$pid" || true; pid=""

if [ -n "${LLAMA_SERVER:-}" ]; then
    port=$(free_port)
    # -c is the total context of all slots in llama-server; 1024 per slot as above.
    "$LLAMA_SERVER" -m "$MODEL" --port "$port" -np "$P" -t "$T" -c $((1024 * P)) >"$work/llama.log" 2>&1 &
    pid=$!
    wait_ready "$port" "$work/llama.log"
    echo "llama-server (-np $P, -t $T):"
    "$BIN/ServeBench" --url "http://127.0.0.1:$port" -c "$C" -n "$N" --max-tokens "$M"
    kill -TERM "$pid"; wait "$pid" || true; pid=""
fi
