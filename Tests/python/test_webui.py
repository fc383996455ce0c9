"""The chat page at `/` in a real browser: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver, against `leap-ref serve` on 127.0.0.1 with SmolLM2.

The browser reaches nothing but the server: host names resolve nowhere, background
services are off, and the page's Content-Security-Policy allows its own origin only.
Every wait has a timeout and ends early when the condition holds.

Set LEAP_REF_SCREENSHOT=path.png to keep the screenshot of a finished conversation
(docs/images/webui.png is made so)."""

import base64
import json
import os
import random
import re
import shutil
import time
import wave

import pytest

from conftest import IMAGES, SMOLLM2, SOUNDS, Server

os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager fetch anything

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT = 180  # seconds, for a reply on a busy two-core machine
LONG_PROMPT = "Tell me a long story about a dragon who learns to paint, with many details."


def executable(name):
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not os.path.exists(path):
        pytest.fail(f"missing {name}: run ./scripts/setup.sh (it installs chromium and chromium-driver)")
    return path


@pytest.fixture(scope="module")
def page_server():
    server = Server(SMOLLM2, "--ctx-size", "2048")
    yield server
    assert server.stop() == 0


def chromium(tmp_path, *extra):
    """Headless Chromium with a fresh profile in `tmp_path`, reaching 127.0.0.1 only; `extra`
    are more command-line switches."""
    options = webdriver.ChromeOptions()
    options.binary_location = executable("chromium")
    for arg in [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'profile'}", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
        "--disable-default-apps", "--disable-domain-reliability", "--no-pings", "--metrics-recording-only",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--lang=en-US", *extra,
    ]:
        options.add_argument(arg)
    service = Service(executable_path=executable("chromedriver"), log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


@pytest.fixture
def browser(tmp_path):
    driver = chromium(tmp_path)
    yield driver
    driver.quit()


def wait(driver, condition, message, timeout=WAIT):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
    except TimeoutException:
        pytest.fail(f"{message} (within {timeout} s); page text:\n{driver.find_element(By.TAG_NAME, 'body').text}")


def model_name(driver):
    return driver.find_element(By.ID, "model-name").text


def wait_for_model(driver):
    wait(driver, lambda d: model_name(d) not in ("", "connecting…", "loading the model…"), "the model name never showed")
    assert not model_name(driver).startswith(("error", "cannot reach")), model_name(driver)


def messages(driver):
    """(role, state, body text) of every message shown, read in one step (the page
    renders the conversation again when it changes, so elements found earlier may be gone)."""
    return [tuple(m) for m in driver.execute_script(
        "return [...document.querySelectorAll('#messages .message')]"
        ".map(m => [m.dataset.role, m.dataset.state, m.querySelector('.body').innerText])")]


def stats(driver):
    """The statistics line under the last message."""
    return driver.execute_script("const s = document.querySelector('#messages .message:last-child .stats'); return s ? s.innerText : ''")


def last_reply(driver):
    shown = messages(driver)
    return shown[-1] if shown and shown[-1][0] == "assistant" else (None, None, "")


def set_setting(driver, field_id, value):
    if driver.find_element(By.ID, "settings").get_attribute("hidden") is not None:
        driver.find_element(By.ID, "toggle-settings").click()
    field = driver.find_element(By.ID, field_id)
    field.clear()
    field.send_keys(value)
    driver.find_element(By.ID, "close-settings").click()


def send(driver, text):
    box = driver.find_element(By.ID, "message")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


# Counts the page's localStorage writes (test code: it wraps Storage.prototype.setItem).
COUNT_WRITES = """
    window.__writes = [];
    const setItem = Storage.prototype.setItem;
    Storage.prototype.setItem = function (key, value) {
      if (this === localStorage) {
        const text = String(value);
        window.__writes.push({ key: String(key), bytes: text.length, at: performance.now(),
                               image: text.includes('data:image/') });
      }
      return setItem.call(this, key, value);
    };"""


def test_tokens_stream_in_stop_holds_and_a_reload_keeps_the_conversation(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    assert browser.find_element(By.ID, "key-dialog").get_attribute("open") is None, "no key asked without --api-key"
    set_setting(browser, "max-tokens", "1000")
    send(browser, LONG_PROMPT)

    # The reply grows while it streams: several different lengths, each longer than the last.
    lengths = []
    deadline = time.monotonic() + WAIT
    while len([n for n in lengths if n > 0]) < 4:
        _, state, text = last_reply(browser)
        if not lengths or len(text) != lengths[-1]:
            lengths.append(len(text))
        assert state in (None, "streaming"), f"the reply ended ({state}) before it was seen growing: {text!r}"
        assert time.monotonic() < deadline, "no streamed text"
        time.sleep(0.05)
    assert lengths == sorted(lengths), lengths
    assert browser.find_element(By.ID, "stop").is_displayed()

    # Esc stops mid-answer: the reply is marked stopped, and the server cancels the completion.
    browser.find_element(By.ID, "message").send_keys(Keys.ESCAPE)
    wait(browser, lambda d: last_reply(d)[1] == "stopped", "Esc did not stop the reply")
    page_server.wait_for("completion cancelled", timeout=60)
    stopped = messages(browser)
    assert [m[0] for m in stopped] == ["user", "assistant"]
    assert stopped[0][2] == LONG_PROMPT
    assert len(stopped[1][2]) >= lengths[-1] > 0
    assert not browser.find_element(By.ID, "stop").is_displayed()
    assert browser.find_element(By.ID, "send").is_enabled()

    # A reload finds the conversation in localStorage, partial reply included.
    browser.refresh()
    wait_for_model(browser)
    wait(browser, lambda d: len(messages(d)) == 2, "the conversation did not come back after a reload")
    assert messages(browser) == stopped
    titles = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#conversation-list button.open")]
    assert titles == [LONG_PROMPT[:48]]

    # Regenerate replaces the stopped reply with a new one.
    browser.find_element(By.ID, "regenerate").click()
    wait(browser, lambda d: last_reply(d)[1] == "streaming", "regenerate did not start a reply")
    browser.find_element(By.ID, "stop").click()
    wait(browser, lambda d: last_reply(d)[1] == "stopped", "the stop button did not stop the reply")
    assert [m[0] for m in messages(browser)] == ["user", "assistant"]


def test_a_finished_reply_shows_speed_and_cache_hits(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    browser.find_element(By.ID, "new-chat").click()
    set_setting(browser, "max-tokens", "200")
    set_setting(browser, "seed", "42")
    send(browser, "What is the capital of France?")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the first reply did not finish")
    first = stats(browser)
    assert not browser.find_element(By.ID, "attach").is_displayed(), "SmolLM2 reads text only: no attach button"
    assert browser.find_element(By.ID, "speech-settings").get_attribute("hidden") is not None, "SmolLM2 does not speak"
    assert re.search(r"\d+ tokens · [\d.]+ tokens/s · prompt \d+ tokens, \d+ from the cache", first), first

    send(browser, "Write a Python function that adds two numbers.")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the second reply did not finish")
    second = stats(browser)
    prompt, cached = map(int, re.search(r"prompt (\d+) tokens, (\d+) from the cache", second).groups())
    assert 0 < cached < prompt, f"the second turn reuses the first turn's prompt cache: {second}"
    assert [m[0] for m in messages(browser)] == ["user", "assistant", "user", "assistant"]
    shot = os.environ.get("LEAP_REF_SCREENSHOT")
    if shot:
        browser.execute_script("document.activeElement.blur()")
        assert browser.save_screenshot(shot)


def stored(driver):
    """localStorage as the page keeps it: (index, {id: conversation record}, {key: attachment data})."""
    return driver.execute_script("""
        const all = {};
        for (let i = 0; i < localStorage.length; i++) all[localStorage.key(i)] = localStorage.getItem(localStorage.key(i));
        const records = {}, attachments = {};
        for (const [k, v] of Object.entries(all)) {
          if (k.startsWith('leap-ref.conversation.')) records[k.slice(22)] = JSON.parse(v);
          if (k.startsWith('leap-ref.attachment.')) attachments[k.slice(20)] = v;
        }
        return [JSON.parse(all['leap-ref.index'] || 'null'), records, attachments];""")


def test_model_text_is_shown_as_text_and_code_as_code(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    hostile = "Look: <img src=x onerror=\"window.pwned=1\"> <b>bold</b>\n```python\nprint('<script>x</script>')\n```\nand `a<b`."
    png = "data:image/png;base64," + base64.b64encode((IMAGES / "small-40x30.png").read_bytes()).decode()
    conversation = {"id": "c1", "title": "t", "messages": [
        {"role": "user", "content": "<i>hi</i>", "attachments": [{"kind": "image", "name": "p.png", "size": 1, "data": png}]},
        {"role": "assistant", "content": hostile, "state": "done"}]}
    older = {"id": "c0", "title": "older", "messages": [{"role": "user", "content": "first"}]}
    # Written in the layout of pages before one key per conversation (every conversation
    # under leap-ref.conversations): the page rewrites it in the new layout.
    browser.execute_script(
        "localStorage.clear(); localStorage.setItem('leap-ref.conversations', arguments[0]);"
        "localStorage.setItem('leap-ref.current', '\"c1\"');",
        json.dumps([older, conversation]))
    browser.refresh()
    wait(browser, lambda d: len(messages(d)) == 2, "the stored conversation was not shown")
    assert browser.execute_script("return localStorage.getItem('leap-ref.conversations')") is None
    index, records, attachments = stored(browser)
    assert index == [{"id": "c0", "title": "older"}, {"id": "c1", "title": "t"}]
    assert records["c0"] == older
    kept = records["c1"]["messages"][0]["attachments"][0]
    assert set(kept) == {"kind", "name", "size", "key"} and attachments == {kept["key"]: png}
    assert records["c1"]["messages"][1]["content"] == hostile
    assert browser.find_element(By.CSS_SELECTOR, "#messages .message.user img.thumb").get_attribute("alt") == "p.png"
    reply = browser.find_elements(By.CSS_SELECTOR, "#messages .message")[1]
    assert reply.find_elements(By.TAG_NAME, "img") == [] and reply.find_elements(By.TAG_NAME, "b") == []
    assert browser.find_elements(By.CSS_SELECTOR, "#messages i") == []
    assert browser.execute_script("return window.pwned") is None
    code = reply.find_element(By.CSS_SELECTOR, "pre.code code")
    assert code.text == "print('<script>x</script>')"
    assert reply.find_element(By.CSS_SELECTOR, "pre.code .lang").text == "python"
    assert reply.find_element(By.CSS_SELECTOR, "code.inline").text == "a<b"
    assert '<img src=x onerror="window.pwned=1">' in reply.text


def test_the_page_asks_for_the_api_key_and_sends_it(smol_server, browser):
    browser.get(smol_server.url + "/")
    dialog = browser.find_element(By.ID, "key-dialog")
    wait(browser, lambda d: dialog.get_attribute("open") is not None, "the page did not ask for the key")
    key = browser.find_element(By.ID, "api-key")
    key.send_keys("wrong-key")
    key.send_keys(Keys.ENTER)
    wait(browser, lambda d: "refused" in d.find_element(By.ID, "key-reason").text, "a wrong key was not refused")
    assert "invalid API key" in browser.find_element(By.ID, "key-reason").text
    key = browser.find_element(By.ID, "api-key")
    key.send_keys("test-key")
    key.send_keys(Keys.ENTER)
    wait_for_model(browser)
    assert dialog.get_attribute("open") is None
    set_setting(browser, "max-tokens", "16")
    send(browser, "Say hello.")
    wait(browser, lambda d: last_reply(d)[1] == "done", "no reply with the key")
    assert last_reply(browser)[2]
    # Kept for this tab only (the box was not ticked): a reload still has it.
    assert browser.execute_script("return sessionStorage.getItem('leap-ref.api-key')") == "test-key"
    assert browser.execute_script("return localStorage.getItem('leap-ref.api-key')") is None
    browser.refresh()
    wait_for_model(browser)
    assert browser.find_element(By.ID, "key-dialog").get_attribute("open") is None


def test_the_json_schema_box_constrains_the_reply(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    # Text that is not JSON is refused in the page, before any request.
    set_setting(browser, "json-schema", "{not json")
    send(browser, "Name a city.")
    wait(browser, lambda d: d.find_element(By.ID, "settings-error").text.startswith("JSON Schema: not valid JSON"),
         "bad JSON Schema text was not reported")
    assert browser.find_element(By.ID, "settings").get_attribute("hidden") is None, "the settings open on the error"
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"],
              "additionalProperties": False}
    set_setting(browser, "json-schema", json.dumps(schema))
    set_setting(browser, "max-tokens", "60")
    browser.find_element(By.ID, "regenerate").click()
    wait(browser, lambda d: last_reply(d)[1] == "done", "no reply under the schema")
    reply = json.loads(last_reply(browser)[2])
    assert list(reply) == ["city"] and isinstance(reply["city"], str)


def test_an_attached_image_is_sent_shown_and_kept(vision_server, browser):
    browser.get(vision_server.url + "/")
    wait_for_model(browser)
    attach = browser.find_element(By.ID, "attach")
    assert attach.is_displayed() and attach.is_enabled(), "a vision model gets an attach button"
    assert "PNG or JPEG" in attach.get_attribute("title")
    chooser = browser.find_element(By.ID, "attach-file")
    assert "image/png" in chooser.get_attribute("accept") and ".wav" not in chooser.get_attribute("accept")
    set_setting(browser, "max-tokens", "24")
    set_setting(browser, "seed", "7")

    # The file input takes the image; it is listed under the message box with a thumbnail.
    chooser.send_keys(str(IMAGES / "small-40x30.png"))
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attachments li img.thumb")) == 1, "no thumbnail")
    assert browser.find_element(By.CSS_SELECTOR, "#attachments li button.delete").get_attribute("aria-label") == \
        "Remove small-40x30.png"
    assert "Attached small-40x30.png" in browser.find_element(By.ID, "status").text
    browser.execute_script(COUNT_WRITES)
    send(browser, "Describe this picture.")

    # The reply streams in; the user message shows the image; its positions are in the prompt.
    wait(browser, lambda d: last_reply(d)[1] in ("streaming", "done"), "no reply started")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    # The image was written to localStorage once, under its own key, and never with the
    # conversation while the reply streamed.
    writes = browser.execute_script("return window.__writes")
    with_image = [w for w in writes if w["image"]]
    assert len(with_image) == 1 and with_image[0]["key"].startswith("leap-ref.attachment."), with_image
    assert any(w["key"].startswith("leap-ref.conversation.") for w in writes)
    assert last_reply(browser)[2], "an empty reply"
    prompt = int(re.search(r"prompt (\d+) tokens", stats(browser)).group(1))
    assert prompt == 86, stats(browser)  # 70 image positions and the text
    user = browser.find_elements(By.CSS_SELECTOR, "#messages .message")[0]
    thumb = user.find_element(By.CSS_SELECTOR, "img.thumb")
    assert thumb.get_attribute("alt") == "small-40x30.png"
    assert browser.execute_script("return arguments[0].naturalWidth", thumb) == 40
    assert not browser.find_element(By.ID, "attachments").is_displayed(), "the sent attachment left the composer"

    # A reload finds the image in the stored conversation, and a regenerated reply sends it again.
    browser.refresh()
    wait_for_model(browser)
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .message.user img.thumb")) == 1,
         "the image did not come back after a reload")
    browser.find_element(By.ID, "regenerate").click()
    wait(browser, lambda d: last_reply(d)[1] == "done" and "prompt" in stats(d), "the regenerated reply did not finish")
    assert re.search(r"prompt 86 tokens", stats(browser)), stats(browser)


def test_an_attached_wav_file_is_sent_as_input_audio(audio_server, browser, tmp_path):
    browser.get(audio_server.url + "/")
    wait_for_model(browser)
    assert "WAV" in browser.find_element(By.ID, "attach").get_attribute("title")
    chooser = browser.find_element(By.ID, "attach-file")
    assert ".wav" in chooser.get_attribute("accept") and "image/png" not in chooser.get_attribute("accept")
    set_setting(browser, "max-tokens", "8")
    # An image is not attached to an audio model; the status line says why.
    chooser.send_keys(str(IMAGES / "small-40x30.png"))
    wait(browser, lambda d: "does not read images" in d.find_element(By.ID, "status").text, "the image was not refused")
    chooser.send_keys(str(SOUNDS / "lfm2-audio-chirp-1s-16k.wav"))
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attachments li audio")) == 1, "no player")
    send(browser, "Transcribe this audio.")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    assert re.search(r"prompt 29 tokens", stats(browser)), stats(browser)  # 4 + 13 audio + 12 text positions
    user = browser.find_elements(By.CSS_SELECTOR, "#messages .message")[0]
    assert user.find_element(By.CSS_SELECTOR, "figcaption").text == "lfm2-audio-chirp-1s-16k.wav"

    # A file whose data URL is over a million characters is kept for the tab only: the
    # stored conversation has its name, and after a reload the page says it was not kept.
    big = tmp_path / "long-noise.wav"
    with wave.open(str(big), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        rng = random.Random(5)
        w.writeframes(bytes(rng.getrandbits(8) for _ in range(2 * 16000 * 24)))
    browser.find_element(By.ID, "new-chat").click()
    chooser.send_keys(str(big))
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attachments li audio")) == 1, "no player")
    send(browser, "Transcribe this audio.")
    wait(browser, lambda d: last_reply(d)[1] in ("done", "error"), "the reply did not end")
    index, records, attachments = stored(browser)
    attachment = records[index[-1]["id"]]["messages"][0]["attachments"][0]
    assert attachment["name"] == "long-noise.wav" and attachment["key"] is None
    small = records[index[0]["id"]]["messages"][0]["attachments"][0]
    assert attachments[small["key"]].startswith("data:audio/")  # the small clip is kept, under its own key
    assert list(attachments) == [small["key"]]
    browser.refresh()
    wait_for_model(browser)
    wait(browser, lambda d: "(not kept in this browser)" in d.find_element(By.CSS_SELECTOR, "#messages .message.user").text,
         "the page did not say the attachment was not kept")


# Test code, injected with execute_script: the next chat request gets a stream the test
# writes (window.__sse.send(delta) / .end(reason)) instead of the server's.
FAKE_STREAM = """
    const encoder = new TextEncoder();
    let stream = null;
    const chunk = (o) => stream.enqueue(encoder.encode('data: ' + JSON.stringify(o) + '\\n\\n'));
    window.__sse = {
      started: () => stream !== null,
      send: (delta) => chunk({ choices: [{ index: 0, delta, finish_reason: null }] }),
      end: (reason) => {
        chunk({ choices: [{ index: 0, delta: {}, finish_reason: reason }] });
        chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 } });
        stream.enqueue(encoder.encode('data: [DONE]\\n\\n'));
        stream.close();
      },
    };
    const fetch = window.fetch;
    window.fetch = (url, init) => String(url).endsWith('/v1/chat/completions')
      ? Promise.resolve(new Response(new ReadableStream({ start(c) { stream = c; } }),
                                     { headers: { 'Content-Type': 'text/event-stream' } }))
      : fetch(url, init);"""


def reply_parts(driver):
    """The last message's code blocks ([lang, code]), inline code, tool calls ([name, arguments])
    and body text, read in one step."""
    return driver.execute_script("""
        const m = document.querySelector('#messages .message:last-child');
        return {
          blocks: [...m.querySelectorAll('.body pre.code')].map(p =>
            [p.querySelector('.lang') ? p.querySelector('.lang').textContent : null, p.querySelector('code').textContent]),
          inline: [...m.querySelectorAll('.body code.inline')].map(c => c.textContent),
          calls: [...m.querySelectorAll('.tool-call')].map(c =>
            [c.querySelector('.tool-name code').textContent, c.querySelector('.tool-args').textContent]),
          text: m.querySelector('.body').textContent,
          elements: m.querySelectorAll('.body *:not(pre):not(code):not(span.lang), .tool-calls b, .tool-calls img').length,
        };""")


def test_a_code_fence_and_a_tool_call_show_while_they_stream(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    browser.execute_script(FAKE_STREAM)
    send(browser, "Show me code.")
    wait(browser, lambda d: d.execute_script("return window.__sse.started()"), "the page did not ask for a reply")
    sse = lambda delta: browser.execute_script("window.__sse.send(arguments[0])", delta)  # noqa: E731

    # A fence that opens mid-stream is a code block at once; its code grows; it closes later.
    sse({"role": "assistant", "content": "Here:\n``"})
    sse({"content": "`py"})
    wait(browser, lambda d: reply_parts(d)["blocks"] == [["py", ""]], "the opened fence is not a code block")
    assert reply_parts(browser)["text"] == "Here:py"
    sse({"content": "thon\nprint('<b>1</b>')\n"})
    wait(browser, lambda d: reply_parts(d)["blocks"][0][1].startswith("print('<b>1</b>')"), "the code did not grow")
    assert reply_parts(browser)["blocks"][0][0] == "python"
    sse({"content": "x = 2\n``"})
    sse({"content": "`\nDone with `x"})
    wait(browser, lambda d: reply_parts(d)["text"].endswith("Done with `x"), "the text after the fence is not shown")
    assert reply_parts(browser)["blocks"] == [["python", "print('<b>1</b>')\nx = 2"]]
    sse({"content": "` and <i>y</i>."})
    wait(browser, lambda d: reply_parts(d)["inline"] == ["x"], "the inline code is not shown as code")

    # A tool call: its name, then its arguments piece by piece, as text.
    sse({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]})
    wait(browser, lambda d: reply_parts(d)["calls"] == [["get_weather", ""]], "the tool call's name is not shown")
    sse({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "<b>Pa'}}]})
    wait(browser, lambda d: reply_parts(d)["calls"] == [["get_weather", '{"city": "<b>Pa']], "the arguments did not stream")
    sse({"tool_calls": [{"index": 0, "function": {"arguments": 'ris</b>"}'}}]})
    wait(browser, lambda d: reply_parts(d)["calls"] == [["get_weather", '{"city": "<b>Paris</b>"}']], "the arguments did not end")
    browser.execute_script("window.__sse.end('tool_calls')")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    live = reply_parts(browser)
    assert live["elements"] == 0, "model text made no elements but code"
    assert live["text"] == "Here:pythonprint('<b>1</b>')\nx = 2Done with x and <i>y</i>."

    # The stored reply renders the same after a reload, tool call included.
    shown = messages(browser)
    browser.refresh()
    wait(browser, lambda d: len(messages(d)) == 2, "the conversation did not come back after a reload")
    assert messages(browser) == shown
    assert reply_parts(browser) == live


def test_another_tab_shows_the_conversation_once_saved(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    second = browser.current_window_handle
    browser.switch_to.window(first)
    browser.execute_script(FAKE_STREAM)
    send(browser, "Hello from the first tab.")
    wait(browser, lambda d: d.execute_script("return window.__sse.started()"), "the page did not ask for a reply")
    browser.execute_script("window.__sse.send({content: 'Hi from the stream.'}); window.__sse.end('stop')")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    browser.switch_to.window(second)
    wait(browser, lambda d: messages(d) == [("user", "done", "Hello from the first tab."), ("assistant", "done", "Hi from the stream.")],
         "the other tab did not show the conversation")
    titles = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#conversation-list button.open")]
    assert titles == ["Hello from the first tab."]


def test_the_streamed_rendering_ends_as_the_whole_texts(page_server, browser):
    """The page's incremental renderer, fed random texts in random pieces, ends with the same
    DOM as the renderer of a whole text (the one a reload uses)."""
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    result = browser.execute_script("""
        return (async () => {
          const { renderText, TextStream } = await import('/webui/markup.js');
          const shape = (el) => {
            const out = [];
            for (const n of el.childNodes) {
              if (n.nodeType === Node.TEXT_NODE) {
                if (!n.data) continue;
                if (typeof out[out.length - 1] === 'string') out[out.length - 1] += n.data; else out.push(n.data);
              } else out.push([n.tagName, n.className, [...n.childNodes].map(k => [k.nodeName, k.className || '', k.textContent])]);
            }
            return JSON.stringify(out);
          };
          const pieces = ['`', '`', '``', '```', '\\n', '\\n', 'a', ' b', 'py', '\\n```\\n', '```js\\n', 'x`y', '<b>'];
          let seed = 42;
          const random = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
          const failures = [];
          let cases = 0;
          for (; cases < 3000; cases++) {
            let text = '';
            for (let i = random(30); i > 0; i--) text += pieces[random(pieces.length)];
            const whole = document.createElement('div');
            renderText(whole, text);
            const streamed = document.createElement('div');
            const stream = new TextStream(streamed);
            for (let at = 0; at < text.length; ) {
              const n = 1 + random(5);
              stream.append(text.slice(at, at + n));
              at += n;
            }
            stream.finish();
            if (shape(whole) !== shape(streamed)) failures.push([text, shape(whole), shape(streamed)]);
          }
          return { cases, failures: failures.slice(0, 5) };
        })();""")
    assert result["cases"] == 3000 and result["failures"] == [], result


def test_a_tool_call_from_the_server_is_shown(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    set_setting(browser, "max-tokens", "80")
    # Test code: the page sends no tools; this adds one, and requires a call, to the request.
    browser.execute_script("""
        const fetch = window.fetch;
        window.fetch = (url, init) => {
          if (String(url).endsWith('/v1/chat/completions')) {
            const body = JSON.parse(init.body);
            body.tools = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather of a city',
              parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 } }, required: ['city'],
                            additionalProperties: false } } }];
            body.tool_choice = 'required';
            init = { ...init, body: JSON.stringify(body) };
          }
          return fetch(url, init);
        };""")
    send(browser, "What's the weather in Paris?")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
    calls = reply_parts(browser)["calls"]
    assert calls and all(name == "get_weather" for name, _ in calls), calls
    assert isinstance(json.loads(calls[0][1])["city"], str)


# Test code, injected with execute_script before the request: adds `ignore_eos` to the chat
# request (the settings have no such field), keeps a copy of the streamed text as the server
# sent it, and measures the page: how late a 20 ms timer fires (the longest main-thread
# stall), the Long Tasks the browser reports, the longest gap between animation frames,
# and every localStorage write.
PROBE = """
    const probe = window.__probe = { lateness: 0, longTasks: [], frameGap: 0, streamed: '', events: 0, done: false };
    let due = performance.now() + 20;
    (function tick() {
      const now = performance.now();
      probe.lateness = Math.max(probe.lateness, now - due);
      due = now + 20;
      if (!probe.done) setTimeout(tick, 20);
    })();
    let lastFrame = null;
    (function frame(t) {
      if (lastFrame !== null) probe.frameGap = Math.max(probe.frameGap, t - lastFrame);
      lastFrame = t;
      if (!probe.done) requestAnimationFrame(frame);
    })(null);
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) probe.longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
    const fetch = window.fetch;
    window.fetch = async (url, init) => {
      if (!String(url).endsWith('/v1/chat/completions')) return fetch(url, init);
      const body = JSON.parse(init.body);
      body.ignore_eos = true;
      const response = await fetch(url, { ...init, body: JSON.stringify(body) });
      const copy = response.clone();
      (async () => {
        const reader = copy.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf('\\n\\n')) >= 0) {
            const line = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
            for (const c of JSON.parse(line.slice(6)).choices || []) {
              if (c.delta && c.delta.content) { probe.streamed += c.delta.content; probe.events++; }
            }
          }
        }
        probe.copied = true;
      })();
      return response;
    };"""


def test_a_2000_token_reply_keeps_the_page_responsive(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    # Another conversation with 200 KB of text: saving the streaming reply must not write it.
    big = {"id": "cbig", "title": "big", "messages": [{"role": "user", "content": "x" * 200_000}]}
    browser.execute_script(
        "localStorage.setItem('leap-ref.index', JSON.stringify([{id: 'cbig', title: 'big'}]));"
        "localStorage.setItem('leap-ref.conversation.cbig', arguments[0]);", json.dumps(big))
    browser.refresh()
    wait_for_model(browser)
    browser.find_element(By.ID, "new-chat").click()
    set_setting(browser, "max-tokens", "2000")
    set_setting(browser, "seed", "11")
    browser.execute_script(PROBE + COUNT_WRITES)
    send(browser, "Write a long story.")
    wait(browser, lambda d: len(last_reply(d)[2]) > 0, "no streamed text")
    started = time.monotonic()

    # Mid-stream, the message box takes typing at once.
    wait(browser, lambda d: len(last_reply(d)[2]) > 2000, "the reply did not grow")
    assert last_reply(browser)[1] == "streaming"
    box = browser.find_element(By.ID, "message")
    before = time.monotonic()
    box.send_keys("typing while it streams")
    typing = time.monotonic() - before
    assert box.get_attribute("value") == "typing while it streams"
    assert last_reply(browser)[1] == "streaming", "typing was not tested mid-stream"
    box.clear()

    # (Polling the state alone: reading the whole reply's text every 0.1 s would load the page.)
    wait(browser, lambda d: d.execute_script("return document.querySelector('#messages .message:last-child').dataset.state")
         in ("done", "error"), "the 2000-token reply did not finish", timeout=900)
    seconds = time.monotonic() - started
    wait(browser, lambda d: d.execute_script("return window.__probe.copied === true"), "the copy of the stream did not end")
    probe = browser.execute_script("window.__probe.done = true; return window.__probe")
    writes = browser.execute_script("return window.__writes")
    assert last_reply(browser)[1] == "done", last_reply(browser)
    tokens = int(re.search(r"(\d+) tokens ·", stats(browser)).group(1))
    conversation = browser.execute_script("return JSON.parse(localStorage.getItem('leap-ref.current'))")
    record_key = "leap-ref.conversation." + conversation
    record = browser.execute_script("return localStorage.getItem(arguments[0])", record_key)
    streaming = [w for w in writes if w["key"] == record_key]
    others = [w["key"] for w in writes if w["key"] != record_key]
    stall = max([probe["lateness"], *probe["longTasks"]])
    print(f"\n2000-token reply: {tokens} tokens, {probe['events']} content events, {len(probe['streamed'])} characters "
          f"in {seconds:.1f} s; longest timer lateness {probe['lateness']:.1f} ms, long tasks "
          f"{sorted(round(t) for t in probe['longTasks'])[-5:]} ms, longest frame gap {probe['frameGap']:.1f} ms; "
          f"typing took {typing * 1000:.0f} ms; localStorage: {len(streaming)} writes of the conversation "
          f"({len(streaming) / tokens:.3f} a token, {sum(w['bytes'] for w in streaming) / tokens:.0f} bytes a token, "
          f"largest {max(w['bytes'] for w in streaming)} bytes), other writes {others}")

    # All of the text: the page's stored reply is the text the server sent, and the page
    # shows it as a reload (rendering the stored text whole) does.
    assert tokens == 2000
    stored_reply = json.loads(record)["messages"][1]["content"]
    assert stored_reply == probe["streamed"], (len(stored_reply), len(probe["streamed"]))
    assert len(stored_reply) > 2000
    shown = messages(browser)
    assert shown[1][0] == "assistant" and len(shown[1][2]) > 0.9 * len(stored_reply.replace("```", "")), shown[1]

    # The page stayed responsive: no main-thread stall near 200 ms while 2000 tokens streamed.
    assert stall < 200, {k: v for k, v in probe.items() if k != "streamed"}
    assert typing < 2, typing
    # Saving: the streaming conversation alone, at most four times a second, never the 200 KB
    # one; nothing else while it streamed but the current conversation's id at its start.
    assert set(others) <= {"leap-ref.current", "leap-ref.index"}, others
    assert all(w["bytes"] <= len(record) for w in streaming)
    assert len(streaming) <= seconds * 4 + 8, (len(streaming), seconds)

    browser.refresh()
    wait(browser, lambda d: len(messages(d)) == 2, "the conversation did not come back after a reload")
    reloaded = messages(browser)[1][2]
    assert reloaded == shown[1][2], [(i, a, b) for i, (a, b) in enumerate(zip(reloaded, shown[1][2])) if a != b][:3]
