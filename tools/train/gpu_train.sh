#!/usr/bin/env bash
# The GPU half of the default model's training, as run on one H200 (see README.md here):
#   tools/train/gpu_train.sh CORPUS_DIR OUT_DIR [train_model.py options...]
# trains the tokenizer and the model and leaves OUT_DIR/checkpoint.tar.gz.part-* (pieces under
# 15 MB, for transports with a per-file limit), train_log.json and loss.png.
set -euo pipefail
corpus=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
python3 -c 'import torch, tokenizers; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, torch.cuda.get_device_name())'
python3 "$here/train_tokenizer.py" "$corpus" "$work/tok" --vocab-size 8192 --context 512
python3 "$here/train_model.py" --token-ids "$work/tok" --tokenizer "$work/tok" --out "$work/ckpt" --device cuda "$@"
mkdir -p "$out"
cp "$work/ckpt/train_log.json" "$out/"
if [ -f "$work/ckpt/loss.png" ]; then cp "$work/ckpt/loss.png" "$out/"; fi
tar -C "$work" -czf - ckpt | split -b 15M -d - "$out/checkpoint.tar.gz.part-"
ls -la "$out"
