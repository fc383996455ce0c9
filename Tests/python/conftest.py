"""Starts `leap-ref serve` processes on 127.0.0.1 for the end-to-end tests.

The binary is $LEAP_REF_BIN (scripts/test.sh sets it); models are the committed
lfm2-tiny fixture and SmolLM2 from the model cache (scripts/setup.sh). Servers bind
port 0 and report the port they got; a test waits for the server's own lines
("listening", "ready"), never for a timer.
"""

import json
import os
import pathlib
import queue
import signal
import subprocess
import threading
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "Tests" / "Fixtures" / "models" / "lfm2-tiny.gguf")
# The tiny LFM2-VL and LFM2-Audio fixtures and their media encoders (mmproj files).
VISION = str(ROOT / "Tests" / "Fixtures" / "models" / "lfm2-vl-tiny.gguf")
VISION_MMPROJ = str(ROOT / "Tests" / "Fixtures" / "models" / "mmproj-lfm2-vl-tiny.gguf")
AUDIO = str(ROOT / "Tests" / "Fixtures" / "models" / "lfm2-audio-tiny.gguf")
IMAGES = ROOT / "Tests" / "Fixtures" / "images"
SOUNDS = ROOT / "Tests" / "Fixtures" / "audio"
CACHE = os.environ.get("LEAP_REF_CACHE", os.path.expanduser("~/.cache/leap-ref"))
SMOLLM2 = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
# Generous limits that fail fast: every wait also ends when the server process exits.
START_TIMEOUT = 300
REQUEST_TIMEOUT = 300


def binary():
    path = os.environ.get("LEAP_REF_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("set LEAP_REF_BIN to the built leap-ref binary (scripts/test.sh does)")
    return path


class Server:
    """One `leap-ref serve` process and the lines it prints."""

    def __init__(self, model, *args):
        if not os.path.exists(model):
            pytest.fail(f"missing {model}: run ./scripts/setup.sh first")
        self.proc = subprocess.Popen(
            [binary(), "serve", "--model", model, "--host", "127.0.0.1", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()
        line = self.wait_for("leap-ref serve: listening on ")
        self.url = line.split("listening on ", 1)[1].strip()
        self.wait_for("leap-ref serve: ready: ")

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)  # the process closed its output: it is exiting

    def wait_for(self, text, timeout=START_TIMEOUT):
        """The next output line containing `text`; fails if the server exits first."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no line with {text!r} within {timeout} s; output:\n{''.join(self.log)}")
            if line is None:
                pytest.fail(f"the server exited (status {self.proc.wait()}) before printing {text!r}:\n{''.join(self.log)}")
            if text in line:
                return line

    def stop(self):
        """SIGTERM, then the exit status (graceful shutdown exits 0)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("the server did not exit within 60 s of SIGTERM")


@pytest.fixture(scope="module")
def smol_server():
    server = Server(SMOLLM2, "--parallel", "2", "--api-key", "test-key", "--metrics", "--ctx-size", "2048")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def tiny_server():
    server = Server(TINY, "--parallel", "4", "--metrics", "--ctx-size", "4096", "--queue", "64")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def vision_server():
    """The tiny LFM2-VL model with its mmproj file named by --mmproj."""
    server = Server(VISION, "--mmproj", VISION_MMPROJ, "--ctx-size", "2048", "--max-image-pixels", "200000")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def audio_server():
    """The tiny LFM2-Audio model; its mmproj file is found beside it."""
    server = Server(AUDIO, "--ctx-size", "2048")
    yield server
    assert server.stop() == 0


def http(method, url, body=None, headers=None, timeout=REQUEST_TIMEOUT):
    """One HTTP request with the standard library: (status, headers, body text). `body`
    is sent as JSON unless it is bytes."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    h = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()
