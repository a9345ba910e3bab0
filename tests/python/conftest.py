"""Fixtures for the Python package's tests: the default model, its tokenizer and the CLI (paths
come from ctest's environment; see tests/python/CMakeLists.txt), and the generation loop a user
writes."""

import os
import subprocess

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

