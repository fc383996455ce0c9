#!/usr/bin/env python3
"""leap-ref and llama.cpp on the same files, same machine, same threads, in one run.

For every model and every round, `leap-ref bench` and `llama-bench` run back to back with
the same flags (the order alternates from round to round, so neither always gets the
warmer or the quieter minute); the table gives each engine's median over the rounds and
the ratio of the medians. `--load N` runs a competing CPU-bound process (`stress-ng --cpu
N`, Debian's stress-ng) for the whole measurement: the contention figures of
docs/performance.md. `--baseline BIN` adds an earlier leap-ref build (the commit before a
change, built in a second worktree) to the same rounds, so before, after and llama.cpp
come from one window: the "before and after" columns of docs/performance.md.
`--cache-type f16` gives both engines an F16 attention cache (`leap-ref bench --cache-type
f16`, `llama-bench -ctk f16 -ctv f16`; the baseline too, so it must know the flag);
without it each runs its default, leap-ref F32 and llama.cpp F16 (llama-bench 0.3.36
refuses `-ctk f32`, so an F32-against-F32 run is not offered).

    scripts/bench_side_by_side.py --llama-bin DIR [--rounds 3] [-p 512] [-n 128] [-t 2]
        [-d 0] [-r 3] [--load 0] [--baseline BIN] [--cache-type f16] MODEL.gguf...

`--streams 1,4` measures batched decoding instead: B sequences each prefill a -p token
prompt and generate -n tokens together, `leap-ref bench --parallel 1,4 -p P -n N -t T -r 1`
against `llama-batched-bench -m M -c C -b 512 -ub 512 -npp P -ntg N -npl 1,4 -t T` (its
S_TG, the generation phase's tokens per second; C is 4096 or what the largest B needs),
alternated the same way; the table adds each engine's aggregate at B over its own at the
first B (the "four streams against one" figures of docs/performance.md).

For a decode test without -d, `leap-ref bench` also prints the bytes of weights one
token reads and the machine's read speed measured right after its run
(`MemoryBandwidth.measureRead`: the best of three passes of a SIMD sum over 256 MiB on the
same threads, prefetching 2 KiB ahead as the decode kernels do). The script then adds a
memory-roof table: both engines' tg rates as GB/s of weights (the same bytes for both:
the same file), the read speed of each round, each engine's share of it, and the read
speed over llama.cpp's GB/s: the largest decode ratio a kernel that reads exactly at the
read loop's speed could reach in that round. A row whose weights stream near that speed
cannot go much faster by any change that reads the same bytes. The attention cache's
reads are not counted: at -d 0 with -n 128 they are a few percent of the weights'
(SmolLM2-135M's F32 cache: 2.8 MiB a token on average, 4% of its 72 MiB), so the shares
are a little low for both engines; after -d they dominate, and the table is left out.

`--llama-bin` is llama.cpp's build/bin (llama-bench), built outside the repository from
the llama-cpp-python 0.3.36 sources (docs/performance.md says how). Prints a Markdown
table and the commands it ran. Not part of the test suite: speed is never asserted.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

STREAMS_ROW = re.compile(r"^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|\s*\d+\s*\|\s*(?P<b>\d+)\s*\|\s*(?P<agg>[\d.]+)\s*±")
TRAFFIC = re.compile(r"weights read per decoded token: (?P<size>[\d.]+) (?P<unit>B|KiB|MiB|GiB) of .*"
                     r"ceiling measured now on \d+ threads \((?P<ceiling>[\d.]+) GB/s\)")
ROW = re.compile(r"^\|\s*(?P<model>[^|]+?)\s*\|.*\|\s*(?P<test>(?:pp|tg)\d+(?:\s*@\s*d\d+)?)\s*\|\s*(?P<mean>[\d.]+)\s*±\s*(?P<sd>[\d.]+)\s*\|$")


def parse(output: str) -> dict:
    """Test name -> tokens/s from a llama-bench style Markdown table."""
    found = {}
    for line in output.splitlines():
        m = ROW.match(line.strip())
        if m:
            found[re.sub(r"\s+", "", m.group("test"))] = float(m.group("mean"))
    return found


def parse_roof(output: str):
    """(weight bytes per decoded token, read ceiling in bytes/s) from `leap-ref bench`'s
    traffic line, or None when it has none (no decode test)."""
    traffic = TRAFFIC.search(output)
    if not traffic:
        return None
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[traffic.group("unit")]
    return float(traffic.group("size")) * scale, float(traffic.group("ceiling")) * 1e9


def parse_streams(output: str) -> dict:
    """Batch size -> aggregate generated tokens/s, from `leap-ref bench --parallel` (its
    table's parallel and aggregate columns) or `llama-batched-bench` (B and S_TG)."""
    found = {}
    for line in output.splitlines():
        line = line.strip()
        m = STREAMS_ROW.match(line)
        if m:
            found[f"B={m.group('b')}"] = float(m.group("agg"))
            continue
        cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 10 and all(re.fullmatch(r"[\d.]+", c) for c in cells):
            found[f"B={cells[2]}"] = float(cells[7])  # PP TG B N_KV T_PP S_PP T_TG S_TG T S
    return found


def run(cmd: list, parser=parse) -> tuple:
    """The parsed results of `cmd`, and its output."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    result = parser(done.stdout)
    if not result:
        sys.exit(f"no results in the output of: {' '.join(cmd)}\n{done.stdout[-2000:]}")
    return result, done.stdout


def print_roof(roofs: list, rounds: int) -> None:
    """The memory-roof table: per decode row, each engine's tg rate as GB/s of weights
    (leap-ref's bytes per token for both), the read ceiling leap-ref measured after each of
    its rounds, and the ratios, all as medians of the per-round values."""
    gb = lambda xs: ", ".join(f"{x / 1e9:.1f}" for x in xs)
    print(f"\nMemory roof (GB/s of weights read, median of {rounds} rounds; the read ceiling measured after each leap-ref round):\n")
    print("| model file | test | MiB per token | leap-ref GB/s | llama.cpp GB/s | read ceiling GB/s (rounds) "
          "| leap-ref / ceiling | llama.cpp / ceiling | ceiling / llama.cpp |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|")
    for model, test, ours, theirs, roof in roofs:
        per_token = roof[0][0]
        ceilings = [c for _, c in roof]
        ours_bw = [t * per_token for t in ours]
        theirs_bw = [t * per_token for t in theirs]
        med = statistics.median
        print(f"| {model} | {test} | {per_token / (1 << 20):.1f} | {med(ours_bw) / 1e9:.1f} | {med(theirs_bw) / 1e9:.1f} "
              f"| {med(ceilings) / 1e9:.1f} ({gb(ceilings)}) | {med([o / c for o, c in zip(ours_bw, ceilings)]):.0%} "
              f"| {med([t / c for t, c in zip(theirs_bw, ceilings)]):.0%} "
              f"| {med([c / t for t, c in zip(theirs_bw, ceilings)]):.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--llama-bin", required=True, help="llama.cpp build/bin directory")
    ap.add_argument("--leap-ref", default=None, help="leap-ref binary (default: the release build)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-d", type=int, default=0, help="tokens already in the cache (llama-bench -d)")
    ap.add_argument("-r", type=int, default=3, help="repetitions inside each bench run")
    ap.add_argument("--load", type=int, default=0, help="competing CPU-bound workers (stress-ng --cpu N)")
    ap.add_argument("--baseline", default=None, help="an earlier leap-ref binary, measured in the same rounds")
    ap.add_argument("--cache-type", choices=["f16"], default=None,
                    help="an F16 attention cache for both engines (default: each engine's own, leap-ref F32)")
    ap.add_argument("--streams", default=None, metavar="B1,B2,...",
                    help="batched decoding at these batch sizes against llama-batched-bench (see above)")
    args = ap.parse_args()
    streams = [int(b) for b in args.streams.split(",")] if args.streams else None
    if streams and (args.d or args.cache_type or min(streams) < 1):
        sys.exit("--streams takes batch sizes of at least 1, and no -d or --cache-type")

    leap = args.leap_ref
    if leap is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=root, capture_output=True, text=True)
        leap = os.path.join(out.stdout.strip(), "leap-ref")
    llama = os.path.join(args.llama_bin, "llama-batched-bench" if streams else "llama-bench")
    for exe in (leap, llama) + ((args.baseline,) if args.baseline else ()):
        if not os.access(exe, os.X_OK):
            sys.exit(f"not executable: {exe}")

    flags = ["-p", str(args.p), "-n", str(args.n), "-t", str(args.t), "-r", str(args.r)]
    if args.d:
        flags += ["-d", str(args.d)]
    stress = None
    if args.load:
        if shutil.which("stress-ng") is None:
            sys.exit("--load needs stress-ng (apt-get install stress-ng)")
        stress = subprocess.Popen(["stress-ng", "--cpu", str(args.load), "--timeout", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
    try:
        print(f"load average before: {open('/proc/loadavg').read().split()[:3]}; competing workers: {args.load}")
        rows, roofs = [], []
        for model in args.models:
            leap_cmd = [leap, "bench", "--model", model] + flags
            llama_cmd = [llama, "-m", model, "-o", "md"] + flags
            if streams:
                batches = ",".join(map(str, streams))
                context = max(4096, max(streams) * (args.p + args.n))
                leap_cmd = [leap, "bench", "--model", model, "--parallel", batches,
                            "-p", str(args.p), "-n", str(args.n), "-t", str(args.t), "-r", "1"]
                llama_cmd = [llama, "-m", model, "-c", str(context), "-b", "512", "-ub", "512",
                             "-npp", str(args.p), "-ntg", str(args.n), "-npl", batches, "-t", str(args.t)]
            if args.cache_type:
                leap_cmd += ["--cache-type", args.cache_type]
                llama_cmd += ["-ctk", args.cache_type, "-ctv", args.cache_type]
            samples = {"leap-ref": [], "llama.cpp": [], "baseline": []}
            roof = []  # leap-ref's parse_roof of each round
            for r in range(args.rounds):
                order = [("leap-ref", leap_cmd), ("llama.cpp", llama_cmd)]
                if args.baseline:
                    order.insert(1, ("baseline", [args.baseline] + leap_cmd[1:]))
                if r % 2:
                    order.reverse()
                for name, cmd in order:
                    result, output = run(cmd, parse_streams if streams else parse)
                    samples[name].append(result)
                    if name == "leap-ref":
                        roof.append(parse_roof(output))
            if streams:
                tests = [f"B={b}" for b in streams if all(f"B={b}" in s for s in samples["leap-ref"] + samples["llama.cpp"])]
            else:
                tests = sorted(samples["leap-ref"][0].keys() & samples["llama.cpp"][0].keys(), key=lambda t: (t[:2] != "pp", t))
            for test in tests:
                ours = [s[test] for s in samples["leap-ref"]]
                theirs = [s[test] for s in samples["llama.cpp"]]
                before = [s[test] for s in samples["baseline"] if test in s]
                rows.append((os.path.basename(model), test, ours, theirs, before))
                # Only at -d 0: after a deep cache a token also reads the attention cache.
                if test.startswith("tg") and "@d" not in test and all(roof):
                    roofs.append((os.path.basename(model), test, ours, theirs, roof))
            print(f"  {' '.join(leap_cmd)}\n  {' '.join(llama_cmd)}", file=sys.stderr)
        fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
        if streams:
            # Each engine's aggregate at B over its own at the first B, round by round.
            first = {model: (ours, theirs) for model, test, ours, theirs, _ in rows if test == f"B={streams[0]}"}
            scaling = lambda xs, base: ", ".join(f"{x / y:.2f}x" for x, y in zip(xs, base))
            before_head = " leap-ref before (rounds) |" if args.baseline else ""
            print(f"\n| model file | B | leap-ref aggregate t/s (median of {args.rounds}) | llama.cpp S_TG t/s | ratio | leap-ref rounds | llama.cpp rounds | leap-ref / its B={streams[0]} | llama.cpp / its B={streams[0]} |{before_head}")
            print("|---|---:|---:|---:|---:|---|---|---|---|" + ("---|" if args.baseline else ""))
            for model, test, ours, theirs, before in rows:
                a, b = statistics.median(ours), statistics.median(theirs)
                base_ours, base_theirs = first.get(model, (ours, theirs))
                before_cell = f" {statistics.median(before):.1f} ({fmt(before)}) |" if args.baseline else ""
                print(f"| {model} | {test[2:]} | {a:.1f} | {b:.1f} | {a / b:.2f}x | {fmt(ours)} | {fmt(theirs)} | {scaling(ours, base_ours)} | {scaling(theirs, base_theirs)} |{before_cell}")
        elif args.baseline:
            print(f"\nbaseline: {args.baseline}")
            print(f"\n| model file | test | leap-ref before | leap-ref now (median of {args.rounds}) | llama.cpp t/s | now / before | now / llama.cpp | before rounds | now rounds | llama.cpp rounds |")
            print("|---|---|---:|---:|---:|---:|---:|---|---|---|")
            for model, test, ours, theirs, before in rows:
                a, b, c = statistics.median(ours), statistics.median(theirs), statistics.median(before)
                print(f"| {model} | {test} | {c:.1f} | {a:.1f} | {b:.1f} | {a / c:.2f}x | {a / b:.2f}x | {fmt(before)} | {fmt(ours)} | {fmt(theirs)} |")
        else:
            print(f"\n| model file | test | leap-ref t/s (median of {args.rounds}) | llama.cpp t/s | ratio | leap-ref rounds | llama.cpp rounds |")
            print("|---|---|---:|---:|---:|---|---|")
            for model, test, ours, theirs, _ in rows:
                a, b = statistics.median(ours), statistics.median(theirs)
                print(f"| {model} | {test} | {a:.1f} | {b:.1f} | {a / b:.2f}x | {fmt(ours)} | {fmt(theirs)} |")
        if roofs:
            print_roof(roofs, args.rounds)
        print(f"\nthreads {args.t}; {os.cpu_count()} cores; load average after: {open('/proc/loadavg').read().split()[:3]}")
    finally:
        if stress:
            stress.terminate()
            stress.wait()


if __name__ == "__main__":
    main()
