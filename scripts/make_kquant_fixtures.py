#!/usr/bin/env python3
"""Makes the K-quant quantizer fixtures from llama-quantize's output.

    python3 scripts/make_kquant_fixtures.py LLAMA_QUANTIZE SmolLM2-135M-Instruct.F32.gguf

LLAMA_QUANTIZE is a built llama.cpp `llama-quantize` binary (this script only runs it);
the F32 file is the re-encoding `scripts/make-test-models.sh` makes. Needs numpy.

The first three rows of blk.0.ffn_down.weight (1536 values = 6 super-blocks each) are
overwritten with edge cases (zeros, constants, a spike, a ramp, tiny and huge values, one
sign only, exact ties, values whose scale underflows fp16), the next five stay real
weights. llama-quantize --pure then encodes the tensor as Q4_K, Q5_K and Q6_K (without an
importance matrix it runs ggml's quantize_row_*_ref). Writes Tests/KernelsTests/Fixtures/:

  kquant-rows.f32      the 8 input rows, little-endian float32
  kquant-rows.q4_K     llama-quantize's Q4_K blocks of those rows, and .q5_K, .q6_K

Run once; the outputs are committed. The tests never run llama.cpp.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "Tests", "KernelsTests", "Fixtures")
TENSOR = "blk.0.ffn_down.weight"
ROWS, COLS = 8, 1536
TYPE_SIZES = {0: 4, 12: 144, 13: 176, 14: 210}  # bytes per block: F32 (per value), Q4_K, Q5_K, Q6_K


def tensor_location(path, name):
    """(absolute offset of the tensor's data, ggml type) in a GGUF v3 file."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos : pos + n].decode()
        pos += n
        return s

    def skip_value(t):
        if t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            take({0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[t])

    assert take("I") == 0x46554747 and take("I") == 3
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key, t = string(), take("I")
        if key == "general.alignment":
            alignment = take("I")
        else:
            skip_value(t)
    found = None
    for _ in range(n_tensors):
        tname, nd = string(), take("I")
        for _ in range(nd):
            take("Q")
        t, offset = take("I"), take("Q")
        if tname == name:
            found = (offset, t)
    start = (pos + alignment - 1) // alignment * alignment
    return start + found[0], found[1]


def edge_rows(rng):
    """Three rows of 6 super-blocks of edge cases."""
    blocks = [
        np.zeros(256),
        np.full(256, 0.37),
        np.full(256, -2.0),
        np.where(np.arange(256) == 100, 5.0, 0.0),
        np.arange(256) / 64.0 - 2.0,
        rng.normal(0, 1e-6, 256),
        rng.normal(0, 300, 256),
        -rng.uniform(0.5, 3, 256),
        rng.uniform(0.1, 2, 256),
        np.where(np.arange(256) % 2 == 0, 1.0, -1.0),
        np.concatenate([np.zeros(128), rng.normal(0, 0.05, 128)]),
        rng.normal(0, 1e-20, 256),
        np.where(rng.uniform(size=256) < 0.05, rng.normal(0, 1, 256), 0.0),
        (rng.integers(0, 16, 256) - 8) / 15.0,
        np.concatenate([rng.normal(0, 1e-4, 128), rng.normal(0, 10, 128)]),
        np.repeat(rng.normal(0, 1, 16), 16),
        rng.normal(0, 0.02, 256) * np.where(np.arange(256) % 61 == 7, 30, 1),
        np.concatenate([np.full(32, 0.5), np.full(32, -0.5), rng.normal(0, 0.1, 192)]),
    ]
    return np.concatenate(blocks).astype(np.float32).reshape(3, COLS)


def main():
    quantize, f32_model = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20261123)
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "edges.f32.gguf")
        shutil.copyfile(f32_model, source)
        offset, t = tensor_location(source, TENSOR)
        assert t == 0, "the input must be the F32 model"
        with open(source, "r+b") as f:
            f.seek(offset)
            f.write(edge_rows(rng).tobytes())
            f.seek(offset)
            rows = f.read(ROWS * COLS * 4)
        with open(os.path.join(OUT, "kquant-rows.f32"), "wb") as f:
            f.write(rows)
        for name, ggml_type in [("Q4_K", 12), ("Q5_K", 13), ("Q6_K", 14)]:
            out = os.path.join(tmp, name + ".gguf")
            subprocess.run([quantize, "--pure", source, out, name, "1"], check=True, capture_output=True)
            offset, t = tensor_location(out, TENSOR)
            assert t == ggml_type, (name, t)
            row_bytes = COLS // 256 * TYPE_SIZES[t]
            with open(out, "rb") as f:
                f.seek(offset)
                blocks = f.read(ROWS * row_bytes)
            with open(os.path.join(OUT, "kquant-rows." + name[:2].lower() + "_K"), "wb") as f:
                f.write(blocks)


if __name__ == "__main__":
    main()
