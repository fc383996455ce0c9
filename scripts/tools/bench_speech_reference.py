#!/usr/bin/env python3
"""Speech-out speed of LiquidAI's reference (liquid-audio 1.3.0, PyTorch, CPU) at LFM2.5-Audio-1.5B's shapes.

The reference side of issue 43's side-by-side benchmark (item 8). It runs in its own venv, never
in tests and never in CI; nothing is downloaded (random weights, random prompt ids):

    ~/.pyenv/versions/3.12.1/bin/python -m venv /work/ref/la-venv
    /work/ref/la-venv/bin/pip install liquid-audio==1.3.0     # pulls torch, torchaudio, transformers
    flock /tmp/leap-build.lock /work/ref/la-venv/bin/python scripts/tools/bench_speech_reference.py \\
        [--threads 2] [--prompt-tokens 40] [--frames 125] [--rounds 1] [--warmup] [--seed 0] \\
        [--dtype bfloat16|float32] [--audio-temperature 0.8] [--audio-top-k 64] [--greedy]

It prints one JSON object on stdout (progress goes to stderr).

What is built. `LFM2AudioModel(LFM2AudioConfig(...))` and `LFM2AudioDetokenizer(Lfm2Config(...))`,
constructed from config objects exactly as `LFM2AudioModel.from_pretrained` and
`LFM2AudioProcessor.audio_detokenizer` construct them, but with the constructors' own seeded
random initialisation instead of a checkpoint (`torch.manual_seed(--seed)` first). The numbers of
the configs are below (`LFM_CONFIG`, `DETOKENIZER_CONFIG`, `AUDIO_CONFIG`), each with its source.
As in `from_pretrained` without flash-attn, the backbone uses `set_attn_implementation("sdpa")`.
Eval mode, `torch.no_grad` (the generation loop and `decode` are decorated with it).

dtype. `LFM2AudioModel.from_pretrained` defaults to bfloat16 on every device (and `ChatState` to
bfloat16 inputs), so --dtype defaults to bfloat16: the reference as a user runs it. On this kind of
CPU (AVX512-BF16) it is also the faster one, about 2.5x float32 per frame (it reads half the bytes).
--dtype float32 times the dtype the goldens in shared/fixtures/golden/audio-out were made with.
The detokenizer is float32 either way: `LFM2AudioProcessor.audio_detokenizer` builds it in the
default dtype and never casts it.

What is timed, per round (the sequential TTS path of the package README's TTS example):

1. `prefill_seconds`: from calling `LFM2AudioModel.generate_sequential(**inputs, max_new_tokens=1+F,
   audio_temperature, audio_top_k)` to its first yield. Inside: `_prefill` (the prompt's token
   embeddings, and the conformer on the empty audio-in batch), the first `self.lfm(...)` call over
   the whole prompt (P positions, new cache), the tied text head on the last hidden state and
   `_sample_text_token` (greedy: the README passes no text temperature).
   The prompt is P random ids in the shape of ChatState's TTS prompt: `<|startoftext|>`,
   `<|im_start|>system\\n`, the voice sentence, `<|im_end|>\\n<|im_start|>user\\n`, the text,
   `<|im_end|>\\n<|im_start|>assistant\\n` (special ids 1, 6, 7 of the real vocabulary at their
   places; the words random, since LFM2's tokenizer is not available offline). With the real
   tokenizer `Perform TTS. Use the UK female voice.` plus a one-sentence text is about 40 tokens.
2. F audio frames: each is one step of the same loop, in `generate_sequential`'s AUDIO_OUT branch,
   unchanged: `self.audio_embedding(prev_codes + self.codebook_offsets).sum(0)` fed back (the first
   audio step feeds `embed_tokens(<|audio_start|>)`), one `self.lfm(...)` step with the cache, then
   `_sample_audio_frame(last hidden state, temperature, top_k)`: `depth_linear`, and for each of the
   8 codebooks `depthformer.forward_cached` with a fresh per-frame cache, `depth_embeddings[i]
   .get_logits`, top-k/temperature sampling (`torch.multinomial`), `depth_embeddings[i](code)` for the
   next codebook. `mean_frame_seconds` is (time from the first yield to the generator's end) / F, so
   it includes the last frame's embedding, which the loop computes before it stops. It is broken
   down into `backbone_step_seconds_mean` (the `self.lfm(...)` call), `depthformer_frame_seconds_mean`
   (`_sample_audio_frame`: depth_linear, 8 depthformer passes, sampling) and
   `other_frame_seconds_mean` (the audio embedding fed back, and the loop), by wrappers that only
   read the clock around the reference's own calls.
3. `detokenizer_seconds`: `LFM2AudioProcessor.decode(codes)` on the (1, 8, F) stack of the frames,
   once, as the README does after generation (`torch.stack(audio_out[:-1], 1).unsqueeze(0)`; here
   there is no end-of-audio frame to drop). `decode` is the package's own, called on a processor
   object whose `_audio_detokenizer` is the random one (the property would call `.cuda()`).

Two interventions, and only these, so that random weights give exactly F frames:
- The single text step returns `<|audio_start|>` (id 128): `_sample_text_token` is wrapped; the
  original still runs (logits and argmax are computed and timed), its token is replaced. A real
  TTS turn enters audio through the same token (any text tokens before it are not timed here).
- Code 2048 (end of audio) is masked to -inf in every codebook's logits (each `depth_embeddings[i]
  .get_logits` is wrapped), so no frame ends the audio and `decode`'s range check (codes < 2048)
  holds. The real turn would end with one end-of-audio frame and a `<|im_end|>` text step (two more
  backbone steps), which are not timed here.

Time to first audio: liquid-audio 1.3.0 has no streaming path for the LFM2 detokenizer:
`LFM2AudioDetokenizer.forward` takes the whole code sequence (use_cache=False) and the README
decodes once after generation, so the first sample is delivered after prefill + all F frames +
decode (`first_audio_mode` says so). (The package's gradio demo streams per frame, but through the
older Mimi codec, `proc.mimi.decode` in `mimi.streaming(1)`, not through the LFM2 detokenizer.)
`detokenizer_one_frame_seconds` (decode of a single frame, measured once after the rounds, not
part of any total) is given as a lower bound for a per-frame streaming decode.

Samples per frame: the detokenizer upsamples each frame to 6 rows, and the ISTFT (n_fft 1280,
hop 320, "same" padding) gives 320 samples per row: 1920 samples = 80 ms at 24 kHz. The script
checks it on the decoded waveform (`samples_per_frame`).

The real-time factor is total compute seconds / seconds of audio, with total = prefill + frames +
detokenizer (model construction and the warmup are not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from importlib import metadata

import torch
from transformers import Lfm2Config

from liquid_audio import LFM2AudioModel, LFM2AudioProcessor, LFMModality
from liquid_audio.detokenizer import LFM2AudioDetokenizer
from liquid_audio.model.conformer.encoder import ConformerEncoderConfig
from liquid_audio.model.lfm2_audio import DepthformerConfig, LFM2AudioConfig
from liquid_audio.processor import PreprocessorConfig

SAMPLE_RATE = 24_000
AUDIO_START = 128  # <|audio_start|>, hard-coded in generate_sequential
EOA = 2048  # end-of-audio code (LFM2AudioModel.audio_vocab_size - 1)
# Special ids of the real LFM2 vocabulary (<|startoftext|>, <|im_start|>, <|im_end|>); the
# prompt's words are random ids above the first 512 (the control and byte range).
BOS, IM_START, IM_END = 1, 6, 7

# The backbone: LFM2-1.2B's config.json (LiquidAI/LFM2-1.2B; LFM2.5-1.2B, the base of
# LFM2.5-Audio-1.5B, has the same shapes), as liquid-audio passes it to transformers'
# Lfm2Config (the "lfm" entry of the audio model's config.json). Effective FFN width:
# block_auto_adjust_ff_dim gives 256 * ceil(int(2 * 12288 / 3) / 256) = 8192 (Lfm2MLP).
LFM_CONFIG = dict(
    vocab_size=65536,
    hidden_size=2048,
    intermediate_size=12288,  # block_ff_dim; 8192 after the adjustment
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    full_attn_idxs=[2, 5, 8, 10, 12, 14],  # 6 GQA layers, 10 short-conv layers
    max_position_embeddings=128_000,
    norm_eps=1e-5,
    conv_L_cache=3,
    conv_bias=False,
    block_multiple_of=256,
    block_ffn_dim_multiplier=1.0,
    block_auto_adjust_ff_dim=True,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=7,
    pad_token_id=0,
    # rope_theta 1e6: transformers' Lfm2Config default (default_theta), as in LFM2's config.
)

# The audio detokenizer (LFM2.5-Audio-1.5B's audio_detokenizer/config.json, as read by
# LFM2AudioProcessor.audio_detokenizer, which renames "sliding_attention" to "full_attention"
# and LFM2AudioDetokenizer.forward applies the 30-row window as a mask). Width 512 is fixed by
# LFM2AudioDetokenizer itself (FusedEmbedding(512), Linear(512, 1282)); 8 layers in the pattern
# below, 16 query / 8 KV heads (head size 32), FFN 2304, rope 1e6: the shapes that the public
# ports of this checkpoint load its weights with (mlx-audio's lfm_audio DetokenizerConfig:
# "intermediate_size 2304 from weights", layer_types below; llama.cpp's LFM25AudioTokenizer
# conversion keeps them). embed_tokens is never used by the detokenizer (it embeds codes with
# FusedEmbedding); its row count only costs memory.
DETOKENIZER_LAYER_TYPES = [
    "conv", "conv", "sliding_attention", "conv", "sliding_attention", "conv", "sliding_attention", "conv",
]
DETOKENIZER_CONFIG = dict(
    vocab_size=65536,
    hidden_size=512,
    intermediate_size=2304,
    block_auto_adjust_ff_dim=False,
    num_hidden_layers=8,
    num_attention_heads=16,
    num_key_value_heads=8,
    max_position_embeddings=4096,
    norm_eps=1e-5,
    conv_L_cache=3,
    conv_bias=False,
    sliding_window=30,
)

# LFM2.5-Audio-1.5B's config.json outside "lfm" (as LFM2AudioModel.from_pretrained reads it):
# depthformer 6 layers x 1024, tied (the vocoder GGUF's depthformer_n_layer / depthformer_n_embd,
# llama.cpp's decoder hard-codes 6 x 1024 with 32 / 8 heads); 8 codebooks of 2049 codes (fixed by
# LFM2AudioModel.audio_vocab_size); interleaving 6 / 12; the loss weighting (unused at inference)
# and the untied audio embedding as mlx-audio's LFM2AudioConfig records them; the conformer
# encoder (FastConformer, 17 layers x 512, 8x subsampling) and its mel preprocessor from the same
# source. The encoder only runs on the empty audio-in batch of a text prompt.
AUDIO_CONFIG = dict(
    architectures=["LFM2AudioModel"],
    codebooks=8,
    tie_audio_embeddings=False,
    semantic_codebook_factor=100.0,
    codebook_weight="log",
    interleaved_n_text=6,
    interleaved_n_audio=12,
)
DEPTHFORMER_CONFIG = dict(layers=6, dim=1024, tie=True)
ENCODER_CONFIG = dict(
    feat_in=128, feat_out=-1, n_layers=17, d_model=512, subsampling="dw_striding",
    subsampling_factor=8, subsampling_conv_channels=256, causal_downsampling=False,
    reduction=None, reduction_position=None, reduction_factor=1, ff_expansion_factor=4,
    self_attention_model="rel_pos", n_heads=8, att_context_size=[-1, -1], xscaling=False,
    untie_biases=True, pos_emb_max_len=5000, conv_kernel_size=9, conv_norm_type="batch_norm",
    conv_context_size=None, dropout=0.1, dropout_pre_encoder=0.1, dropout_emb=0.0, dropout_att=0.1,
)
PREPROCESSOR_CONFIG = dict(
    sample_rate=16000, normalize="per_feature", window_size=0.025, window_stride=0.01,
    window="hann", features=128, n_fft=512, log=True, frame_splicing=1, dither=1e-5,
    pad_to=0, pad_value=0.0,
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_model(dtype: torch.dtype) -> LFM2AudioModel:
    conf = LFM2AudioConfig(
        lfm=Lfm2Config(**LFM_CONFIG),
        encoder=ConformerEncoderConfig(**ENCODER_CONFIG),
        depthformer=DepthformerConfig(**DEPTHFORMER_CONFIG),
        preprocessor=PreprocessorConfig(**PREPROCESSOR_CONFIG),
        **AUDIO_CONFIG,
    )
    model = LFM2AudioModel(conf).to(dtype=dtype)
    model.lfm.set_attn_implementation("sdpa")  # from_pretrained's choice without flash_attn
    return model.eval()


def build_detokenizer() -> LFM2AudioDetokenizer:
    config = Lfm2Config(
        layer_types=[t.replace("sliding_attention", "full_attention") for t in DETOKENIZER_LAYER_TYPES],
        **DETOKENIZER_CONFIG,
    )
    return LFM2AudioDetokenizer(config).eval()


def reference_processor(detok: LFM2AudioDetokenizer) -> LFM2AudioProcessor:
    """An LFM2AudioProcessor whose decode() runs `detok` (no tokenizer, no files, no .cuda())."""
    proc = LFM2AudioProcessor.__new__(LFM2AudioProcessor)
    proc.name = "random-init"
    proc.detokenizer_path = "random-init"
    proc.mimi_weights_path = None
    proc._mimi = None
    proc._audio_detokenizer = detok
    return proc


def tts_prompt(n_tokens: int, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """ChatState's fields for a text-only TTS prompt of exactly n_tokens ids."""
    g = torch.Generator().manual_seed(seed + 1)
    # <|startoftext|> <|im_start|>system\n VOICE <|im_end|>\n <|im_start|>user\n TEXT <|im_end|>\n <|im_start|>assistant\n
    fixed = 1 + 3 + 2 + 3 + 2 + 3  # specials, role words and "\n" pieces
    voice = 9  # `Perform TTS. Use the UK female voice.` is about 9 tokens
    if n_tokens < fixed + voice + 1:
        raise SystemExit(f"--prompt-tokens must be at least {fixed + voice + 1}")
    words = lambda n: torch.randint(512, 65536, (n,), generator=g).tolist()  # noqa: E731
    nl = 10
    ids = [BOS, IM_START, *words(1), nl, *words(voice), IM_END, nl, IM_START, *words(1), nl]
    ids += words(n_tokens - fixed - voice)
    ids += [IM_END, nl, IM_START, *words(1), nl]
    assert len(ids) == n_tokens, (len(ids), n_tokens)
    text = torch.tensor([ids], dtype=torch.long)
    return dict(
        text=text,
        audio_in=torch.empty((128, 0), dtype=dtype),
        audio_in_lens=torch.empty((0,), dtype=torch.long),
        audio_out=text.new_empty((8, 0)),
        modality_flag=torch.full_like(text, LFMModality.TEXT),
    )


