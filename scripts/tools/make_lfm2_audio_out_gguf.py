#!/usr/bin/env python3
"""Write the speech-output siblings of the tiny LFM2-Audio fixture: a "vocoder" (the
depthformer that turns a backbone hidden state into one frame of 8 audio codes, and the
audio-code embeddings) and an audio "tokenizer" (the LFM2-based detokenizer that turns
codes into a 24 kHz waveform), with seeded random weights, laid out as llama.cpp's
LFM2.5-Audio work writes them:

  vocoder-lfm2-audio-tiny.gguf    tools/liquid-audio/convert_vocoder_to_gguf.py of
                                  llama.cpp PR #18641 (--outtype q4_0 by default): tensors
                                  keep their PyTorch names (bounded_attention -> attention),
                                  every 2-D non-bias tensor is Q4_0 (the real Q4_0 release),
                                  1-D F32; of the detokenizer only emb.emb.weight (that
                                  converter also copies the detokenizer's backbone, `lin` and
                                  `istft.window`, which llama.cpp reads from the tokenizer
                                  file; left out here to keep one copy); keys
                                  depthformer_n_layer and depthformer_n_embd; the
                                  architecture string is the converter's sentence.
  tokenizer-lfm2-audio-tiny.gguf  convert_hf_to_gguf.py's LFM25AudioTokenizer (llama.cpp
                                  PR #19687): architecture lfm2, no vocabulary, the
                                  detokenizer's LFM2 backbone under llama.cpp's lfm2 tensor
                                  names, the output projection `lin` as dense_2, keys
                                  lfm2.embedding_length_out (1282) and
                                  lfm2.attention.sliding_window; F16 matrices, F32 norms and
                                  conv kernels (an --outtype f16 conversion).

The language model is the existing lfm2-audio-tiny.gguf (d=128); these files fit it.
Shapes kept from the real model (the format and the reference code fix them): 8 codebooks,
2049 codes per codebook in the depthformer and in the backbone's audio embedding (2048
codes + the end-of-audio code 2048), 2048 codes per codebook in the detokenizer's
embedding, 32 query heads and 8 KV heads in the depthformer, a 1282-wide detokenizer output
(641 log-magnitudes + 641 phases of a 1280-point STFT, hop 320), the detokenizer's 6x
upsampling and sliding window 30. Shrunk: depthformer width 1024 -> 128 (head size 32 ->
4), 6 -> 2 layers, FFN 2816 -> 512; detokenizer width 512 -> 64, 8 -> 3 layers (conv,
sliding attention, conv), FFN 128, 4 heads / 2 KV heads, a token embedding of 8 rows
(unused by the detokenizer, which takes embeddings).

Deliberate fixture choice: the end-of-audio row (code 2048) of codebook 0's depth embedding
(tied to its output head) is scaled by --eos-scale, so that greedy decoding sometimes ends
an audio segment and the goldens cover that transition.

With --lm lfm2-audio-tiny.gguf it also writes lfm2-audio-out-tiny.gguf, the language model of
the speech-out goldens: a byte copy of --lm in which only the token_embd rows (Q4_0, tied to
the output head) of <|audio_start|> (x3), <|text_end|> (x2) and <|im_end|> (x2) are scaled
(--lm-row-scales): each block's f16 scale times the factor, rounded to f16; the 4-bit codes
kept. The unchanged model never greedily emits <|audio_start|> or <|text_end|>, so TTS
would never enter audio and interleaved generation never set text_done.

--preset lfm2.5-audio-1.5b writes the same two files in LFM2.5-Audio-1.5B's real shapes, for
speed measurements only (scripts/bench-speech.sh): vocoder-lfm2.5-audio-1.5b-shape.gguf
(depthformer 1024 x 6 layers, 32 / 8 heads, FFN 2816, for a 2048-wide language model: Q4_0,
as the real Q4_0 release) and tokenizer-lfm2.5-audio-1.5b-shape.gguf (detokenizer width 512,
8 layers conv conv attn conv attn conv attn conv, 16 / 8 heads, FFN 2304, token embedding
65536 rows: F16). The shapes are liquid-audio's DepthformerConfig defaults and the
detokenizer config of the model's checkpoint (as mlx-audio's port reads it). Its end-of-audio
row of every codebook is zero (--eos-scale 0): its logit is then exactly 0 against the random
others, so a timed reply never ends its audio early (codebook 0) nor picks a code that has no
detokenizer row (codebooks 1-7). The language model to go with them is
make_lfm2_gguf.py --preset audio-1.5b.

Same arguments give byte-identical files. Requires: pip install gguf==0.19.0 numpy
Usage: make_lfm2_audio_out_gguf.py --outdir DIR [--lm lfm2-audio-tiny.gguf]
                                   [--vocoder-type q4_0|f16|f32] [--only vocoder|tokenizer|lm]
       make_lfm2_audio_out_gguf.py --preset lfm2.5-audio-1.5b --outdir DIR
"""
import argparse
import os

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType

