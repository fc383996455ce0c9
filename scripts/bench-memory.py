#!/usr/bin/env python3
"""Peak resident memory of `leap-ref serve` and `llama-server`, side by side in one run.

For every model, each server is started afresh on 127.0.0.1 with the same settings (the
same file, one slot, the same context and attention-cache type, the same threads), asked
one chat completion of exactly N tokens (`ignore_eos`, temperature 0, seed 0: both servers
honor `ignore_eos`), and then read from /proc before it is stopped:

- `VmHWM` (/proc/PID/status): the peak resident set since the process started;
- the resident set right after loading (before the request) and after the answer, split
  into file pages (`RssFile`: the mapped model file, the binary and its libraries) and
  anonymous memory (`RssAnon`: decode copies of weights, caches, buffers, the heap), and
  `Rss`/`Anonymous`/`Private_Hugetlb`/`AnonHugePages` from /proc/PID/smaps_rollup;
- the mapping of the model file alone (its resident bytes in /proc/PID/smaps).

The order of the two servers alternates from model to model (and from round to round).
Prints a Markdown table (MB = 10^6 bytes, as the file sizes) and the commands.

    scripts/bench-memory.py --llama-bin DIR [--leap-ref BIN] [-c 2048] [--cache-type f16]
        [-t 2] [-n 200] [--rounds 1] [--only leap-ref|llama-server] MODEL.gguf...

`--llama-bin` is llama.cpp's build/bin (llama-server), built outside the repository from
the llama-cpp-python 0.3.36 sources (docs/performance.md). `--leap-ref` defaults to
.build/release/leap-ref (build it first: `swift build -c release --product leap-ref`).
`--leap-ref-flags "..."` passes more flags to `leap-ref serve` (and `--llama-flags` to
llama-server). Run it under the machine's benchmark lock on a shared host: the peak does
not depend on speed, but the two servers should not compete for memory either.
"""

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request

PROMPT = ("Write a long story about a lighthouse keeper who finds a message in a bottle. "
          "Describe the sea, the weather and every day of the week in detail.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kb_fields(path: str) -> dict:
    """The `kB` fields of a /proc file (status: VmHWM, VmRSS, RssAnon, RssFile, ...; smaps_rollup)."""
    out = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0])
    return out


def status_kb(pid: int) -> dict:
    return kb_fields(f"/proc/{pid}/status")


def rollup_kb(pid: int) -> dict:
    return kb_fields(f"/proc/{pid}/smaps_rollup")


def file_rss_kb(pid: int, path: str) -> int:
    """Resident kB of the mappings of `path` in /proc/PID/smaps."""
    real = os.path.realpath(path)
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and not fields[0].endswith(":") and "-" in fields[0] and fields[3].count(":") == 1:
                inside = len(fields) >= 6 and os.path.realpath(fields[5]) == real
            elif inside and fields and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def snapshot(pid: int, model: str) -> dict:
    s, r = status_kb(pid), rollup_kb(pid)
    return {"hwm": s.get("VmHWM", 0), "rss": s.get("VmRSS", 0), "anon": s.get("RssAnon", 0),
            "file": s.get("RssFile", 0), "model": file_rss_kb(pid, model),
            "thp": r.get("AnonHugePages", 0), "rollup_rss": r.get("Rss", 0)}


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not become healthy")


def ask(url: str, tokens: int) -> dict:
    body = json.dumps({
        "messages": [{"role": "user", "content": PROMPT}], "max_tokens": tokens, "temperature": 0,
        "seed": 0, "ignore_eos": True, "stream": False}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def run(name: str, cmd: list, port: int, model: str, tokens: int, log) -> dict:
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        time.sleep(0.5)
        loaded = snapshot(proc.pid, model)
        reply = ask(url, tokens)
        got = reply.get("usage", {}).get("completion_tokens")
        if got != tokens:
            raise RuntimeError(f"{name}: asked {tokens} tokens, got {got}")
        after = snapshot(proc.pid, model)
        return {"loaded": loaded, "after": after, "prompt_tokens": reply.get("usage", {}).get("prompt_tokens")}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def mb(kb: int) -> str:
    return f"{kb * 1024 / 1e6:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bin", default="/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin")
    ap.add_argument("--leap-ref", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "leap-ref"))
    ap.add_argument("-c", "--ctx-size", type=int, default=2048)
    ap.add_argument("--cache-type", default="f16", choices=["f16", "f32"])
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--tokens", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", choices=["leap-ref", "llama-server"])
    ap.add_argument("--leap-ref-flags", default="")
    ap.add_argument("--llama-flags", default="")
    ap.add_argument("--log", default="/tmp/bench-memory.log")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()

    leap = os.path.realpath(a.leap_ref)
    llama = os.path.join(a.llama_bin, "llama-server")

    def commands(model: str, port: int) -> dict:
        return {
            "leap-ref": [leap, "serve", "--model", model, "--host", "127.0.0.1", "--port", str(port), "--parallel", "1",
                         "--ctx-size", str(a.ctx_size), "--cache-type", a.cache_type, "--threads", str(a.threads),
                         "--no-webui"] + shlex.split(a.leap_ref_flags),
            "llama-server": [llama, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-np", "1",
                             "-c", str(a.ctx_size), "-ctk", a.cache_type, "-ctv", a.cache_type, "-t", str(a.threads),
                             "--no-webui"] + shlex.split(a.llama_flags),
        }

    rows, shown = [], {}
    with open(a.log, "w") as log:
        for r in range(a.rounds):
            for i, model in enumerate(a.models):
                order = ["leap-ref", "llama-server"] if (i + r) % 2 == 0 else ["llama-server", "leap-ref"]
                if a.only:
                    order = [a.only]
                for name in order:
                    port = free_port()
                    cmd = commands(model, port)[name]
                    shown.setdefault(name, " ".join(shlex.quote(c) for c in cmd))
                    log.write(f"== {name}: {' '.join(cmd)}\n")
                    log.flush()
                    m = run(name, cmd, port, model, a.tokens, log)
                    rows.append((os.path.basename(model), os.path.getsize(model), name, r + 1, m))
                    print(f"{os.path.basename(model)} {name} round {r + 1}: peak {mb(m['after']['hwm'])} MB", file=sys.stderr)

    print(f"Peak resident memory after one {a.tokens}-token answer: 1 slot, context {a.ctx_size}, "
          f"{a.cache_type.upper()} attention cache, {a.threads} threads (MB = 10^6 bytes)")
    print()
    print("| model | file MB | server | round | peak (VmHWM) | after load: anon / file | "
          "after answer: anon / file | model file resident | anon in THP |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for model, size, name, r, m in rows:
        lo, af = m["loaded"], m["after"]
        print(f"| {model} | {size / 1e6:.0f} | {name} | {r} | **{mb(af['hwm'])}** | {mb(lo['anon'])} / {mb(lo['file'])} | "
              f"{mb(af['anon'])} / {mb(af['file'])} | {mb(af['model'])} | {mb(af['thp'])} |")
    print()
    for name, cmd in shown.items():
        print(f"    # {name}: {cmd}")
    print(f"    # request: POST /v1/chat/completions max_tokens {a.tokens}, ignore_eos, temperature 0, seed 0, "
          f"prompt of {rows[0][4]['prompt_tokens'] if rows else '?'} tokens")
    print(f"    # machine: {os.cpu_count()} cores; load average {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
