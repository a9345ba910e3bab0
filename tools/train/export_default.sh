#!/usr/bin/env bash
# Exports a trained checkpoint (train_model.py's OUT_DIR) as the shipped default model, or (with
# an output folder) as its fp16 variant:
#   tools/train/export_default.sh CHECKPOINT_DIR [int4|fp16] [OUT_DIR]
# int4 (default; OUT_DIR models/debian-prose-11m): MatMulNBits block 32, accuracy level 4, int4
# embeddings, with the checkpoint itself (float16 safetensors, the weights every variant is built
# from) copied into OUT_DIR/checkpoint; fp16: fp16 weights and I/O. Both are onnxruntime-genai
# packages built by tools/build_model.py. Greedy search defaults to no_repeat_ngram_size 3 and
# repetition_penalty 1.2: an 11M-parameter model's plain argmax falls into loops within a few
# dozen tokens.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ckpt=$1 variant=${2:-int4} out=${3:-$repo/models/debian-prose-11m}
# The shipped checkpoint folder sits inside the package, beside the tokenizer files.
tokenizer=$ckpt
[ -f "$ckpt/tokenizer.json" ] || tokenizer=$ckpt/..
build=(/usr/bin/python3 "$repo/tools/build_model.py" --config "$ckpt/config.json" --checkpoint "$ckpt" --style genai
       --tokenizer-dir "$tokenizer")
case $variant in
  int4) weights=(--weights int4 --block-size 32 --accuracy-level 4 --quantize-embeddings) ;;
  fp16) weights=(--weights float --io-dtype f16) ;;
  *) echo "export_default: variant must be int4 or fp16, not $variant" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${build[@]}" "$tmp/model" "${weights[@]}" >/dev/null
/usr/bin/python3 - "$tmp/model/genai_config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["search"].update(no_repeat_ngram_size=3, repetition_penalty=1.2)
with open(path, "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
PY
if [ "$variant" = int4 ] && [ "$(cd "$ckpt" && pwd)" != "$(cd "$out" 2>/dev/null && pwd)/checkpoint" ]; then
  mkdir -p "$tmp/model/checkpoint"
  cp "$ckpt"/config.json "$ckpt"/*.safetensors "$ckpt"/model.safetensors.index.json "$tmp/model/checkpoint/"
  cp "$ckpt"/train_log.json "$tmp/model/checkpoint/" 2>/dev/null || true
fi
mkdir -p "$out"
cp -r "$tmp/model/." "$out/"
