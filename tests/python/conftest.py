"""Fixtures for the Python package's tests: the default model, its tokenizer and the CLI (paths
come from ctest's environment; see tests/python/CMakeLists.txt), and the generation loop a user
writes."""

import os
import subprocess
import sys
import threading
import time

import pytest

import onnx_genai as og

MODEL_DIR = os.environ.get("OG_MODEL_DIR", os.path.join(os.path.dirname(__file__), "../../models/debian-prose-11m"))


@pytest.fixture(scope="session")
def model():
    return og.Model(MODEL_DIR)


@pytest.fixture(scope="session")
def tokenizer(model):
    return og.Tokenizer(model)


@pytest.fixture(scope="session")
def cli():
    """Runs `onnx-genai ARGS...` and returns its standard output without the newline it ends with."""
    path = os.environ.get("OG_CLI")
    if not path:
        pytest.skip("OG_CLI is not set (ctest sets it)")

    def run(*args):
        out = subprocess.run([path, *args], check=True, capture_output=True, text=True).stdout
        return out.removesuffix("\n")

    return run


def generate(model, tokenizer, prompt, guidance=None, **options):
    """onnxruntime_genai's generation loop; `guidance` is set_guidance's (type, data). Returns the
    generator and the streamed text."""
    params = og.GeneratorParams(model)
    params.set_search_options(**options)
    if guidance:
        params.set_guidance(*guidance)
    generator = og.Generator(model, params)
    generator.append_tokens(tokenizer.encode(prompt))
    stream = tokenizer.create_stream()
    text = ""
    while not generator.is_done():
        generator.generate_next_token()
        text += stream.decode(generator.get_next_tokens()[0])
    return generator, text


def run_without_the_gil(call, meanwhile=None):
    """Runs call() in a thread and returns what it returns, asserting that the main thread ran while
    the call did: with a switch interval of 1 s, a thread holding the GIL keeps it past the call's
    end, so no tick of the main thread could fall inside the call unless the call released the
    GIL. `meanwhile()` runs on the main thread once the call has started."""
    window, ticks, result = [], [], []
    started = threading.Event()

    def work():
        started.set()
        begin = time.monotonic()
        result.append(call())
        window.extend([begin, time.monotonic()])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        worker = threading.Thread(target=work)
        worker.start()
        started.wait()
        if meanwhile:
            meanwhile()
        while worker.is_alive():
            ticks.append(time.monotonic())
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    begin, end = window
    assert any(begin < tick < end for tick in ticks), f"no tick inside the {1000 * (end - begin):.1f} ms call"
    return result[0]
