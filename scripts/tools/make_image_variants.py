#!/usr/bin/env python3
"""Write the small PNG and JPEG variants that test the Images module's decoders, and (with
--stb) the RGB that stb_image decodes from each, as the test's expected hashes.

PNGs are written by the small encoder below, so that every case is under control: each color
type at each bit depth, Adam7 interlacing (with passes left empty by tiny sizes), all five row
filters (row y uses filter y mod 5), and the three DEFLATE block types (stored, fixed and
dynamic Huffman), several IDAT chunks, ancillary chunks, a tRNS.

JPEGs come from Pillow (libjpeg-turbo): 4:4:4, 4:2:2, 4:2:0, grayscale, progressive,
optimized tables, restart intervals, EXIF/ICC/comment segments, CMYK, RGB, odd and tiny sizes.
Sampling factors libjpeg's Pillow interface cannot ask for (4:4:0, 4:1:1, 3x1, a gray plane
declared 2x2) and non-interleaved baseline scans come from the baseline encoder below.

--stb PATH/stb_image.h compiles a 20-line C program against that header (llama.cpp's vendored
copy, vendor/stb/stb_image.h, v2.30) in a temporary directory, decodes every file with
stbi_load_from_memory(..., 3) and writes OUTDIR/stb_image_rgb.json: width, height and the
sha256 of the RGB bytes. On x86-64 stb_image uses its SSE2 kernels, as llama.cpp does.

--resize-reference writes OUTDIR/pillow_bilinear_resize.json: the sha256 of Pillow's
BILINEAR resize of png-rgb8-paeth-300x200.png to several sizes, the reference for the
preprocessor's resize. It needs Pillow < 13: llama.cpp, like Pillow up to 12, always resizes
horizontally first; Pillow 13 (python-pillow/Pillow#9549) resizes vertically first when the
height shrinks more than the width, which moves some bytes by one.

Usage: make_image_variants.py OUTDIR [--stb PATH/stb_image.h] [--resize-reference]
Requires: pip install pillow numpy (and a Pillow < 13 for --resize-reference); a C compiler for --stb.
"""
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from PIL import Image

# ---------------------------------------------------------------------------------------------
# Test pictures: smooth gradients with hard edges and fine detail, seeded.


