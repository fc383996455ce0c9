"""Spoken chat replies with the real `openai` client (issue 43, section 7): chat
completions with `modalities: ["text", "audio"]` on the tiny LFM2.5-Audio fixture (the F32
language model with the committed vocoder and audio tokenizer, the vocoder in f32). A TTS
system prompt speaks the reference's `tts-thanks` golden as `message.audio` (a WAV or raw
pcm16, base64) with the reply's text as its transcript; streamed, `delta.audio` chunks
carry base64 pcm16 that joins to the same samples; bad requests and a text model are 400s."""

import array
import base64
import io
import os
import wave

import openai
import pytest

from conftest import CACHE, REQUEST_TIMEOUT, ROOT, Server

SPEECH_MODEL = os.path.join(CACHE, "models", "lfm2-audio-out-tiny.F32.gguf")
VOCODER = str(ROOT / "Tests" / "Fixtures" / "models" / "vocoder-lfm2-audio-tiny.gguf")
AUDIO_TOKENIZER = str(ROOT / "Tests" / "Fixtures" / "models" / "tokenizer-lfm2-audio-tiny.gguf")
GOLDEN = ROOT / "Tests" / "Fixtures" / "golden" / "audio-out" / "lfm2-audio-out-tiny.tts-thanks.sequential.wave.f32"
THANKS = "Thank you for calling. How can I help?"
TTS_MESSAGES = [{"role": "system", "content": "Perform TTS. Use the UK female voice."},
                {"role": "user", "content": THANKS}]
# The reference decodes greedily without a repetition penalty or DRY: the server's defaults add both.
PLAIN = {"repeat_penalty": 1, "dry_multiplier": 0}
TOLERANCE = 1 / 32768 + 1e-5


@pytest.fixture(scope="module")
def speech_server():
    server = Server(SPEECH_MODEL, "--vocoder", VOCODER, "--audio-tokenizer", AUDIO_TOKENIZER, "--vocoder-weights", "f32",
                    "--ctx-size", "1024")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def client(speech_server):
    return openai.OpenAI(base_url=speech_server.url + "/v1", api_key="unused", timeout=REQUEST_TIMEOUT, max_retries=0)


def int16s(raw):
    values = array.array("h")
    values.frombytes(raw)
    return list(values)


def assert_golden(values):
    g = array.array("f")
    g.frombytes(GOLDEN.read_bytes())
    assert len(values) == len(g)
    worst = max(abs(v / 32768 - x) for v, x in zip(values, g))
    assert worst <= TOLERANCE, f"largest difference {worst}"


def spoken(client, audio_format, **extra):
    return client.chat.completions.create(
        model="lfm2-audio", modalities=["text", "audio"], audio={"voice": "alloy", "format": audio_format},
        messages=TTS_MESSAGES, max_tokens=40, temperature=0, extra_body=PLAIN, **extra)


def test_a_tts_system_prompt_speaks_the_golden_as_wav(client):
    reply = spoken(client, "wav")
    message = reply.choices[0].message
    assert message.content is None
    assert message.audio.id.startswith("audio_")
    assert message.audio.expires_at > reply.created
    assert message.audio.transcript.strip() != ""
    with wave.open(io.BytesIO(base64.b64decode(message.audio.data))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
        assert_golden(int16s(w.readframes(w.getnframes())))
    # The transcript is the reply's text: the same request without audio writes it.
    text = client.chat.completions.create(model="lfm2-audio", messages=TTS_MESSAGES, max_tokens=40, temperature=0,
                                          extra_body=PLAIN)
    assert text.choices[0].message.content.startswith(message.audio.transcript)


def test_pcm16_and_streamed_chunks_are_the_same_samples(client):
    pcm = base64.b64decode(spoken(client, "pcm16").choices[0].message.audio.data)
    wav = base64.b64decode(spoken(client, "wav").choices[0].message.audio.data)
    assert pcm == wav[44:]
    assert_golden(int16s(pcm))
    chunks, transcript, ids = [], "", set()
    for chunk in spoken(client, "pcm16", stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        audio = getattr(delta, "audio", None)
        if audio is not None:
            audio = audio if isinstance(audio, dict) else audio.model_dump()
            ids.add(audio["id"])
            if audio.get("data"):
                chunks.append(base64.b64decode(audio["data"]))
            transcript += audio.get("transcript") or ""
        assert not delta.content
    assert len(chunks) > 1
    assert b"".join(chunks) == pcm
    assert len(ids) == 1
    assert transcript == spoken(client, "wav").choices[0].message.audio.transcript


def test_bad_requests_are_400s(client):
    def refused(param, text, **kwargs):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="lfm2-audio", messages=TTS_MESSAGES, max_tokens=8, **kwargs)
        assert e.value.body["param"] == param
        assert text in str(e.value)
    refused("audio.format", "'wav' or 'pcm16'", modalities=["text", "audio"], audio={"voice": "alloy", "format": "mp3"})
    refused("audio", "'audio' is required", modalities=["text", "audio"])
    refused("audio.voice", "not a voice", modalities=["text", "audio"], audio={"voice": "robot", "format": "wav"})
    refused("response_format", "not constrained", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
            response_format={"type": "json_object"})
    refused("tools", "calls no tools", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    # Text only, as before: no audio.
    reply = client.chat.completions.create(model="lfm2-audio", modalities=["text"], messages=TTS_MESSAGES, max_tokens=8)
    assert reply.choices[0].message.audio is None


def test_a_text_model_cannot_speak_in_chat(smol_server):
    client = openai.OpenAI(base_url=smol_server.url + "/v1", api_key="test-key", timeout=REQUEST_TIMEOUT, max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smol", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
                                       messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
    assert "cannot speak" in str(e.value)
    assert e.value.body["param"] == "modalities"
