"""POST /v1/audio/speech with the real `openai` client (issue 43): the tiny LFM2.5-Audio
fixture (the F32 language model that scripts/make-test-models.sh writes, with the
committed vocoder and audio tokenizer, the vocoder in f32) speaks the reference's
`tts-thanks` golden as a 16-bit WAV and as raw PCM; OpenAI's voice names map onto the
model's voices; bad requests are 400s; a client that hangs up cancels its generation;
a text-only model cannot speak."""

import array
import io
import json
import os
import socket
import subprocess
import urllib.parse
import wave

import openai
import pytest

from conftest import CACHE, REQUEST_TIMEOUT, ROOT, Server, binary, http

SPEECH_MODEL = os.path.join(CACHE, "models", "lfm2-audio-out-tiny.F32.gguf")
VOCODER = str(ROOT / "Tests" / "Fixtures" / "models" / "vocoder-lfm2-audio-tiny.gguf")
AUDIO_TOKENIZER = str(ROOT / "Tests" / "Fixtures" / "models" / "tokenizer-lfm2-audio-tiny.gguf")
GOLDEN = ROOT / "Tests" / "Fixtures" / "golden" / "audio-out" / "lfm2-audio-out-tiny.tts-thanks.sequential.wave.f32"
THANKS = "Thank you for calling. How can I help?"
# Half a 16-bit step (the encoder rounds x * 32768) plus the engine's distance from the reference.
TOLERANCE = 0.5 / 32768 + 1e-5


@pytest.fixture(scope="module")
def speech_server():
    server = Server(SPEECH_MODEL, "--vocoder", VOCODER, "--audio-tokenizer", AUDIO_TOKENIZER, "--vocoder-weights", "f32",
                    "--ctx-size", "1024", "--metrics")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def client(speech_server):
    return openai.OpenAI(base_url=speech_server.url + "/v1", api_key="unused", timeout=REQUEST_TIMEOUT, max_retries=0)


def golden():
    samples = array.array("f")
    samples.frombytes(GOLDEN.read_bytes())
    return list(samples)


def int16s(raw):
    values = array.array("h")
    values.frombytes(raw)
    return list(values)


def read_wav(data):
    """(rate, channels, sample width, the samples as 16-bit integers) of a WAV file."""
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), w.getnchannels(), w.getsampwidth(), int16s(w.readframes(w.getnframes()))


def assert_golden(values):
    g = golden()
    assert len(values) == len(g)
    worst = max(abs(v / 32768 - x) for v, x in zip(values, g))
    assert worst <= TOLERANCE, f"largest difference {worst}"


def test_wav_is_the_golden_waveform(client, speech_server):
    # The golden's turn ends (<|im_end|>) at step 24 of its max_new_tokens 40; the default limit ends it there too.
    for extra in ({"max_steps": 40}, None):
        response = client.audio.speech.with_raw_response.create(
            model="lfm2-audio", voice="uk_female", input=THANKS, response_format="wav", extra_body=extra)
        assert response.headers["content-type"] == "audio/wav"
        rate, channels, width, values = read_wav(response.content)
        assert (rate, channels, width) == (24000, 1, 2)
        assert_golden(values)


def test_pcm_is_raw_16_bit_samples(client):
    speech = client.audio.speech.create(
        model="lfm2-audio", voice="UK female", input=THANKS, response_format="pcm", extra_body={"max_steps": 40})
    assert len(speech.content) == 2 * len(golden())
    assert_golden(int16s(speech.content))
    wav = client.audio.speech.create(model="lfm2-audio", voice="uk_female", input=THANKS, extra_body={"max_steps": 40})
    assert speech.content == wav.content[44:]  # the default format is a WAV of the same samples