def picture(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = x / max(w - 1, 1), y / max(h - 1, 1)
    r = 255 * u
    g = 255 * v
    b = 128 + 100 * np.sin(6 * u + 4 * v + rng.uniform(0, 6))
    img = np.stack([r, g, b], -1)
    # a bright square, a dark band and noise: edges and texture for the DCT and the filters
    img[h // 4: h // 2 + 1, w // 4: w // 2 + 1] = rng.integers(0, 256, 3)
    img[(2 * h) // 3: (2 * h) // 3 + max(1, h // 10), :] //= 3
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).round().astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# PNG encoder


def png_chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def pack_row(samples, depth):
    """A row of integer samples as bytes at `depth` bits (MSB first for sub-byte depths)."""
    if depth == 16:
        return b"".join(struct.pack(">H", int(s)) for s in samples)
    if depth == 8:
        return bytes(int(s) for s in samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | int(s)
        nbits += depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def filter_row(kind, row, prev, bpp):
    out = bytearray()
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
        out.append((x - pred) & 0xFF)
    return bytes([kind]) + bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png_bytes(samples, color_type, depth, palette=None, trns=None, interlace=False, deflate="dynamic",
              idat_pieces=1, ancillary=False, filters=None):
    """samples: h x w x channels integer array of the stored samples."""
    h, w = samples.shape[:2]
    channels = samples.shape[2]
    bpp = max(1, channels * depth // 8)
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    row_number = 0
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        prev = bytes(len(pack_row(sub[0].reshape(-1), depth)))
        for r in sub:
            packed = pack_row(r.reshape(-1), depth)
            kind = (filters or (lambda n: n % 5))(row_number)
            raw += filter_row(kind, packed, prev, bpp)
            prev = packed
            row_number += 1
    if deflate == "stored":
        compressed = zlib.compress(bytes(raw), 0)
    elif deflate == "fixed":
        c = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_FIXED)
        compressed = c.compress(bytes(raw)) + c.flush()
    else:
        compressed = zlib.compress(bytes(raw), 9)
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0))
    if ancillary:
        out += png_chunk(b"gAMA", struct.pack(">I", 45455))
        out += png_chunk(b"tEXt", b"Comment\x00leap-ref test image")
    if palette is not None:
        out += png_chunk(b"PLTE", bytes(np.asarray(palette, dtype=np.uint8).reshape(-1)))
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    step = (len(compressed) + idat_pieces - 1) // idat_pieces
    for i in range(0, len(compressed), step):
        out += png_chunk(b"IDAT", compressed[i:i + step])
    if ancillary:
        out += png_chunk(b"tEXt", b"Note\x00after the data")
    out += png_chunk(b"IEND", b"")
    return out


def png_variants():
    rgb = picture(23, 17, 11).astype(np.int64)
    gray = (rgb[..., 0] * 77 + rgb[..., 1] * 150 + rgb[..., 2] * 29) >> 8
    alpha = (np.arange(23 * 17).reshape(17, 23) * 7) % 256
    wide = lambda a: a * 256 + (a * 13) % 251  # 16-bit samples whose low byte is not a copy of the high one
    out = {}
    for depth in (1, 2, 4, 8, 16):
        levels = gray >> (8 - depth) if depth <= 8 else wide(gray)
        out[f"png-gray{depth}-23x17.png"] = png_bytes(levels[..., None], 0, depth)
    out["png-gray8-trns-23x17.png"] = png_bytes(gray[..., None], 0, 8, trns=struct.pack(">H", int(gray[0, 0])))
    out["png-rgb8-23x17.png"] = png_bytes(rgb, 2, 8, ancillary=True)
    out["png-rgb16-23x17.png"] = png_bytes(wide(rgb), 2, 16)
    out["png-graya8-23x17.png"] = png_bytes(np.stack([gray, alpha], -1), 4, 8)
    out["png-graya16-23x17.png"] = png_bytes(np.stack([wide(gray), wide(alpha)], -1), 4, 16)
    out["png-rgba8-23x17.png"] = png_bytes(np.concatenate([rgb, alpha[..., None]], -1), 6, 8)
    out["png-rgba16-23x17.png"] = png_bytes(np.concatenate([wide(rgb), wide(alpha)[..., None]], -1), 6, 16)
    rng = np.random.default_rng(5)
    for depth in (1, 2, 4, 8):
        n = 1 << depth
        palette = rng.integers(0, 256, (n, 3))
        indices = (gray * n) >> 8
        trns = bytes(range(0, 256, 256 // n))[: n // 2] if depth == 4 else None
        out[f"png-palette{depth}-23x17.png"] = png_bytes(indices[..., None], 3, depth, palette=palette, trns=trns)
    # Interlaced: every pass non-empty, then sizes that leave passes empty.
    out["png-rgb8-adam7-23x17.png"] = png_bytes(rgb, 2, 8, interlace=True)
    out["png-gray1-adam7-23x17.png"] = png_bytes((gray >> 7)[..., None], 0, 1, interlace=True)
    out["png-rgba16-adam7-23x17.png"] = png_bytes(
        np.concatenate([wide(rgb), wide(alpha)[..., None]], -1), 6, 16, interlace=True)
    out["png-palette2-adam7-23x17.png"] = png_bytes(
        ((gray * 4) >> 8)[..., None], 3, 2, palette=[[255, 0, 0], [0, 255, 0], [0, 0, 255], [9, 9, 9]], interlace=True)
    out["png-rgb8-adam7-1x1.png"] = png_bytes(rgb[:1, :1], 2, 8, interlace=True)
    out["png-rgb8-adam7-3x2.png"] = png_bytes(rgb[:2, :3], 2, 8, interlace=True)
    out["png-gray4-adam7-5x9.png"] = png_bytes((gray[:9, :5] >> 4)[..., None], 0, 4, interlace=True)
    # DEFLATE block types and IDAT splitting.
    out["png-rgb8-stored-23x17.png"] = png_bytes(rgb, 2, 8, deflate="stored")
    out["png-rgb8-fixed-23x17.png"] = png_bytes(rgb, 2, 8, deflate="fixed")
    out["png-rgb8-7idat-23x17.png"] = png_bytes(rgb, 2, 8, idat_pieces=7)
    big = picture(300, 200, 12).astype(np.int64)
    out["png-rgb8-paeth-300x200.png"] = png_bytes(big, 2, 8, filters=lambda n: 4)
    out["png-rgb8-stored-300x200.png"] = png_bytes(big, 2, 8, deflate="stored", idat_pieces=3)
    out["png-gray1-1x1.png"] = png_bytes(np.ones((1, 1, 1), dtype=np.int64), 0, 1)
    return out


# ---------------------------------------------------------------------------------------------
# A baseline JPEG encoder for sampling factors Pillow cannot request.

STD_LUMA_Q = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                       14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                       49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]).reshape(8, 8)
ZIGZAG = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21,
          28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61,
          54, 47, 55, 62, 63]
