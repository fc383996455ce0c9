#!/usr/bin/env python3
"""JSON-mode generation speed: two leap-ref binaries side by side, same model, same seeds.

Starts `leap-ref serve` from each binary in turn (alternating rounds, so neither always gets
the quieter minute), asks the same chat questions with a JSON Schema `response_format`
(streamed, fixed seed, so both binaries generate the same tokens when their masks agree),
and reports decode tokens per second over the streamed tokens, with and without the schema.

    scripts/bench_json_mode.py --a /tmp/leap-before --b .build/release/leap-ref [-r 3] [--model M]

Needs the `openai` Python package (scripts/setup.sh installs it).
"""
import argparse, socket, statistics, subprocess, sys, time

from openai import OpenAI

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["street", "city"],
        },
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "address"],
}
QUESTIONS = [
    "Invent a person who lives in Paris and describe them as JSON.",
    "Describe a fictional librarian as JSON.",
    "Make up a customer record for an online shop, as JSON.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, model, threads):
    port = free_port()
    args = [binary, "serve", "--port", str(port), "--no-webui", "-t", str(threads)]
    if model:
        args += ["--model", model]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    for _ in range(600):
        try:
            client.models.list()
            return proc, client
        except Exception:
            if proc.poll() is not None:
                sys.exit(f"{binary} serve exited with {proc.returncode}")
            time.sleep(0.1)
    proc.kill()
    sys.exit(f"{binary} serve did not start")


def one(client, question, seed, schema, max_tokens):
    extra = {"response_format": {"type": "json_schema", "json_schema": {"name": "record", "schema": schema}}} if schema else {}
    stream = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": question}], max_tokens=max_tokens, temperature=0.8,
        seed=seed, stream=True, **extra)
    times, text = [], ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
            text += chunk.choices[0].delta.content
    return times, text


def measure(binary, model, threads, max_tokens):
    proc, client = start(binary, model, threads)
    try:
        out = {}
        for mode, schema in (("free", None), ("json", SCHEMA)):
            one(client, QUESTIONS[0], 1, schema, 16)  # warm-up (compiles and caches the grammar)
            tokens, seconds, texts = 0, 0.0, []
            for i, q in enumerate(QUESTIONS):
                times, text = one(client, q, 100 + i, schema, max_tokens)
                texts.append(text)
                if len(times) > 1:
                    tokens += len(times) - 1
                    seconds += times[-1] - times[0]
            out[mode] = (tokens / seconds if seconds else 0.0, texts)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="the first leap-ref binary (e.g. before a change)")
    p.add_argument("--b", required=True, help="the second leap-ref binary")
    p.add_argument("--model", help="GGUF model (default: the installed SmolLM2)")
    p.add_argument("-r", "--rounds", type=int, default=3)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-n", "--max-tokens", type=int, default=200)
    a = p.parse_args()
    rates = {(side, mode): [] for side in ("a", "b") for mode in ("free", "json")}
    texts = {}
    for r in range(a.rounds):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        for side in order:
            out = measure(getattr(a, side), a.model, a.threads, a.max_tokens)
            for mode, (rate, t) in out.items():
                rates[(side, mode)].append(rate)
                texts[(side, mode)] = t
            print(f"round {r} {side}: free {out['free'][0]:.1f} tok/s, json {out['json'][0]:.1f} tok/s", flush=True)
    same = texts[("a", "json")] == texts[("b", "json")]
    print(f"same JSON-mode texts from both binaries: {same}")
    for mode in ("free", "json"):
        ma, mb = statistics.median(rates[("a", mode)]), statistics.median(rates[("b", mode)])
        print(f"{mode}: a {ma:.1f} tok/s, b {mb:.1f} tok/s, b/a {mb / ma:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