def install_forcing(model: LFM2AudioModel) -> None:
    """The two interventions of the docstring: first text token <|audio_start|>, code 2048 masked."""
    original_text = model._sample_text_token

    def forced_text(logits, *, temperature=None, top_k=None):
        token = original_text(logits, temperature=temperature, top_k=top_k)
        return torch.full_like(token, AUDIO_START)

    model._sample_text_token = forced_text  # type: ignore[method-assign]

    for emb in model.depth_embeddings:
        original_logits = emb.get_logits

        def masked(embeddings, _orig=original_logits):
            logits = _orig(embeddings)
            logits[..., EOA] = float("-inf")
            return logits

        emb.get_logits = masked  # type: ignore[method-assign]


class PartTimer:
    """Wall time of each call of model.lfm (backbone) and model._sample_audio_frame (depthformer).

    Instance-level wrappers around the reference's own callables; they only read the clock, so
    the breakdown costs two perf_counter() calls per part and step.
    """

    def __init__(self, model: LFM2AudioModel) -> None:
        self.backbone: list[float] = []
        self.depthformer: list[float] = []
        lfm_forward = model.lfm.forward
        sample_frame = model._sample_audio_frame

        def timed_lfm(*a, **kw):
            t = time.perf_counter()
            out = lfm_forward(*a, **kw)
            self.backbone.append(time.perf_counter() - t)
            return out

        def timed_frame(*a, **kw):
            t = time.perf_counter()
            out = sample_frame(*a, **kw)
            self.depthformer.append(time.perf_counter() - t)
            return out

        model.lfm.forward = timed_lfm  # type: ignore[method-assign]
        model._sample_audio_frame = timed_frame  # type: ignore[method-assign]

    def reset(self) -> None:
        self.backbone.clear()
        self.depthformer.clear()