# Annex K.3 tables: (counts of codes of length 1..16, symbols).
DC_TABLE = ([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], list(range(12)))
AC_COUNTS = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D]
AC_SYMBOLS = bytes.fromhex(
    "01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a"
    "434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9"
    "aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9fa")


def huffman_codes(counts, symbols):
    codes, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(counts[length - 1]):
            codes[symbols[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class BitWriter:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, value, length):
        for i in range(length - 1, -1, -1):
            self.acc = (self.acc << 1) | ((value >> i) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)
                self.acc, self.n = 0, 0

    def flush(self):
        while self.n:
            self.put(1, 1)
        return bytes(self.out)


def dct_matrix():
    m = np.zeros((8, 8))
    for k in range(8):
        for n in range(8):
            m[k, n] = (np.sqrt(1 / 8) if k == 0 else np.sqrt(2 / 8)) * np.cos((2 * n + 1) * k * np.pi / 16)
    return m


def encode_baseline(planes_full, sampling, quality_scale=1.0, interleaved=True):
    """planes_full: list of h x w uint8 arrays (Y, Cb, Cr or one gray); sampling: [(h, v)]."""
    H, W = planes_full[0].shape
    hmax, vmax = max(s[0] for s in sampling), max(s[1] for s in sampling)
    mcux, mcuy = -(-W // (8 * hmax)), -(-H // (8 * vmax))
    q = np.clip(np.round(STD_LUMA_Q * quality_scale), 1, 255).astype(int)
    D = dct_matrix()
    dc_codes, ac_codes = huffman_codes(*DC_TABLE), huffman_codes(AC_COUNTS, AC_SYMBOLS)
    comps = []
    for plane, (h, v) in zip(planes_full, sampling):
        cw, ch = -(-W * h // hmax), -(-H * v // vmax)
        # subsample by averaging, then pad by edge replication to whole MCUs
        sy, sx = vmax // v, hmax // h
        padded = np.pad(plane.astype(np.float64), ((0, (-H) % sy), (0, (-W) % sx)), mode="edge")
        small = padded.reshape(padded.shape[0] // sy, sy, padded.shape[1] // sx, sx).mean(axis=(1, 3))[:ch, :cw]
        full = np.pad(small, ((0, mcuy * v * 8 - ch), (0, mcux * h * 8 - cw)), mode="edge")
        comps.append((full, h, v, cw, ch))

    def block_bits(writer, block, pred):
        coef = np.round((D @ (block - 128) @ D.T) / q).astype(int).reshape(-1)[ZIGZAG]
        diff = coef[0] - pred
        size = int(abs(diff)).bit_length()
        writer.put(*dc_codes[size])
        if size:
            writer.put(diff if diff > 0 else diff + (1 << size) - 1, size)
        run = 0
        for k in range(1, 64):
            c = coef[k]
            if c == 0:
                run += 1
                continue
            while run > 15:
                writer.put(*ac_codes[0xF0])
                run -= 16
            size = int(abs(c)).bit_length()
            writer.put(*ac_codes[(run << 4) | size])
            writer.put(c if c > 0 else c + (1 << size) - 1, size)
            run = 0
        if run:
            writer.put(*ac_codes[0x00])
        return coef[0]

    def segment(marker, payload):
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    out = b"\xff\xd8" + segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    out += segment(0xDB, bytes([0]) + bytes(int(q.reshape(-1)[z]) for z in ZIGZAG))
    sof = struct.pack(">BHHB", 8, H, W, len(comps))
    for i, (_, h, v, _, _) in enumerate(comps):
        sof += bytes([i + 1, (h << 4) | v, 0])
    out += segment(0xC0, sof)
    out += segment(0xC4, bytes([0x00]) + bytes(DC_TABLE[0]) + bytes(DC_TABLE[1]))
    out += segment(0xC4, bytes([0x10]) + bytes(AC_COUNTS) + AC_SYMBOLS)
    groups = [list(range(len(comps)))] if interleaved else [[i] for i in range(len(comps))]
    for group in groups:
        sos = bytes([len(group)]) + b"".join(bytes([i + 1, 0x00]) for i in group) + bytes([0, 63, 0])
        writer, preds = BitWriter(), [0] * len(comps)
        if len(group) > 1:
            for my in range(mcuy):
                for mx in range(mcux):
                    for i in group:
                        full, h, v, _, _ = comps[i]
                        for by in range(v):
                            for bx in range(h):
                                y0, x0 = (my * v + by) * 8, (mx * h + bx) * 8
                                preds[i] = block_bits(writer, full[y0:y0 + 8, x0:x0 + 8], preds[i])
        else:
            i = group[0]
            full, h, v, cw, ch = comps[i]
            for by in range(-(-ch // 8)):
                for bx in range(-(-cw // 8)):
                    preds[i] = block_bits(writer, full[by * 8:by * 8 + 8, bx * 8:bx * 8 + 8], preds[i])
        out += segment(0xDA, sos) + writer.flush()
    return out + b"\xff\xd9"


def ycbcr(rgb):
    r, g, b = [rgb[..., i].astype(np.float64) for i in range(3)]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb = 128 - 0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 128 + 0.5 * r - 0.418688 * g - 0.081312 * b
    return [np.clip(np.round(c), 0, 255) for c in (y, cb, cr)]


def jpeg_variants():
    out = {}

    def pillow(name, img, **options):
        buf = io.BytesIO()
        img.save(buf, format="JPEG", **options)
        out[name] = buf.getvalue()

    rgb = Image.fromarray(picture(61, 45, 21), "RGB")
    pillow("jpeg-444-61x45.jpg", rgb, quality=90, subsampling=0)
    pillow("jpeg-422-61x45.jpg", rgb, quality=90, subsampling=1)
    pillow("jpeg-420-61x45.jpg", rgb, quality=90, subsampling=2)
    pillow("jpeg-420-q100-61x45.jpg", rgb, quality=100, subsampling=2)
    pillow("jpeg-420-q5-61x45.jpg", rgb, quality=5, subsampling=2)
    pillow("jpeg-420-optimized-61x45.jpg", rgb, quality=80, optimize=True)
    pillow("jpeg-progressive-420-61x45.jpg", rgb, quality=85, progressive=True)
    pillow("jpeg-progressive-444-61x45.jpg", rgb, quality=85, progressive=True, subsampling=0)
    pillow("jpeg-progressive-422-61x45.jpg", rgb, quality=85, progressive=True, subsampling=1)
    pillow("jpeg-gray-61x45.jpg", rgb.convert("L"), quality=90)
    pillow("jpeg-gray-progressive-61x45.jpg", rgb.convert("L"), quality=90, progressive=True)
    pillow("jpeg-restart-blocks-61x45.jpg", rgb, quality=90, restart_marker_blocks=3)
    pillow("jpeg-restart-rows-progressive-61x45.jpg", rgb, quality=90, progressive=True, restart_marker_rows=1)
    pillow("jpeg-cmyk-61x45.jpg", rgb.convert("CMYK"), quality=90)
    pillow("jpeg-rgb-61x45.jpg", rgb, quality=90, keep_rgb=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90; stb_image (and so this decoder) ignores it
    icc = b"\x00" * 64 + b"leap-ref test ICC profile bytes"
    pillow("jpeg-exif-icc-comment-61x45.jpg", rgb, quality=90, exif=exif.tobytes(), icc_profile=icc, comment=b"a comment")
    pillow("jpeg-420-17x9.jpg", Image.fromarray(picture(17, 9, 22), "RGB"), quality=90)
    pillow("jpeg-420-1x1.jpg", Image.fromarray(picture(1, 1, 23), "RGB"), quality=90)
    pillow("jpeg-420-1x33.jpg", Image.fromarray(picture(1, 33, 24), "RGB"), quality=90)
    pillow("jpeg-420-2x3.jpg", Image.fromarray(picture(2, 3, 25), "RGB"), quality=90)
    pillow("jpeg-422-3x1.jpg", Image.fromarray(picture(3, 1, 26), "RGB"), quality=90, subsampling=1)
    pillow("jpeg-progressive-420-33x17.jpg", Image.fromarray(picture(33, 17, 27), "RGB"), quality=75, progressive=True)
    big = Image.fromarray(picture(640, 480, 28), "RGB")
    pillow("jpeg-420-640x480.jpg", big, quality=85)
    pillow("jpeg-progressive-420-640x480.jpg", big, quality=85, progressive=True)

    px = picture(37, 21, 29)
    planes = ycbcr(px)
    out["jpeg-440-37x21.jpg"] = encode_baseline(planes, [(1, 2), (1, 1), (1, 1)])
    out["jpeg-411-37x21.jpg"] = encode_baseline(planes, [(4, 1), (1, 1), (1, 1)])
    out["jpeg-310-37x21.jpg"] = encode_baseline(planes, [(3, 1), (1, 1), (1, 1)])
    out["jpeg-420-noninterleaved-37x21.jpg"] = encode_baseline(planes, [(2, 2), (1, 1), (1, 1)], interleaved=False)
    out["jpeg-chroma-2x2-luma-1x1-37x21.jpg"] = encode_baseline(planes, [(1, 1), (2, 2), (2, 2)])
    out["jpeg-gray-2x2-37x21.jpg"] = encode_baseline(planes[:1], [(2, 2)])
    out["jpeg-242-37x21.jpg"] = encode_baseline(planes, [(2, 4), (1, 2), (1, 2)], quality_scale=0.5)
    return out


# ---------------------------------------------------------------------------------------------
# stb_image's RGB

STB_HARNESS = r"""
#define STB_IMAGE_IMPLEMENTATION
#include "stb_image.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n); fread(buf, 1, n, f); fclose(f);
    int w, h, c;
    unsigned char *rgb = stbi_load_from_memory(buf, (int) n, &w, &h, &c, 3);
    if (!rgb) { printf("error %s\n", stbi_failure_reason()); return 0; }
    FILE *o = fopen(argv[2], "wb"); fwrite(rgb, 1, (size_t) w * h * 3, o); fclose(o);
    printf("%d %d\n", w, h);
    return 0;
}
"""


def stb_hashes(outdir, names, header):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "stbdump.c")
        with open(src, "w") as f:
            f.write(STB_HARNESS)
        exe = os.path.join(tmp, "stbdump")
        subprocess.run(["cc", "-O2", "-I", os.path.dirname(os.path.abspath(header)), src, "-o", exe, "-lm"], check=True)
        result = {}
        for name in names:
            raw = os.path.join(tmp, "out.rgb")
            line = subprocess.run([exe, os.path.join(outdir, name), raw], capture_output=True, text=True,
                                  check=True).stdout.split()
            if line[0] == "error":
                sys.exit(f"stb_image cannot decode {name}: {' '.join(line[1:])}")
            with open(raw, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            result[name] = {"width": int(line[0]), "height": int(line[1]), "rgb_sha256": digest}
        return result


RESIZE_SOURCE = "png-rgb8-paeth-300x200.png"
RESIZE_SIZES = [(640, 427), (150, 100), (301, 199), (512, 32), (37, 211), (299, 1), (1, 200), (1, 1), (300, 97),
                (97, 200), (900, 600), (320, 224)]


def resize_reference(outdir):
    import PIL
    if int(PIL.__version__.split(".")[0]) >= 13:
        sys.exit("--resize-reference needs Pillow < 13 (llama.cpp's pass order); e.g. pip install 'pillow<13' in a venv")
    source = Image.open(os.path.join(outdir, RESIZE_SOURCE)).convert("RGB")
    cases = []
    for w, h in RESIZE_SIZES:
        digest = hashlib.sha256(source.resize((w, h), Image.BILINEAR).tobytes()).hexdigest()
        cases.append({"width": w, "height": h, "rgb_sha256": digest})
    doc = {"about": f"Pillow {PIL.__version__} Image.resize(size, BILINEAR) of {RESIZE_SOURCE}; made by "
                    "scripts/tools/make_image_variants.py --resize-reference",
           "source": RESIZE_SOURCE, "cases": cases}
    with open(os.path.join(outdir, "pillow_bilinear_resize.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote pillow_bilinear_resize.json ({len(cases)} sizes)")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    outdir, header = args[0], None
    if "--stb" in args:
        header = args[args.index("--stb") + 1]
    os.makedirs(outdir, exist_ok=True)
    if "--resize-reference" in args:
        resize_reference(outdir)
        return
    files = {**png_variants(), **jpeg_variants()}
    for name, data in files.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} images to {outdir}")
    if header:
        hashes = stb_hashes(outdir, sorted(files), header)
        doc = {
            "about": "RGB that stb_image v2.30 (llama.cpp's vendor/stb/stb_image.h, SSE2 on x86-64) decodes from each "
                     "image with stbi_load_from_memory(..., 3); made by scripts/tools/make_image_variants.py --stb",
            "images": hashes,
        }
        with open(os.path.join(outdir, "stb_image_rgb.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote stb_image_rgb.json ({len(hashes)} hashes)")


if __name__ == "__main__":
    main()
