#!/usr/bin/env python3
"""Speech out side by side: leap-ref against LiquidAI's reference (liquid-audio 1.3.0, PyTorch,
CPU) at LFM2.5-Audio-1.5B's shapes, same threads, in alternating rounds of one run, so neither
always gets the quieter minute.

    python3 scripts/bench_speech.py [--rounds 3] [--threads 2] [--frames 125] [--prompt-tokens 40]
        [--reference-python /work/ref/la-venv/bin/python] [--dtype bfloat16] [--dir DIR]

leap-ref:   `leap-ref bench --speech --json -p P -n F -r 3 -t T` on the real-shape preset
            (scripts/tools/make_lfm2_gguf.py --preset audio-1.5b: LFM2-1.2B's shape in Q4_0;
            make_lfm2_audio_out_gguf.py --preset lfm2.5-audio-1.5b: depthformer 1024 x 6 in Q4_0,
            detokenizer 512 x 8 in F16), random weights, written once to DIR
            (default ~/.cache/leap-ref/bench-speech). A sequential (TTS) reply: the prompt, then
            F frames, each streamed through the detokenizer as it is made; per round, the
            median of its 3 runs after a warm-up (a run takes about 5 s, the reference's 25).
reference:  scripts/tools/bench_speech_reference.py --rounds 1 --warmup in its own venv (setup in
            that script's docstring), the same shapes with its own random weights, its own
            generate_sequential and its decode of the F frames after generation (it has no
            streaming path for this detokenizer, so its first sample comes at the end).

Both sample codes at temperature 0.8, top-k 64 (the reference README's TTS settings) and make
exactly F frames (the preset's end-of-audio rows are zero; the reference masks the code).
Reported per round and as medians: seconds of compute per second of speech (RTF), the time to
the first sample, the per-frame parts, and throughput (the reference's compute seconds over
leap-ref's for the same speech). Needs: pip install gguf==0.19.0 numpy; a release build of
leap-ref (LEAP_REF_BIN, default .build/release/leap-ref); the SmolLM2 model of
scripts/setup.sh (the generator copies its tokenizer). Run on a quiet machine; never in CI.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_models(d):
    os.makedirs(d, exist_ok=True)
    lm = os.path.join(d, "lfm2.5-audio-1.5b-shape-q4_0.gguf")
    vocoder = os.path.join(d, "vocoder-lfm2.5-audio-1.5b-shape.gguf")
    tokenizer = os.path.join(d, "tokenizer-lfm2.5-audio-1.5b-shape.gguf")
    tools = os.path.join(ROOT, "scripts", "tools")
    if not (os.path.exists(vocoder) and os.path.exists(tokenizer)):
        subprocess.run([sys.executable, os.path.join(tools, "make_lfm2_audio_out_gguf.py"), "--preset",
                        "lfm2.5-audio-1.5b", "--outdir", d], check=True)
    if not os.path.exists(lm):
        donor = os.path.expanduser("~/.cache/leap-ref/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        subprocess.run([sys.executable, os.path.join(tools, "make_lfm2_gguf.py"), "--preset", "audio-1.5b",
                        "--quant", "q4_0", "--donor", donor, "-o", lm], check=True)
    return lm, vocoder, tokenizer


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--frames", type=int, default=125)
    ap.add_argument("--prompt-tokens", type=int, default=40)
    ap.add_argument("--reference-python", default=os.environ.get("LA_PYTHON", "/work/ref/la-venv/bin/python"))
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the reference's dtype (bfloat16: from_pretrained's default)")
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/leap-ref/bench-speech"))
    a = ap.parse_args()

    leap = os.environ.get("LEAP_REF_BIN", os.path.join(ROOT, ".build", "release", "leap-ref"))
    if not os.path.exists(leap):
        subprocess.run(["swift", "build", "-c", "release", "--product", "leap-ref"], check=True, cwd=ROOT)
    lm, vocoder, tokenizer = make_models(a.dir)
    leap_cmd = [leap, "bench", "--speech", "--json", "--model", lm, "--vocoder", vocoder, "--audio-tokenizer", tokenizer,
                "-p", str(a.prompt_tokens), "-n", str(a.frames), "-r", "3", "-t", str(a.threads)]
    ref_cmd = [a.reference_python, os.path.join(ROOT, "scripts", "tools", "bench_speech_reference.py"), "--threads",
               str(a.threads), "--prompt-tokens", str(a.prompt_tokens), "--frames", str(a.frames), "--rounds", "1",
               "--warmup", "--dtype", a.dtype]
    print("leap-ref:  " + " ".join(leap_cmd))
    print("reference: " + " ".join(ref_cmd))
    print(f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", flush=True)

    rows = []
    for r in range(a.rounds):
        mine = run_json(leap_cmd)
        theirs = run_json(ref_cmd)
        # leap-ref: the median of its 3 runs after a warm-up, field by field
        m = {k: statistics.median(run[k] for run in mine["runs"]) for k in mine["runs"][0] if k != "engine"}
        t = theirs["rounds"][0]
        row = dict(
            leap_rtf=m["real_time_factor"], ref_rtf=t["real_time_factor"],
            leap_first=m["first_sample_seconds"], ref_first=t["time_to_first_audio_seconds"],
            leap_total=m["total_seconds"], ref_total=t["total_compute_seconds"],
            leap_prefill=m["prefill_seconds"], ref_prefill=t["prefill_seconds"],
            leap_backbone=1000 * m["backbone_seconds_per_frame"], ref_backbone=1000 * t["backbone_step_seconds_mean"],
            leap_depth=1000 * m["depthformer_seconds_per_frame"], ref_depth=1000 * t["depthformer_frame_seconds_mean"],
            leap_detok=1000 * m["detokenizer_seconds_per_frame"], ref_detok=1000 * t["detokenizer_seconds"] / a.frames,
            leap_audio=m["audio_seconds"], ref_audio=t["audio_seconds"],
            roof=mine["roof_frame_milliseconds"], frame=mine["frame_milliseconds"],
            ceiling=mine["read_ceiling_bytes_per_second"] / 1e9)
        row["speedup"] = (row["ref_total"] / row["ref_audio"]) / (row["leap_total"] / row["leap_audio"])
        rows.append(row)
        print(f"round {r + 1}: leap-ref RTF {row['leap_rtf']:.3f}, first sample {row['leap_first']:.3f} s | "
              f"reference ({a.dtype}) RTF {row['ref_rtf']:.3f}, first sample {row['ref_first']:.2f} s | "
              f"throughput {row['speedup']:.2f}x", flush=True)
    print(f"finished {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")

    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"\nmedians of {a.rounds} alternating rounds, {a.threads} threads, prompt {a.prompt_tokens} tokens, "
          f"{a.frames} frames ({med['leap_audio']:.2f} s of speech)\n")
    print(f"| | leap-ref | liquid-audio 1.3.0 ({a.dtype}) | leap-ref's advantage |")
    print("|---|---:|---:|---:|")
    print(f"| real-time factor (compute s per s of speech) | {med['leap_rtf']:.3f} | {med['ref_rtf']:.3f} | "
          f"{med['speedup']:.2f}x throughput |")
    print(f"| time to the first sample | {med['leap_first']:.3f} s | {med['ref_first']:.2f} s | "
          f"{med['ref_first'] / med['leap_first']:.0f}x |")
    print(f"| prefill ({a.prompt_tokens} tokens) | {med['leap_prefill']:.3f} s | {med['ref_prefill']:.3f} s | |")
    print(f"| backbone step, ms a frame | {med['leap_backbone']:.1f} | {med['ref_backbone']:.1f} | |")
    print(f"| depthformer (8 codebooks), ms a frame | {med['leap_depth']:.1f} | {med['ref_depth']:.1f} | |")
    print(f"| detokenizer, ms a frame | {med['leap_detok']:.1f} (streamed) | {med['ref_detok']:.1f} (once, at the end) | |")
    print(f"\nleap-ref's frame: {med['frame']:.1f} ms against {med['roof']:.1f} ms for its weights at the read ceiling "
          f"measured in the same runs ({med['ceiling']:.2f} GB/s)")


if __name__ == "__main__":
    main()
