#!/usr/bin/env bash
# The speculative-decoding target (issue 23): a 94M model of the default model's family (same
# tokenizer, same corpus) that models/debian-prose-11m drafts for. On one GPU, about 3 minutes:
#   tools/train/train_target.sh CORPUS_DIR OUT_DIR
# CORPUS_DIR is tools/train/corpus.py's output (train.txt, valid.txt); OUT_DIR receives the int4
# package (MatMulNBits block 32, accuracy level 4, int4 embeddings, about 58 MB) and train_log.json.
set -euo pipefail
corpus=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The corpus is about 2M tokens: at this size the model memorises it within a few hundred steps,
# so heavy dropout, a lower peak rate and the best-validation weights (see README.md here).
python3 "$here/train_model.py" --target --corpus "$corpus" --tokenizer "$root/models/debian-prose-11m" \
  --out "$work/ckpt" --device cuda --steps 2000 --warmup 100 --eval-every 100 --dropout 0.3 --lr 6e-4 --seed 0
python3 "$root/tools/build_model.py" --config "$work/ckpt/config.json" --checkpoint "$work/ckpt" --style genai \
  --tokenizer-dir "$work/ckpt" "$out" --weights int4 --block-size 32 --accuracy-level 4 --quantize-embeddings
cp "$work/ckpt/train_log.json" "$out/"
