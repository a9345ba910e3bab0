"""`python -m onnx_genai.serve`: the package starts the OpenAI-compatible server, which answers
and exits 0 on SIGTERM."""

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

from conftest import MODEL_DIR


def test_python_m_serve_starts_the_server():
    env = dict(os.environ)
    env.pop("ONNX_GENAI_CLI", None)  # the executable beside the package
    proc = subprocess.Popen([sys.executable, "-m", "onnx_genai.serve", MODEL_DIR, "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        for line in proc.stderr:
            match = re.search(r"listening on (http://[\d.]+:\d+)", line)
            if match:
                url = match.group(1)
                break
        assert url, "the server did not start"
        body = json.dumps({"prompt": "The Lord is", "max_tokens": 4, "temperature": 0}).encode()
        request = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
        reply = json.load(urllib.request.urlopen(request, timeout=60))
        assert reply["object"] == "text_completion"
        assert reply["usage"]["completion_tokens"] == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
