#!/usr/bin/env python3
"""Generates the Kernels test fixtures with gguf-py (the reference for the block formats).

    pip install gguf==0.19.0 numpy
    python3 scripts/make_kernel_fixtures.py [path/to/kquants-sample.gguf]

Writes Tests/KernelsTests/Fixtures/:
  manifest.json                 one entry per case (see below)
  <case>.blocks                 raw block bytes, rows back to back
  <case>.f32                    little-endian float32 values, rows back to back

Cases:
  kind "dequantize": `<case>.blocks` holds `rows` rows of `cols` values of `type`;
                     `<case>.f32` holds what gguf.quants.dequantize makes of them.
  kind "quantize":   `<case>.f32` holds `rows` x `cols` input floats (seeded random data
                     plus edge cases); `<case>.blocks` holds what gguf.quants.quantize makes
                     of them (gguf-py's quantizers are bit-exact ports of ggml's
                     quantize_row_*_ref).

Real K-quant tensors come from kquants-sample.gguf (a few rows of each tensor, cut to
keep the fixtures small); the 32-value formats are also quantized here from random data.
Run once; the outputs are committed. The tests never read the GGUF file itself.
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "Tests", "KernelsTests", "Fixtures")
# The committed copy of the K-quant sample (Tests/Fixtures/models), or a path given.
SAMPLE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "Tests", "Fixtures", "models", "kquants-sample.gguf")

manifest = []


def write_case(name, kind, qtype, rows, cols, blocks, floats, source):
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    floats = np.ascontiguousarray(floats, dtype="<f4")
    assert blocks.size == rows * gguf.quant_shape_to_byte_shape((cols,), qtype)[0]
    assert floats.size == rows * cols
    blocks.tofile(os.path.join(OUT, name + ".blocks"))
    floats.tofile(os.path.join(OUT, name + ".f32"))
    manifest.append({"name": name, "kind": kind, "type": qtype.name.lower().replace("_k", "_K"),
                     "rows": rows, "cols": cols, "source": source})


def edge_rows(cols, rng):
    """Rows that exercise the quantizers' corner cases, `cols` values each."""
    rows = []
    r = np.zeros(cols, dtype=np.float32)                     # all zeros (d = 0)
    rows.append(r)
    rows.append(np.full(cols, 0.375, dtype=np.float32))      # constant positive
    rows.append(np.full(cols, -2.5, dtype=np.float32))       # constant negative
    r = (rng.standard_normal(cols) * 1e-6).astype(np.float32)   # tiny values (fp16 subnormal scales)
    rows.append(r)
    r = (rng.standard_normal(cols) * 3e3).astype(np.float32)    # large values
    rows.append(r)
    r = rng.integers(-8, 8, cols).astype(np.float32) * 0.25     # exact levels and ties
    rows.append(r)
    r = rng.standard_normal(cols).astype(np.float32)
    r[::7] *= 40                                              # outliers
    rows.append(r)
    return np.stack(rows)


def f16_edge_values():
    """Floats around every interesting half-precision boundary."""
    v = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 65536.0, -70000.0, np.inf, -np.inf,
         2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 3 * 2.0 ** -25,
         2.0 ** -14 - 2.0 ** -25, 1e-30, -1e-30, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
         1.0 + 2.0 ** -11 + 2.0 ** -20, 2049.0, 2051.0, 4097.0, 0.1, -0.3333333, 3.14159265,
         np.float32(np.nan)]
    v = np.array(v, dtype=np.float32)
    # plus the neighbours of every tie between consecutive halves in a few binades
    h = np.arange(0x3C00, 0x3C40, dtype=np.uint16).view(np.float16).astype(np.float32)
    mid = ((h[:-1].astype(np.float64) + h[1:].astype(np.float64)) / 2).astype(np.float32)
    near = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    s = np.arange(1, 40, dtype=np.uint16).view(np.float16).astype(np.float32)  # subnormals
    smid = ((s[:-1].astype(np.float64) + s[1:].astype(np.float64)) / 2).astype(np.float32)
    return np.concatenate([v, near, s, smid, -smid]).astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".blocks") or f.endswith(".f32") or f == "manifest.json":
            os.remove(os.path.join(OUT, f))

    # 1. Real tensors: a few rows of each, at most 1024 values per row (whole blocks).
    reader = gguf.GGUFReader(SAMPLE)
    for t in reader.tensors:
        qtype = t.tensor_type
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        data = np.asarray(t.data)  # (rows, row bytes)
        full_cols = int(t.shape[0])
        cols = min(full_cols, 1024 if block == 32 else 768)
        nrows = 3
        raw = data[:nrows, : cols // block * size]
        expected = quants.dequantize(raw, qtype)
        name = "sample_" + t.name.replace(".", "_")
        write_case(name, "dequantize", qtype, nrows, cols, raw, expected, f"{os.path.basename(SAMPLE)}:{t.name}")

    # 2. Seeded random data quantized by gguf-py (dequantize and quantize cases).
    rng = np.random.default_rng(20260121)
    cols = 256
    for qtype in (T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        x = np.concatenate([rng.standard_normal((3, cols)).astype(np.float32) * 0.05,
                            edge_rows(cols, rng)]).astype(np.float32)
        q = quants.quantize(x, qtype)
        q = q.view(np.uint8).reshape(x.shape[0], -1)
        name = "random_" + qtype.name.lower()
        write_case(name + "_quantize", "quantize", qtype, x.shape[0], cols, q, x, "seeded numpy")
        write_case(name + "_dequantize", "dequantize", qtype, x.shape[0], cols, q,
                   quants.dequantize(q, qtype), "seeded numpy")

    # 3. Half and bfloat16 conversion edge cases (one row each).
    e = f16_edge_values()
    for qtype in (T.F16, T.BF16):
        q = quants.quantize(e.reshape(1, -1), qtype).view(np.uint8).reshape(1, -1)
        write_case("edges_" + qtype.name.lower(), "quantize", qtype, 1, e.size, q, e, "edge values")

    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"wrote {len(manifest)} cases, {total} bytes, to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