def one_round(model, proc, timer, inputs, frames, temperature, top_k, seed) -> dict:
    torch.manual_seed(seed)
    timer.reset()
    t0 = time.perf_counter()
    gen = model.generate_sequential(
        **inputs, max_new_tokens=1 + frames, audio_temperature=temperature, audio_top_k=top_k
    )
    first = next(gen)
    t1 = time.perf_counter()
    assert first.numel() == 1 and int(first) == AUDIO_START
    audio_out: list[torch.Tensor] = []
    step_times: list[float] = []
    last = t1
    for t in gen:
        now = time.perf_counter()
        step_times.append(now - last)
        last = now
        audio_out.append(t)
    t2 = time.perf_counter()
    assert len(audio_out) == frames and all(t.numel() == 8 for t in audio_out)
    codes = torch.stack(audio_out, 1).unsqueeze(0)  # (1, 8, F), as the README stacks them
    waveform = proc.decode(codes)
    t3 = time.perf_counter()

    assert len(timer.backbone) == 1 + frames and len(timer.depthformer) == frames
    backbone_steps = timer.backbone[1:]  # [0] is the prompt's forward (prefill)
    n_samples = int(waveform.shape[-1])
    audio_seconds = n_samples / SAMPLE_RATE
    total = t3 - t0
    return {
        "prefill_seconds": t1 - t0,
        "frames_seconds": t2 - t1,
        "mean_frame_seconds": (t2 - t1) / frames,
        "min_frame_seconds": min(step_times),
        "max_frame_seconds": max(step_times),
        "frames_per_second": frames / (t2 - t1),
        "prefill_backbone_seconds": timer.backbone[0],
        "backbone_step_seconds_mean": sum(backbone_steps) / frames,
        "depthformer_frame_seconds_mean": sum(timer.depthformer) / frames,
        "other_frame_seconds_mean": ((t2 - t1) - sum(backbone_steps) - sum(timer.depthformer)) / frames,
        "detokenizer_seconds": t3 - t2,
        "time_to_first_audio_seconds": total,
        "total_compute_seconds": total,
        "audio_seconds": audio_seconds,
        "real_time_factor": total / audio_seconds,
        "samples": n_samples,
        "samples_per_frame": n_samples / frames,
        "waveform_finite": bool(torch.isfinite(waveform).all()),
        "distinct_codes_codebook0": int(codes[0, 0].unique().numel()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=40)
    ap.add_argument("--frames", type=int, default=125, help="audio frames (80 ms each); 125 = 10 s")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", action="store_true", help="one untimed run of 4 frames first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the LM and depthformer (from_pretrained's default: bfloat16)")
    ap.add_argument("--audio-temperature", type=float, default=0.8, help="README TTS example: 0.8")
    ap.add_argument("--audio-top-k", type=int, default=64, help="README TTS example: 64")
    ap.add_argument("--greedy", action="store_true", help="audio temperature None (argmax codes)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    temperature = None if args.greedy else args.audio_temperature
    top_k = None if args.greedy else args.audio_top_k

    t = time.perf_counter()
    torch.manual_seed(args.seed)
    model = build_model(dtype)
    detok = build_detokenizer()
    proc = reference_processor(detok)
    install_forcing(model)
    timer = PartTimer(model)
    log(f"built in {time.perf_counter() - t:.1f} s: backbone "
        f"{sum(p.numel() for p in model.lfm.parameters()) / 1e6:.0f}M, depthformer "
        f"{sum(p.numel() for p in model.depthformer.parameters()) / 1e6:.1f}M, detokenizer "
        f"{sum(p.numel() for p in detok.parameters()) / 1e6:.1f}M parameters")

    inputs = tts_prompt(args.prompt_tokens, args.seed, dtype)

    if args.warmup:
        t = time.perf_counter()
        one_round(model, proc, timer, inputs, 4, temperature, top_k, args.seed)
        log(f"warmup (4 frames) {time.perf_counter() - t:.1f} s")

    rounds = []
    for r in range(args.rounds):
        res = one_round(model, proc, timer, inputs, args.frames, temperature, top_k, args.seed + r)
        log(f"round {r + 1}/{args.rounds}: prefill {res['prefill_seconds']:.3f} s, "
            f"{res['mean_frame_seconds'] * 1000:.1f} ms/frame (backbone "
            f"{res['backbone_step_seconds_mean'] * 1000:.1f}, depthformer "
            f"{res['depthformer_frame_seconds_mean'] * 1000:.1f}), detokenizer "
            f"{res['detokenizer_seconds']:.3f} s, total {res['total_compute_seconds']:.2f} s, "
            f"RTF {res['real_time_factor']:.3f}")
        rounds.append(res)

    with torch.no_grad():
        one = torch.randint(0, EOA, (1, 8, 1))
        proc.decode(one)
        t = time.perf_counter()
        for _ in range(5):
            proc.decode(one)
        detok_one = (time.perf_counter() - t) / 5

    keys = [k for k, v in rounds[0].items() if isinstance(v, float) and not isinstance(v, bool)]
    median = {k: statistics.median(r[k] for r in rounds) for k in keys}

    report = {
        "engine": "liquid-audio (PyTorch reference)",
        "liquid_audio_version": metadata.version("liquid-audio"),
        "torch_version": torch.__version__,
        "transformers_version": metadata.version("transformers"),
        "threads": torch.get_num_threads(),
        "dtype": args.dtype,
        "detokenizer_dtype": "float32",
        "weights": f"random (torch.manual_seed({args.seed})), shapes of LFM2.5-Audio-1.5B",
        "shapes": {
            "backbone": "LFM2-1.2B: d 2048, 16 layers (10 conv, 6 GQA 32/8 heads), FFN 8192, vocab 65536",
            "depthformer": "1024 x 6 layers, 32/8 heads, FFN 2816, 8 codebooks x 2049 codes",
            "detokenizer": "LFM2 512 x 8 layers (5 conv, 3 sliding-window attention 16/8 heads), "
                           "FFN 2304, x6 upsampling, 1282 -> ISTFT n_fft 1280 hop 320",
        },
        "mode": "sequential TTS (generate_sequential)",
        "sampling": (
            "audio greedy (temperature None)" if args.greedy
            else f"audio temperature {args.audio_temperature}, top-k {args.audio_top_k} "
                 "(README TTS example); text greedy"
        ) + "; end-of-audio code 2048 masked; first text token forced to <|audio_start|>",
        "first_audio_mode": "decode at end: LFM2 detokenizer run once over all frames after "
                            "generation (README TTS example; liquid-audio has no streaming "
                            "LFM2 detokenizer), so time to first audio = total compute",
        "prompt_tokens": args.prompt_tokens,
        "frames": args.frames,
        "samples_per_frame": rounds[0]["samples_per_frame"],
        "sample_rate": SAMPLE_RATE,
        "audio_seconds": rounds[0]["audio_seconds"],
        "warmup": args.warmup,
        "detokenizer_one_frame_seconds": detok_one,
        "rounds": rounds,
        "median": median,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
