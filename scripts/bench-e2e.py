#!/usr/bin/env python3
"""Image and audio questions end to end: time to first token of `leap-ref serve --mmproj`
against `llama-server --mmproj`, the same files, threads, context and requests.

    LLAMA_SERVER=.../llama-server scripts/bench-e2e.py [image-450m] [image-1.6b] [audio-1.5b]
        [-r ROUNDS] [-t THREADS] [--ctx-size S] [--slots 1,4] [--dir DIR] [--leap BIN]

Cases (all three when none is named), random weights in the real shapes and tensor types:
  image-450m  LFM2-VL-450M: make_lfm2_gguf.py --preset vl-450m --quant q4_0 and
              make_lfm2_vl_gguf.py --preset 450m (SigLIP2 base, F16)
  image-1.6b  LFM2-VL-1.6B: make_lfm2_gguf.py --preset vl-1.6b --quant q4_0 and
              make_lfm2_vl_gguf.py --preset 1.6b (SigLIP2 shape-optimized 400M, F16)
  audio-1.5b  LFM2-Audio-1.5B: make_lfm2_gguf.py --preset audio-1.5b --quant q4_0 and
              make_lfm2_audio_gguf.py --preset lfm2-audio-1.5b (FastConformer, F16)
The files go to DIR (default ~/.cache/leap-ref/bench-e2e) and are reused.

The question: one user message, the media part then the text ("Describe this image in one
sentence." with a 500x375 PNG, which both sides read as one 512x384 slice, 192 image
positions; "Transcribe this audio." with a 10-second 16 kHz WAV, 125 audio positions).
Every request carries media of its own (the same drawing with its own seeded noise), so
that no prompt or media cache can answer it. The time to first token of a request is the
wall time of a chat completion with max_tokens 1, temperature 0, sent when the server is
idle (1 client) or together with the others (C clients against C slots): request
handling, media decoding and preprocessing, the encoder, the prefill of every prompt
position, and one sampled token. Both sides must report the same usage.prompt_tokens for
the same request, else the run stops (so both encoded the media into the same positions).

For each slot count, each round starts each server afresh (`--parallel C` / `-np C`;
llama-server gets -c S*C, which it splits among its slots), sends one warm-up question (a
smaller image, or 2 s of audio: the weights' pages are read in), then the measured ones
(1 slot: 2 questions one after the other; C slots: C clients at once). The order of the
two servers alternates from round to round. Reported per side and round: the median (p50)
of its requests' times and, for C clients, the slowest; then the median of the rounds and
llama-server / leap-ref. Also each side's `timings.prompt_ms`. Needs numpy and gguf==0.19.0
(to make the files), a release build of leap-ref, and the SmolLM2 model of scripts/setup.sh
(the generators copy its tokenizer). Run on a quiet machine, under the build lock when the
machine is shared.
"""
import argparse
import base64
import http.client
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "scripts", "tools")
DONOR = os.path.expanduser("~/.cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf")

CASES = {
    "image-450m": dict(kind="image", lm="lfm2-vl-450m-shape-q4_0.gguf", proj="mmproj-lfm2-vl-450m-shape.gguf",
                       make_lm=["make_lfm2_gguf.py", "--preset", "vl-450m", "--quant", "q4_0"],
                       make_proj=["make_lfm2_vl_gguf.py", "--preset", "450m"]),
    "image-1.6b": dict(kind="image", lm="lfm2-vl-1.6b-shape-q4_0.gguf", proj="mmproj-lfm2-vl-1.6b-shape.gguf",
                       make_lm=["make_lfm2_gguf.py", "--preset", "vl-1.6b", "--quant", "q4_0"],
                       make_proj=["make_lfm2_vl_gguf.py", "--preset", "1.6b"]),
    "audio-1.5b": dict(kind="audio", lm="lfm2-audio-1.5b-shape-q4_0.gguf", proj="mmproj-lfm2-audio-1.5b-shape.gguf",
                       make_lm=["make_lfm2_gguf.py", "--preset", "audio-1.5b", "--quant", "q4_0"],
                       make_proj=["make_lfm2_audio_gguf.py", "--preset", "lfm2-audio-1.5b", "--only", "mmproj"]),
}


