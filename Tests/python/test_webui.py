"""The chat page at `/` in a real browser: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver, against `leap-ref serve` on 127.0.0.1 with SmolLM2.

The browser reaches nothing but the server: host names resolve nowhere, background
services are off, and the page's Content-Security-Policy allows its own origin only.
Every wait has a timeout and ends early when the condition holds.

Set LEAP_REF_SCREENSHOT=path.png to keep the screenshot of a finished conversation
(docs/images/webui.png is made so)."""

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


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = executable("chromium")
    for arg in [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'profile'}", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
        "--disable-default-apps", "--disable-domain-reliability", "--no-pings", "--metrics-recording-only",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--lang=en-US",
    ]:
        options.add_argument(arg)
    service = Service(executable_path=executable("chromedriver"), log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
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
    re-renders the streaming reply, so elements found earlier may be gone)."""
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


def test_model_text_is_shown_as_text_and_code_as_code(page_server, browser):
    browser.get(page_server.url + "/")
    wait_for_model(browser)
    hostile = "Look: <img src=x onerror=\"window.pwned=1\"> <b>bold</b>\n```python\nprint('<script>x</script>')\n```\nand `a<b`."
    conversation = {"id": "c1", "title": "t", "messages": [
        {"role": "user", "content": "<i>hi</i>"}, {"role": "assistant", "content": hostile, "state": "done"}]}
    browser.execute_script(
        "localStorage.setItem('leap-ref.conversations', arguments[0]); localStorage.setItem('leap-ref.current', '\"c1\"');",
        json.dumps([conversation]))
    browser.refresh()
    wait(browser, lambda d: len(messages(d)) == 2, "the stored conversation was not shown")
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
    send(browser, "Describe this picture.")

    # The reply streams in; the user message shows the image; its positions are in the prompt.
    wait(browser, lambda d: last_reply(d)[1] in ("streaming", "done"), "no reply started")
    wait(browser, lambda d: last_reply(d)[1] == "done", "the reply did not finish")
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
    stored = json.loads(browser.execute_script("return localStorage.getItem('leap-ref.conversations')"))
    attachment = stored[-1]["messages"][0]["attachments"][0]
    assert attachment["name"] == "long-noise.wav" and attachment["data"] is None
    assert stored[0]["messages"][0]["attachments"][0]["data"].startswith("data:audio/")  # the small clip is kept
    browser.refresh()
    wait_for_model(browser)
    wait(browser, lambda d: "(not kept in this browser)" in d.find_element(By.CSS_SELECTOR, "#messages .message.user").text,
         "the page did not say the attachment was not kept")
