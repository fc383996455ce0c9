"""The chat page speaks (issue 43, section 7): in Debian's Chromium, headless, against the
tiny LFM2.5-Audio fixture served with its vocoder and audio tokenizer (test_chat_audio.py's
server). With "Speak replies" on, the page asks for `modalities: ["text", "audio"]`, plays
each streamed `delta.audio` chunk as it comes (Web Audio, one buffer per chunk, back to back),
shows the transcript as the reply, and ends the reply with an <audio> player whose WAV the
page built from the reply's samples: exactly the samples the API returns for the same
request. The WAV is stored under its own key and the player comes back after a reload; Stop
(or Esc) silences a reply that still plays after it ended."""

import array
import base64
import io
import json
import math
import wave

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import http
from test_chat_audio import THANKS, speech_server  # noqa: F401 (the server fixture)
from test_webui import FAKE_STREAM, chromium, last_reply, messages, send, stored, wait, wait_for_model

TTS = "Perform TTS. Use the UK female voice."
LEAD = 0.05  # speech.js: how far ahead of now a chunk that follows no playing chunk starts

# Test code, injected with execute_script before the message is sent: keeps the body of each
# chat request, and records every buffer the page starts playing (AudioBufferSourceNode.start):
# when (context time), its length, rate and samples, the context's state, the context time the
# page last read (the clock moves while a task runs: the page's own reading, not a later one),
# and the state of the reply being shown; and counts the buffers stopped.
SPEECH_PROBE = """
    const probe = window.__speech = { requests: [], started: [], stopped: 0 };
    const clock = Object.getOwnPropertyDescriptor(BaseAudioContext.prototype, 'currentTime');
    Object.defineProperty(BaseAudioContext.prototype, 'currentTime', {
      configurable: true,
      get() { const t = clock.get.call(this); this.__read = t; return t; },
    });
    const fetch = window.fetch;
    window.fetch = (url, init) => {
      if (String(url).endsWith('/v1/chat/completions')) probe.requests.push(JSON.parse(init.body));
      return fetch(url, init);
    };
    const start = AudioBufferSourceNode.prototype.start;
    AudioBufferSourceNode.prototype.start = function (when, ...rest) {
      const reply = document.querySelector('#messages .message:last-child');
      probe.started.push({ when, length: this.buffer.length, rate: this.buffer.sampleRate,
                           samples: Array.from(this.buffer.getChannelData(0)), contextState: this.context.state,
                           now: this.context.__read, reply: reply ? reply.dataset.state : null });
      return start.call(this, when, ...rest);
    };
    const stop = AudioBufferSourceNode.prototype.stop;
    AudioBufferSourceNode.prototype.stop = function (...args) {
      probe.stopped++;
      return stop.apply(this, args);
    };"""


@pytest.fixture
def speech_browser(tmp_path):
    # No autoplay switch: the page starts its audio within the user's action (Enter), as a
    # browser with its default autoplay policy requires.
    driver = chromium(tmp_path)
    yield driver
    driver.quit()


def int16s(raw):
    values = array.array("h")
    values.frombytes(raw)
    return list(values)


def events(text):
    """The JSON payloads of a server-sent event stream's text."""
    return [json.loads(line[5:]) for line in text.split("\n") if line.startswith("data:") and line[5:].strip() != "[DONE]"]


def player(driver):
    """The last reply's spoken player: (src, caption), or None."""
    return driver.execute_script("""
        const f = document.querySelector('#messages .message:last-child .spoken');
        if (!f) return null;
        const a = f.querySelector('audio');
        return [a ? a.getAttribute('src') : null, f.querySelector('figcaption').textContent, a ? a.controls : false];""")


def wav_samples(data_url):
    assert data_url.startswith("data:audio/wav;base64,"), data_url[:40]
    with wave.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getcomptype()) == (24000, 1, 2, "NONE")
        return int16s(w.readframes(w.getnframes()))


