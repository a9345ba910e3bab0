"""An onnxruntime_genai chat script (ort_style_chat.py), run unchanged but for its import: its
streamed answer is the CLI's chat answer for the same question and settings."""

import os
import subprocess
import sys

from conftest import MODEL_DIR


def test_chat_script_streams_the_clis_answer(cli, tokenizer):
    script = os.path.join(os.path.dirname(__file__), "ort_style_chat.py")
    question = "Who is my shepherd?"
    result = subprocess.run([sys.executable, script, "-m", MODEL_DIR, "-e", "cpu", "--max_length", "48"],
                            input=question + "\n", capture_output=True, text=True, check=True)
    prompt = f"user: {question}\nassistant:"
    new_tokens = 48 - len(tokenizer.encode(prompt))
    expected = cli("generate", MODEL_DIR, "--prompt", question, "--chat", "--greedy", "--max-new-tokens", str(new_tokens))
    assert result.stdout == expected + "\n"
