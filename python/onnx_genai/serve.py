"""`python -m onnx_genai.serve [MODEL] [options]`: the OpenAI-compatible server, `onnx-genai serve`
(its options: `python -m onnx_genai.serve --help`). Runs the onnx-genai executable named by
$ONNX_GENAI_CLI, else the one the build put beside this package, else onnx-genai on PATH."""

import os
import shutil
import sys


def executable():
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx-genai")
    for candidate in (os.environ.get("ONNX_GENAI_CLI"), beside, shutil.which("onnx-genai")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def main(args=None):
    path = executable()
    if path is None:
        sys.exit("onnx_genai.serve: no onnx-genai executable (set ONNX_GENAI_CLI or put onnx-genai on PATH)")
    args = sys.argv[1:] if args is None else args
    if args[:1] == ["--help"]:
        args = ["--help"]
    os.execv(path, [path, "serve", *args])


if __name__ == "__main__":
    main()
