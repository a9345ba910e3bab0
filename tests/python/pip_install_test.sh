#!/usr/bin/env bash
# `pip install build/python` offline into a fresh virtual environment of Debian's Python (with
# its numpy), then a generation from another folder: the installed package must load its own
# copy of libonnx_genai.so.
#   pip_install_test.sh BUILD_PYTHON_DIR MODEL_DIR
set -euo pipefail
package=$1 model=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
# A copy: pip builds in place, and the build tree must stay as CMake left it.
cp -r "$package" "$scratch/src"
PIP_NO_INDEX=1 "$scratch/venv/bin/pip" install --quiet "$scratch/src"
cd "$scratch"
"$scratch/venv/bin/python" - "$model" <<'PY'
import sys
import onnx_genai as og
assert "/venv/" in og.__file__, og.__file__
model = og.Model(sys.argv[1])
tokenizer = og.Tokenizer(model)
params = og.GeneratorParams(model)
params.set_search_options(max_length=16)
generator = og.Generator(model, params)
generator.append_tokens(tokenizer.encode("The Lord is my shepherd"))
while not generator.is_done():
    generator.generate_next_token()
print("installed onnx_genai generated:", repr(tokenizer.decode(generator.get_sequence(0))))
PY
