#!/bin/sh
# Conformance against Hugging Face (see conformance_check.cc): generate the corpus, run the
# reference through Node, then compare. Fails (never skips) when Node or the npm packages are missing.
# Usage: run_conformance.sh <checker> <tests/oracle dir> <work dir> <tokenizer name>...
set -eu
checker=$1
oracle=$2
work=$3
shift 3
if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node is not installed; it runs the Hugging Face reference" >&2
  exit 1
fi
if [ ! -d "$oracle/node_modules/@huggingface/transformers" ]; then
  echo "FAIL: $oracle/node_modules is missing; run: cd $oracle && ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts" >&2
  exit 1
fi
mkdir -p "$work"
node "$oracle/tokenizer_corpus.mjs" "$work/corpus.json"
node "$oracle/tokenizer_reference.mjs" "$work/corpus.json" "$work" "$@"
references=""
for name in "$@"; do references="$references $work/$name.json"; done
# shellcheck disable=SC2086
exec "$checker" "$work/corpus.json" $references