def test_a_spoken_reply_plays_while_it_streams_and_keeps_its_wav(speech_server, speech_browser):  # noqa: F811
    browser = speech_browser
    browser.get(speech_server.url + "/")
    wait_for_model(browser)

    # The speech settings: shown for a model that speaks, off by default, the model's four voices.
    browser.find_element(By.ID, "toggle-settings").click()
    assert browser.find_element(By.ID, "speech-settings").is_displayed()
    speak = browser.find_element(By.ID, "speak")
    assert not speak.is_selected()
    voices = Select(browser.find_element(By.ID, "voice"))
    assert [o.get_attribute("value") for o in voices.options] == ["us_female", "us_male", "uk_female", "uk_male"]
    browser.find_element(By.ID, "system-prompt").send_keys(TTS)
    for field, value in [("temperature", "0"), ("max-tokens", "40"), ("dry-multiplier", "0")]:
        browser.find_element(By.ID, field).send_keys(value)
    speak.click()
    voices.select_by_value("uk_female")
    browser.find_element(By.ID, "close-settings").click()
    kept = browser.execute_script("return JSON.parse(localStorage.getItem('leap-ref.settings'))")
    assert kept["speak"] is True and kept["voice"] == "uk_female" and kept["system"] == TTS, kept

    browser.execute_script(SPEECH_PROBE)
    send(browser, THANKS)
    wait(browser, lambda d: last_reply(d)[1] == "done", "the spoken reply did not finish")
    probe = browser.execute_script("return window.__speech")

    # The request asked for speech, in the chosen voice, as pcm16.
    [body] = probe["requests"]
    assert body["modalities"] == ["text", "audio"] and body["audio"] == {"voice": "uk_female", "format": "pcm16"}
    assert body["stream"] is True and body["temperature"] == 0

    # The same request from Python, whole and streamed: the samples and the chunks the API gives.
    whole = dict(body, stream=False)
    whole.pop("stream_options", None)
    status, _, text = http("POST", speech_server.url + "/v1/chat/completions", whole)
    assert status == 200, text
    answer = json.loads(text)["choices"][0]["message"]["audio"]
    expected = int16s(base64.b64decode(answer["data"]))
    assert len(expected) >= 12000, "the TTS prompt speaks half a second or more"
    status, _, text = http("POST", speech_server.url + "/v1/chat/completions", body)
    assert status == 200, text
    chunks = [int16s(base64.b64decode(e["choices"][0]["delta"]["audio"]["data"])) for e in events(text)
              if e.get("choices") and (e["choices"][0].get("delta") or {}).get("audio", {}).get("data")]
    assert len(chunks) > 1 and sum(chunks, []) == expected

    # Every chunk was scheduled as it came, while the reply streamed: one buffer each, at
    # 24 kHz, with the chunk's samples (v / 32768), in a running audio context.
    started = probe["started"]
    assert len(started) == len(chunks), (len(started), len(chunks))
    for buffer, chunk in zip(started, chunks):
        assert buffer["reply"] == "streaming", "a chunk was scheduled after the reply ended"
        assert buffer["rate"] == 24000 and buffer["length"] == len(chunk)
        assert buffer["samples"] == [v / 32768 for v in chunk]
        assert buffer["contextState"] in ("running", "suspended"), buffer["contextState"]
    # Made within the Enter that sent (no autoplay switch): running by the last chunk at the latest.
    assert started[-1]["contextState"] == "running", started[-1]["contextState"]
    # Back to back: each chunk starts where the one before ends, unless that one had already
    # ended when it came (then a little after now, as the first does).
    assert started[0]["when"] == pytest.approx(started[0]["now"] + LEAD, abs=1e-9)
    back_to_back = 0
    for before, buffer in zip(started, started[1:]):
        end = before["when"] + before["length"] / 24000
        if buffer["now"] + LEAD <= end:
            assert buffer["when"] == pytest.approx(end, abs=1e-9), (before, buffer)
            back_to_back += 1
        else:
            assert buffer["when"] == pytest.approx(buffer["now"] + LEAD, abs=1e-9), (before, buffer)
    assert back_to_back >= 1, "no chunk came while the one before was still to play"
    print(f"\nspoken reply: {len(expected)} samples in {len(chunks)} chunks, {back_to_back} scheduled back to back; "
          f"transcript {answer['transcript']!r}")

    # The transcript is the reply's text; the reply ends with a player of the whole WAV.
    shown = messages(browser)
    assert shown[-1][2].strip() == answer["transcript"].strip() != "", shown
    src, caption, controls = player(browser)
    assert controls and caption == f"Spoken reply ({len(expected) / 24000:.1f} s)"
    assert wav_samples(src) == expected

    # Kept: the WAV under its own key, the conversation naming it; a reload shows the player.
    index, records, attachments = stored(browser)
    reply = records[index[-1]["id"]]["messages"][1]
    assert reply["content"] == answer["transcript"]
    audio = reply["audio"]
    assert audio["samples"] == len(expected) and audio["id"].startswith("audio_")
    assert attachments == {audio["key"]: src}
    browser.refresh()
    wait_for_model(browser)
    wait(browser, lambda d: player(d) is not None, "the spoken reply's player did not come back after a reload")
    assert player(browser) == [src, caption, True]
    assert messages(browser) == shown