N_EMBD_LM = 128          # lfm2-audio-tiny.gguf's embedding_length
CODEBOOKS = 8
AUDIO_VOCAB = 2049       # 2048 codes + end-of-audio (2048)
DETOK_VOCAB = 2048       # the detokenizer never sees code 2048
DEPTH = dict(layers=2, dim=128, heads=32, kv_heads=8, ff=512)
DETOK = dict(dim=64, layers=["conv", "sliding_attention", "conv"], heads=4, kv_heads=2, ff=128,
             vocab=8, sliding_window=30, n_fft=1280, hop=320, out=1282, conv_L=3,
             rope_theta=1000000.0, eps=1e-5)
# LFM2.5-Audio-1.5B's real shapes (--preset lfm2.5-audio-1.5b)
REAL = dict(lm=2048,
            depth=dict(layers=6, dim=1024, heads=32, kv_heads=8, ff=2816),
            detok=dict(dim=512, layers=["conv", "conv", "sliding_attention", "conv", "sliding_attention", "conv",
                                        "sliding_attention", "conv"],
                       heads=16, kv_heads=8, ff=2304, vocab=65536, sliding_window=30, n_fft=1280, hop=320,
                       out=1282, conv_L=3, rope_theta=1000000.0, eps=1e-5))
VOCODER_ARCH = "this model cannot be used as LLM, use it via --model-vocoder in TTS examples"