def test_openai_voice_names_map_onto_the_models_voices(client):
    alloy = client.audio.speech.create(model="tts-1", voice="alloy", input=THANKS, extra_body={"max_steps": 40})
    us_female = client.audio.speech.create(model="tts-1", voice="us_female", input=THANKS, extra_body={"max_steps": 40})
    assert alloy.content[:4] == b"RIFF" and len(alloy.content) > 44
    assert alloy.content == us_female.content
    fable = client.audio.speech.create(model="tts-1", voice="fable", input=THANKS, extra_body={"max_steps": 40})
    uk_male = client.audio.speech.create(model="tts-1", voice="uk_male", input=THANKS, extra_body={"max_steps": 40})
    assert fable.content == uk_male.content


def test_bad_requests_are_400s(client, speech_server):
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="robot", input=THANKS)
    assert "us_female, us_male, uk_female, uk_male" in str(e.value) and "alloy" in str(e.value)
    assert e.value.body["param"] == "voice"
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input=THANKS, response_format="mp3")
    assert "'wav' or 'pcm'" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input=THANKS, speed=1.25)
    assert "'speed' must be 1" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input="")
    assert "'input' is empty" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input="a" * 4097)
    assert "4096" in str(e.value)
    # Bodies that are not JSON, or not an object, do not hurt the server.
    for body in (b"{", b"[]", b"", b"\xff\xfe"):
        status, _, text = http("POST", speech_server.url + "/v1/audio/speech", body)
        assert status == 400, text
    status, _, text = http("GET", speech_server.url + "/v1/models")
    assert json.loads(text)["data"][0]["architecture"]["output_modalities"] == ["text", "audio"]
    assert client.audio.speech.create(model="tts-1", voice="nova", input="Hello.", extra_body={"max_steps": 40}).content[:4] == b"RIFF"


def cancelled(url):
    status, _, text = http("GET", url + "/metrics")
    assert status == 200
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return int(values["leapref_completions_cancelled_total"]), int(values["leapref_slots_busy"])


def test_a_client_that_hangs_up_cancels_its_speech(speech_server):
    url = speech_server.url
    before, _ = cancelled(url)
    # Sampled text on the random tiny model runs long (about 20 s of speech, a second or
    # more of work): the client is gone long before the reply would end.
    body = json.dumps({"model": "tts", "input": THANKS * 20, "voice": "us_male", "temperature": 2, "seed": 7,
                       "max_steps": 900}).encode()
    parsed = urllib.parse.urlparse(url)
    s = socket.create_connection((parsed.hostname, parsed.port), timeout=REQUEST_TIMEOUT)
    s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    s.close()
    speech_server.wait_for("completion cancelled", timeout=REQUEST_TIMEOUT)
    assert cancelled(url) == (before + 1, 0)
    # The slot is free: the next request is served.
    assert len(speech_server_speaks(url)) > 44


def speech_server_speaks(url):
    status, headers, _ = http("GET", url + "/health")
    assert status == 200
    c = openai.OpenAI(base_url=url + "/v1", api_key="unused", timeout=REQUEST_TIMEOUT, max_retries=0)
    return c.audio.speech.create(model="tts", voice="uk_female", input=THANKS, extra_body={"max_steps": 40}).content


def test_a_text_model_cannot_speak(smol_server):
    client = openai.OpenAI(base_url=smol_server.url + "/v1", api_key="test-key", timeout=REQUEST_TIMEOUT, max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input=THANKS)
    assert "cannot speak" in str(e.value)
    assert e.value.body["param"] == "model"
    status, _, text = http("GET", smol_server.url + "/v1/models", headers={"Authorization": "Bearer test-key"})
    assert json.loads(text)["data"][0]["architecture"]["output_modalities"] == ["text"]


def test_serve_refuses_bad_speech_flags():
    for args, message in ((["--vocoder-weights", "f16"], "--vocoder-weights is f32 or stored"),
                          (["--vocoder", "/nonexistent/vocoder.gguf"], "--vocoder: no file at"),
                          (["--audio-tokenizer", "/nonexistent/t.gguf"], "--audio-tokenizer: no file at")):
        run = subprocess.run([binary(), "serve", "--model", SPEECH_MODEL, "--port", "0", *args],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode != 0
        assert message in run.stderr + run.stdout