def make_files(case, d):
    lm, proj = os.path.join(d, case["lm"]), os.path.join(d, case["proj"])
    if not os.path.exists(proj):
        tool, *args = case["make_proj"]
        subprocess.run([sys.executable, os.path.join(TOOLS, tool), *args, "--outdir", d], check=True)
    if not os.path.exists(lm):
        tool, *args = case["make_lm"]
        subprocess.run([sys.executable, os.path.join(TOOLS, tool), *args, "--donor", DONOR, "-o", lm], check=True)
    return lm, proj


def png(rgb):
    """A truecolor PNG of an HxWx3 uint8 array (no filter, zlib level 6)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def image(seed, w=500, h=375):
    """Gradients, a disc and stripes, plus seeded noise: each seed its own pixels."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 255 * x / w
    g = 255 * y / h
    b = 128 + 100 * np.sin(x / 7.0) * (((x - w / 2) ** 2 + (y - h / 2) ** 2) < (h / 3) ** 2)
    rgb = np.stack([r, g, b], -1) + rng.normal(0, 8, (h, w, 3))
    return png(np.clip(rgb, 0, 255).astype(np.uint8))


def wav(seed, seconds=10.0, sr=16000):
    """A 16 kHz mono Int16 WAV: a wobbling sweep plus seeded noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * (200 + 100 * np.sin(2 * np.pi * 0.5 * t)) * t) + 0.05 * rng.standard_normal(t.size)
    pcm = (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, sr, 2 * sr, 2, 16)
            + b"data" + struct.pack("<I", len(pcm)) + pcm)


def question(kind, seed, warmup=False):
    if kind == "image":
        data = image(seed, 256, 192) if warmup else image(seed)
        part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()}}
        text = "Describe this image in one sentence."
    else:
        data = wav(seed, 2.0 if warmup else 10.0)
        part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": "wav"}}
        text = "Transcribe this audio."
    return json.dumps({"messages": [{"role": "user", "content": [part, {"type": "text", "text": text}]}],
                       "max_tokens": 1, "temperature": 0, "stream": False}).encode()


def ask(port, body):
    """(seconds, response JSON) of one chat completion on a fresh connection."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:400]!r}")
    return dt, json.loads(data)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, cmd, log):
        self.cmd, self.log = cmd, log

    def __enter__(self):
        self.out = open(self.log, "w")
        self.p = subprocess.Popen(self.cmd, stdout=self.out, stderr=subprocess.STDOUT)
        port = int(self.cmd[self.cmd.index("--port") + 1])
        for _ in range(2400):
            if self.p.poll() is not None:
                raise RuntimeError(f"server exited: {' '.join(self.cmd)}; see {self.log}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"server not ready after 600 s; see {self.log}")

    def __exit__(self, *exc):
        self.p.terminate()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.out.close()


def commands(side, a, lm, proj, slots, port):
    if side == "leap-ref":
        return [a.leap, "serve", "--model", lm, "--mmproj", proj, "--port", str(port), "--parallel", str(slots),
                "--threads", str(a.threads), "--ctx-size", str(a.ctx_size), "--no-webui"]
    return [a.llama_server, "-m", lm, "--mmproj", proj, "--port", str(port), "-np", str(slots),
            "-t", str(a.threads), "-c", str(a.ctx_size * slots), "--no-webui"]


def measure(side, a, case, lm, proj, slots, seed, logdir):
    """One server start: warm-up, then the measured questions. Returns per-request rows."""
    port = free_port()
    cmd = commands(side, a, lm, proj, slots, port)
    log = os.path.join(logdir, f"{side}-{slots}.log")
    with Server(cmd, log):
        ask(port, question(case["kind"], seed + 999, warmup=True))
        rows = []
        if slots == 1:
            for i in range(2):
                dt, r = ask(port, question(case["kind"], seed + i))
                rows.append((seed + i, dt, r))
        else:
            results = [None] * slots
            start = threading.Barrier(slots)
            bodies = [question(case["kind"], seed + i) for i in range(slots)]

            def client(i):
                start.wait()
                results[i] = ask(port, bodies[i])
            threads = [threading.Thread(target=client, args=(i,)) for i in range(slots)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if any(r is None for r in results):
                raise RuntimeError(f"{side}: a client failed; see {log}")
            rows = [(seed + i, dt, r) for i, (dt, r) in enumerate(results)]
    return rows


def breakdown(a, case, lm, proj, prompt_tokens):
    """Where one question's time goes, each side measured by its own tools right after the
    rounds: the encoder alone on one of the measured inputs (leap-ref bench --mmproj, the
    median of 3 after a warm-up; llama-mtmd-cli's "mtmd batch encoding done in N ms") and the
    prompt's positions prefilled as one batch of tokens (leap-ref bench -p N / llama-bench -p N,
    3 runs). Returns {side: (encoder ms, prefill ms)}."""
    bin_dir = os.path.dirname(a.llama_server)
    media = os.path.join(a.logs, "question.png" if case["kind"] == "image" else "question.wav")
    with open(media, "wb") as f:
        f.write(image(1100) if case["kind"] == "image" else wav(1100))
    flag = "--" + case["kind"]
    t = str(a.threads)
    out = subprocess.run([a.leap, "bench", "--model", lm, "--mmproj", proj, flag, media, "-r", "3", "-t", t, "--json"],
                         check=True, capture_output=True, text=True).stdout
    leap_enc = json.loads(out)["encode_ms"]["median"]
    out = subprocess.run([a.leap, "bench", "--model", lm, "-p", str(prompt_tokens), "-n", "0", "-r", "3", "-t", t],
                         check=True, capture_output=True, text=True).stdout
    leap_pp = float(next(line for line in out.splitlines() if f"pp{prompt_tokens} " in line).split("|")[-2].split()[0])
    out = subprocess.run([os.path.join(bin_dir, "llama-mtmd-cli"), "-m", lm, "--mmproj", proj, flag, media, "-p", "Describe",
                          "-n", "1", "-t", t, "--temp", "0"], capture_output=True, text=True)
    log = out.stdout + out.stderr
    if "mtmd batch encoding done in " not in log:
        raise RuntimeError("llama-mtmd-cli printed no encode time:\n" + log[-2000:])
    llama_enc = float(log.split("mtmd batch encoding done in ")[1].split()[0])
    out = subprocess.run([os.path.join(bin_dir, "llama-bench"), "-m", lm, "-p", str(prompt_tokens), "-n", "0", "-r", "3", "-t", t,
                          "-o", "json"], check=True, capture_output=True, text=True).stdout
    llama_pp = json.loads(out)[0]["avg_ts"]
    return {"leap-ref": (leap_enc, 1000 * prompt_tokens / leap_pp), "llama-server": (llama_enc, 1000 * prompt_tokens / llama_pp)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help=", ".join(CASES) + " (default: all)")
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=4096, help="per slot")
    ap.add_argument("--slots", default="1,4", help="slot counts, comma-separated (C slots get C clients at once)")
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/leap-ref/bench-e2e"))
    ap.add_argument("--leap", default=os.path.join(ROOT, ".build", "release", "leap-ref"))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--logs", default="/tmp/leap-ref-bench-e2e", help="where the server logs go")
    ap.add_argument("--breakdown", action="store_true",
                    help="after each case's rounds, time its encoder and its prompt's prefill apart on both sides "
                         "(leap-ref bench, llama-mtmd-cli and llama-bench beside LLAMA_SERVER)")
    a = ap.parse_args()
    if not a.llama_server:
        ap.error("set LLAMA_SERVER (or --llama-server) to llama.cpp's llama-server")
    cases = a.cases or list(CASES)
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c}; known: {', '.join(CASES)}")
    slot_counts = [int(s) for s in a.slots.split(",")]
    os.makedirs(a.dir, exist_ok=True)
    os.makedirs(a.logs, exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "Sources", "Package.swift"]).returncode:
        commit += " (with uncommitted changes)"
    print(f"commit {commit}; {os.cpu_count()} cores; load average {open('/proc/loadavg').read().split()[:3]}", flush=True)
    table, breakdowns = [], []
    for name in cases:
        case = CASES[name]
        lm, proj = make_files(case, a.dir)
        for slots in slot_counts:
            per = {"leap-ref": [], "llama-server": []}
            print(f"\n## {name}, {slots} slot(s)", flush=True)
            for side in ("leap-ref", "llama-server"):
                print("  " + " ".join(commands(side, a, lm, proj, slots, "PORT")), flush=True)
            for rnd in range(1, a.rounds + 1):
                order = ["leap-ref", "llama-server"] if rnd % 2 else ["llama-server", "leap-ref"]
                seed = 1000 * rnd + 100 * slots
                got = {}
                for side in order:
                    load = open("/proc/loadavg").read().split()[0]
                    rows = measure(side, a, case, lm, proj, slots, seed, a.logs)
                    got[side] = rows
                    ts = [dt for _, dt, _ in rows]
                    pms = [r.get("timings", {}).get("prompt_ms", float("nan")) for _, _, r in rows]
                    ptok = [r["usage"]["prompt_tokens"] for _, _, r in rows]
                    per[side].append(dict(p50=statistics.median(ts), max=max(ts), prompt_ms=statistics.median(pms)))
                    print(f"  round {rnd} {side:>12}: TTFT p50 {statistics.median(ts) * 1000:7.0f} ms, slowest {max(ts) * 1000:7.0f} ms, "
                          f"timings.prompt_ms p50 {statistics.median(pms):7.0f}, prompt tokens {ptok}, load before {load}", flush=True)
                a_tok = [r["usage"]["prompt_tokens"] for _, _, r in got["leap-ref"]]
                b_tok = [r["usage"]["prompt_tokens"] for _, _, r in got["llama-server"]]
                if a_tok != b_tok:
                    raise SystemExit(f"prompt token counts differ: leap-ref {a_tok}, llama-server {b_tok}")
            med = {s: {k: statistics.median(x[k] for x in per[s]) for k in ("p50", "max", "prompt_ms")} for s in per}
            table.append((name, slots, med, a_tok[0]))
        if a.breakdown:
            parts = breakdown(a, case, lm, proj, a_tok[0])
            for side, (enc, pp) in parts.items():
                one = [m for n, s, m, _ in table if n == name and s == 1]
                ttft = one[0][side]["p50"] * 1000 if one else float("nan")
                rest = ttft - enc - pp
                print(f"  {name} {side:>12}: encoder {enc:6.0f} ms, prefill of {a_tok[0]} positions as one batch {pp:6.0f} ms, "
                      f"1-slot TTFT {ttft:6.0f} ms, the rest {rest:5.0f} ms", flush=True)
                breakdowns.append((name, side, enc, pp, ttft, rest))
    print("\n| question | slots (clients) | prompt tokens | leap-ref TTFT p50 (slowest) ms | llama-server TTFT p50 (slowest) ms "
          "| llama-server / leap-ref (p50) | prompt_ms p50 leap-ref / llama-server |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, slots, med, ptok in table:
        lr, ll = med["leap-ref"], med["llama-server"]
        slow = lambda m: f" ({m['max'] * 1000:.0f})" if slots > 1 else ""
        print(f"| {name} | {slots} | {ptok} | {lr['p50'] * 1000:.0f}{slow(lr)} | {ll['p50'] * 1000:.0f}{slow(ll)} | "
              f"{ll['p50'] / lr['p50']:.2f}x | {lr['prompt_ms']:.0f} / {ll['prompt_ms']:.0f} |")
    if breakdowns:
        print("\n| question | side | encoder ms | prefill ms (one batch) | 1-slot TTFT ms | the rest ms |")
        print("|---|---|---:|---:|---:|---:|")
        for name, side, enc, pp, ttft, rest in breakdowns:
            print(f"| {name} | {side} | {enc:.0f} | {pp:.0f} | {ttft:.0f} | {rest:.0f} |")
    print(f"\nmedian of {a.rounds} rounds each; load average after {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