def glu_ff(dim):
    """liquid-audio's GLU width for ff_dim = 4*dim, SwiGLU, multiple_of 256."""
    ff = int(2 * (4 * dim) / 3)
    return 256 * ((ff + 255) // 256)


assert glu_ff(DEPTH["dim"]) == DEPTH["ff"]


class Writer:
    """Adds tensors the way the converters do: 2-D non-bias weights in `mtype`."""

    def __init__(self, w, mtype):
        self.w, self.mtype = w, mtype

    def add(self, name, arr, matrix=None):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        is_matrix = arr.ndim == 2 and not name.endswith(".bias") if matrix is None else matrix
        if ".conv.weight" in name:
            is_matrix = False
        t = self.mtype if is_matrix else Q.F32
        if t == Q.F32:
            self.w.add_tensor(name, arr)
        elif t == Q.F16:
            self.w.add_tensor(name, arr.astype(np.float16))
        else:
            self.w.add_tensor(name, gguf.quants.quantize(arr, t), raw_dtype=t)


def detok_weights(rng):
    """The detokenizer (liquid_audio.detokenizer.LFM2AudioDetokenizer) in PyTorch names."""
    d, ff, hd = DETOK["dim"], DETOK["ff"], DETOK["dim"] // DETOK["heads"]
    nkv = DETOK["kv_heads"]

    def randn(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    t = {}
    t["emb.emb.weight"] = randn((CODEBOOKS * DETOK_VOCAB, d), 1.0)
    t["lfm.embed_tokens.weight"] = randn((DETOK["vocab"], d), 1.0)
    for i, kind in enumerate(DETOK["layers"]):
        b = f"lfm.layers.{i}."
        t[b + "operator_norm.weight"] = 1.0 + randn(d, 0.1)
        t[b + "ffn_norm.weight"] = 1.0 + randn(d, 0.1)
        if kind == "conv":
            t[b + "conv.conv.weight"] = randn((d, 1, DETOK["conv_L"]), 0.5)
            t[b + "conv.in_proj.weight"] = randn((3 * d, d), d ** -0.5)
            t[b + "conv.out_proj.weight"] = randn((d, d), d ** -0.5)
        else:
            t[b + "self_attn.q_proj.weight"] = randn((d, d), d ** -0.5)
            t[b + "self_attn.k_proj.weight"] = randn((nkv * hd, d), d ** -0.5)
            t[b + "self_attn.v_proj.weight"] = randn((nkv * hd, d), d ** -0.5)
            t[b + "self_attn.out_proj.weight"] = randn((d, d), d ** -0.5)
            t[b + "self_attn.q_layernorm.weight"] = 1.0 + randn(hd, 0.1)
            t[b + "self_attn.k_layernorm.weight"] = 1.0 + randn(hd, 0.1)
        t[b + "feed_forward.w1.weight"] = randn((ff, d), d ** -0.5)
        t[b + "feed_forward.w3.weight"] = randn((ff, d), d ** -0.5)
        t[b + "feed_forward.w2.weight"] = randn((d, ff), ff ** -0.5)
    t["lfm.embedding_norm.weight"] = 1.0 + randn(d, 0.1)
    t["lin.weight"] = randn((DETOK["out"], d), 0.7 * d ** -0.5)
    t["lin.bias"] = randn(DETOK["out"], 0.1)
    # torch.hann_window(1280) (periodic), as float32
    n = np.arange(DETOK["n_fft"], dtype=np.float64)
    t["istft.window"] = (0.5 - 0.5 * np.cos(2 * np.pi * n / DETOK["n_fft"])).astype(np.float32)
    return t


def decoder_weights(rng, eos_scale, eos_every_codebook=False):
    """depthformer, depth_linear, depth_embeddings, audio_embedding in PyTorch names."""
    D, L, H, KV, ff = DEPTH["dim"], DEPTH["layers"], DEPTH["heads"], DEPTH["kv_heads"], DEPTH["ff"]
    hd = D // H

    def randn(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    t = {}
    for i in range(L):
        b = f"depthformer.layers.{i}."
        t[b + "operator_norm.weight"] = 1.0 + randn(D, 0.1)
        t[b + "operator.qkv_proj.weight"] = randn((D + 2 * KV * hd, D), D ** -0.5)
        t[b + "operator.bounded_attention.q_layernorm.weight"] = 1.0 + randn(hd, 0.1)
        t[b + "operator.bounded_attention.k_layernorm.weight"] = 1.0 + randn(hd, 0.1)
        t[b + "operator.out_proj.weight"] = randn((D, D), 0.5 * D ** -0.5)
        t[b + "ffn_norm.weight"] = 1.0 + randn(D, 0.1)
        t[b + "feed_forward.w1.weight"] = randn((ff, D), D ** -0.5)
        t[b + "feed_forward.w3.weight"] = randn((ff, D), D ** -0.5)
        t[b + "feed_forward.w2.weight"] = randn((D, ff), 0.5 * ff ** -0.5)
    t["depth_linear.weight"] = randn((CODEBOOKS * D, N_EMBD_LM), N_EMBD_LM ** -0.5)
    t["depth_linear.bias"] = randn(CODEBOOKS * D, 0.1)
    for c in range(CODEBOOKS):
        e = randn((AUDIO_VOCAB, D), 0.5)
        if c == 0 or eos_every_codebook:
            e[AUDIO_VOCAB - 1] *= np.float32(eos_scale)
        t[f"depth_embeddings.{c}.embedding.weight"] = e
        t[f"depth_embeddings.{c}.embedding_norm.weight"] = 1.0 + randn(D, 0.1)
        t[f"depth_embeddings.{c}.to_logits.weight"] = e          # tied (depthformer.tie)
    e = randn((CODEBOOKS * AUDIO_VOCAB, N_EMBD_LM), 0.2)
    t["audio_embedding.embedding.weight"] = e
    t["audio_embedding.embedding_norm.weight"] = 1.0 + randn(N_EMBD_LM, 0.1)
    t["audio_embedding.to_logits.weight"] = e                    # tied (tie_audio_embeddings)
    return t


def write_vocoder(path, dec, det, mtype):
    w = gguf.GGUFWriter(path, VOCODER_ARCH)
    w.add_uint32("depthformer_n_layer", DEPTH["layers"])
    w.add_uint32("depthformer_n_embd", DEPTH["dim"])
    wr = Writer(w, mtype)
    # the converter adds (detokenizer | decoder) in that dict order; of the detokenizer only
    # its code embedding: its backbone, `lin` and `istft.window` live in the tokenizer file
    for name, arr in [("emb.emb.weight", det["emb.emb.weight"])] + list(dec.items()):
        if ".conv.weight" in name:
            arr = arr.squeeze(1)
        wr.add(name.replace("bounded_attention", "attention"), arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_tokenizer(path, det):
    d, layers = DETOK["dim"], DETOK["layers"]
    w = gguf.GGUFWriter(path, "lfm2")
    w.add_name("lfm2-audio-synthetic-tiny-detokenizer" if d == 64 else "lfm2.5-audio-synthetic-1.5b-shape-detokenizer")
    w.add_block_count(len(layers))
    w.add_context_length(128000)
    w.add_embedding_length(d)
    w.add_feed_forward_length(DETOK["ff"])
    w.add_head_count(DETOK["heads"])
    w.add_head_count_kv([0 if k == "conv" else DETOK["kv_heads"] for k in layers])
    w.add_rope_freq_base(DETOK["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(DETOK["vocab"])
    w.add_shortconv_l_cache(DETOK["conv_L"])
    w.add_layer_norm_rms_eps(DETOK["eps"])
    w.add_sliding_window(DETOK["sliding_window"])
    w.add_embedding_length_out(DETOK["out"])
    w.add_tokenizer_model("none")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    wr = Writer(w, Q.F16)
    names = {"operator_norm": "attn_norm", "ffn_norm": "ffn_norm",
             "conv.conv": "shortconv.conv", "conv.in_proj": "shortconv.in_proj",
             "conv.out_proj": "shortconv.out_proj",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.out_proj": "attn_output", "self_attn.q_layernorm": "attn_q_norm",
             "self_attn.k_layernorm": "attn_k_norm",
             "feed_forward.w1": "ffn_gate", "feed_forward.w3": "ffn_up", "feed_forward.w2": "ffn_down"}
    wr.add("token_embd.weight", det["lfm.embed_tokens.weight"])
    for i in range(len(layers)):
        for k, v in det.items():
            pre = f"lfm.layers.{i}."
            if not k.startswith(pre):
                continue
            stem = k[len(pre):].rsplit(".", 1)[0]
            arr = v.squeeze(1) if stem == "conv.conv" else v
            wr.add(f"blk.{i}.{names[stem]}.weight", arr)
    wr.add("token_embd_norm.weight", det["lfm.embedding_norm.weight"])
    wr.add("dense_2.weight", det["lin.weight"])
    wr.add("dense_2.bias", det["lin.bias"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LM_IN_SHA256 = "0eb39e2f42b9b1ac1a68d21a2030967f224e30f4f04999e50af0b411c56c2e88"
LM_ROW_SCALES = "<|audio_start|>=3,<|text_end|>=2,<|im_end|>=2"


def write_speech_lm(src, path, scales):
    """lfm2-audio-out-tiny.gguf: a byte copy of lfm2-audio-tiny.gguf (`src`) in which only the
    rows of the named tokens in token_embd.weight (Q4_0, tied to the output head) change:
    each of the row's four Q4_0 block scales (the f16 `d` that starts each 18-byte block) is
    multiplied by the token's factor in float32 and rounded to f16; the 4-bit codes stay.
    So each such row is its old value times the factor (to f16 rounding of the block scale),
    as output logit and, the embedding being tied, as input embedding. Everything else,
    metadata included, is byte-identical."""
    import hashlib
    data = bytearray(open(src, "rb").read())
    sha = hashlib.sha256(data).hexdigest()
    if sha != LM_IN_SHA256:
        print(f"warning: {src} has sha256 {sha}, not the fixture's {LM_IN_SHA256}")
    r = gguf.GGUFReader(src)
    t = next(t for t in r.tensors if t.name == "token_embd.weight")
    assert t.tensor_type == Q.Q4_0, t.tensor_type
    n_embd, n_vocab = int(t.shape[0]), int(t.shape[1])
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    assert len(tokens) == n_vocab
    bs, ts = gguf.GGML_QUANT_SIZES[Q.Q4_0]              # 32 values in 18 bytes
    row_bytes = n_embd // bs * ts
    base = int(t.data_offset)
    assert bytes(data[base:base + row_bytes]) == bytes(np.asarray(t.data).reshape(-1)[:row_bytes].view(np.uint8))
    for spec in scales.split(","):
        name, k = spec.rsplit("=", 1)
        tid = tokens.index(name)
        for b in range(n_embd // bs):
            o = base + tid * row_bytes + b * ts
            d = np.frombuffer(bytes(data[o:o + 2]), dtype="<f2")[0]
            data[o:o + 2] = np.array([np.float32(d) * np.float32(float(k))], dtype="<f2").tobytes()
    with open(path, "wb") as fo:
        fo.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--lm", help="lfm2-audio-tiny.gguf: also write lfm2-audio-out-tiny.gguf from it")
    ap.add_argument("--lm-row-scales", default=LM_ROW_SCALES,
                    help="token=factor,...: token_embd rows scaled in lfm2-audio-out-tiny.gguf")
    ap.add_argument("--seed", type=int, default=4242, help="depthformer and audio embeddings")
    ap.add_argument("--detok-seed", type=int, default=4343, help="detokenizer")
    ap.add_argument("--eos-scale", type=float, default=3.0,
                    help="norm factor of codebook 0's end-of-audio row")
    ap.add_argument("--vocoder-type", choices=["q4_0", "q8_0", "f16", "f32"], default="q4_0",
                    help="f32 stores the Q4_0 values widened (a stored-weights reference)")
    ap.add_argument("--only", choices=["vocoder", "tokenizer", "lm"])
    ap.add_argument("--preset", choices=["tiny", "lfm2.5-audio-1.5b"], default="tiny")
    a = ap.parse_args()

    label = "lfm2-audio-tiny"
    if a.preset == "lfm2.5-audio-1.5b":
        global N_EMBD_LM, DEPTH, DETOK
        N_EMBD_LM, DEPTH, DETOK = REAL["lm"], REAL["depth"], REAL["detok"]
        assert glu_ff(DEPTH["dim"]) == DEPTH["ff"]
        label = "lfm2.5-audio-1.5b-shape"
        if a.lm:
            ap.error("--preset lfm2.5-audio-1.5b writes no language model: use make_lfm2_gguf.py --preset audio-1.5b")
        if "--eos-scale" not in " ".join(os.sys.argv):
            a.eos_scale = 0.0

    os.makedirs(a.outdir, exist_ok=True)
    if a.lm:
        write_speech_lm(a.lm, os.path.join(a.outdir, "lfm2-audio-out-tiny.gguf"), a.lm_row_scales)
    elif a.only == "lm":
        ap.error("--only lm needs --lm")
    if a.only == "lm":
        return
    dec = decoder_weights(np.random.default_rng(a.seed), a.eos_scale, eos_every_codebook=a.preset != "tiny")
    det = detok_weights(np.random.default_rng(a.detok_seed))
    if a.vocoder_type == "f32":
        # the exact values of the Q4_0 file, stored as F32
        for t in (dec, det):
            for k, v in t.items():
                if v.ndim == 2 and ".conv." not in k:
                    t[k] = gguf.quants.dequantize(gguf.quants.quantize(v, Q.Q4_0), Q.Q4_0).reshape(v.shape)
    mtype = {"q4_0": Q.Q4_0, "q8_0": Q.Q8_0, "f16": Q.F16, "f32": Q.F32}[a.vocoder_type]
    suffix = "" if a.vocoder_type == "q4_0" else "-" + a.vocoder_type
    if a.only != "tokenizer":
        write_vocoder(os.path.join(a.outdir, f"vocoder-{label}{suffix}.gguf"), dec, det, mtype)
    if a.only != "vocoder":
        write_tokenizer(os.path.join(a.outdir, f"tokenizer-{label}.gguf"), det)


if __name__ == "__main__":
    main()
