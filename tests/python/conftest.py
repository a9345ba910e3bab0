"""Fixtures for the Python package's tests: the default model, its tokenizer and the CLI (paths
come from ctest's environment; see tests/python/CMakeLists.txt)."""

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
