#!/usr/bin/env bash
# Serving throughput at several concurrencies, side by side in one run: `onnx-genai bench-serve`
# (the engine in process: continuous batching over the paged KV cache) on one model with the same
# random workload at concurrency 1 and each of the others, output tok/s and its ratio to
# concurrency 1, TTFT and TPOT (p50 / p99), KV waste and preemptions. Prints a markdown table.
#
#   bench/serve_load.sh ONNX_GENAI MODEL_DIR "1 8 32 64" [bench-serve options...]
#
# e.g. bench/serve_load.sh build/src/cli/onnx-genai models/debian-prose-11m "1 8" --threads 2 \
#        --num-requests 32 --prompt-len 64 --gen-len 64
set -euo pipefail
ours=${1:?usage: serve_load.sh ONNX_GENAI MODEL_DIR "CONCURRENCIES" [options]}
model=${2:?model folder}
levels=${3:?concurrencies}
shift 3
python=${OG_PYTHON:-python3}
echo "| concurrency | output tok/s | vs 1 | TTFT p50 / p99 ms | TPOT p50 / p99 ms | KV waste | preemptions |"
echo "|---|---|---|---|---|---|---|"
base=""
for c in $levels; do
  json=$("$ours" bench-serve "$model" --concurrency "$c" --json "$@")
  row=$("$python" - "$c" "${base:-0}" <<PY
import json, sys
j = json.loads('''$json''')
c, base = sys.argv[1], float(sys.argv[2])
tok = j["output_tok_s"]
ratio = tok / base if base > 0 else 1.0
print(f'{tok}||| {c} | {tok:.1f} | {ratio:.2f}x | {j["ttft_ms"]["p50"]:.1f} / {j["ttft_ms"]["p99"]:.1f} | '
      f'{j["tpot_ms"]["p50"]:.2f} / {j["tpot_ms"]["p99"]:.2f} | {100 * j["kv_waste"]:.1f}% | {j["preemptions"]} |')
PY
)
  [[ -z $base ]] && base=${row%%||*}
  echo "${row#*||}"
done