def test_stop_silences_a_spoken_reply_still_playing(speech_server, speech_browser):  # noqa: F811
    """A stream the test writes (test_webui's FAKE_STREAM): six seconds of a tone, split
    inside a sample, end the reply long before they are played; Stop shows while they play,
    Esc silences them, and the reply's WAV is the tone, whole."""
    browser = speech_browser
    browser.get(speech_server.url + "/")
    wait_for_model(browser)
    browser.find_element(By.ID, "toggle-settings").click()
    browser.find_element(By.ID, "speak").click()
    browser.find_element(By.ID, "close-settings").click()
    tone = [round(8000 * math.sin(2 * math.pi * 440 * i / 24000)) for i in range(6 * 24000)]
    pcm = array.array("h", tone).tobytes()
    browser.execute_script(FAKE_STREAM)
    browser.execute_script(SPEECH_PROBE)
    send(browser, "Play a tone.")
    wait(browser, lambda d: d.execute_script("return window.__sse.started()"), "the page did not ask for a reply")
    sse = lambda delta: browser.execute_script("window.__sse.send(arguments[0])", delta)  # noqa: E731
    sse({"role": "assistant", "content": ""})
    sse({"audio": {"id": "audio_t", "transcript": "A tone"}})
    for piece in (pcm[:1001], pcm[1001:]):
        sse({"audio": {"id": "audio_t", "data": base64.b64encode(piece).decode()}})
    sse({"audio": {"id": "audio_t", "transcript": " of six seconds."}})
    browser.execute_script("window.__sse.end('stop')")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    assert browser.find_element(By.ID, "stop").is_displayed(), "Stop shows while the reply still plays"
    assert browser.execute_script("return window.__speech.started.map(b => b.length)") == [500, 6 * 24000 - 500]
    assert last_reply(browser)[2] == "A tone of six seconds."
    src, caption, _ = player(browser)
    assert caption == "Spoken reply (6.0 s)" and wav_samples(src) == tone
    browser.find_element(By.ID, "message").send_keys(Keys.ESCAPE)
    wait(browser, lambda d: not d.find_element(By.ID, "stop").is_displayed(), "Esc did not silence the reply")
    # The long chunk was stopped (the 500-sample one before it has ended, or is stopped too).
    assert browser.execute_script("return window.__speech.stopped") >= 1
    assert last_reply(browser)[1] == "done", "silencing a finished reply leaves it done"
