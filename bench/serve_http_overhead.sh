#!/usr/bin/env bash
# What HTTP, JSON and server-sent events cost: the same random workload on the serving engine
# called in process (`bench-serve`) and through `onnx-genai serve` (`bench-serve --url`), run
# alternately in one session at each concurrency, with the same engine options. Prints a markdown
# table: output tok/s of each, their ratio, and the TTFT / TPOT p50 each adds.
#
#   bench/serve_http_overhead.sh ONNX_GENAI MODEL_DIR "1 64" [engine options...] [-- bench-serve options...]
#
# e.g. bench/serve_http_overhead.sh build/src/cli/onnx-genai models/debian-prose-11m "1 64" --threads 1 \
#        -- --num-requests 128 --prompt-len 64 --gen-len 64
# On a GPU give --kv-cache-memory: the server and the in-process engine each hold a pool.
set -euo pipefail
ours=${1:?usage: serve_http_overhead.sh ONNX_GENAI MODEL_DIR "CONCURRENCIES" [engine options] [-- bench options]}
model=${2:?model folder}
levels=${3:?concurrencies}
shift 3
engine=() bench=()
while (($#)); do [[ $1 == -- ]] && { shift; bench=("$@"); break; }; engine+=("$1"); shift; done
python=${OG_PYTHON:-python3}
log=$(mktemp)
"$ours" serve "$model" --port 0 --max-num-seqs 64 "${engine[@]}" 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do grep -q 'listening on' "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1)
[[ -n $url ]] || { cat "$log" >&2; exit 1; }
echo "| concurrency | engine tok/s | HTTP tok/s | HTTP / engine | TTFT p50 engine / HTTP ms | TPOT p50 engine / HTTP ms |"
echo "|---|---|---|---|---|---|"
for c in $levels; do
  a=$("$ours" bench-serve "$model" --concurrency "$c" --max-num-seqs 64 --json "${engine[@]}" "${bench[@]}")
  b=$("$ours" bench-serve "$model" --concurrency "$c" --url "$url" --json "${bench[@]}")
  "$python" - "$c" <<PY
import json, sys
a, b = json.loads('''$a'''), json.loads('''$b''')
print(f'| {sys.argv[1]} | {a["output_tok_s"]:.1f} | {b["output_tok_s"]:.1f} | {b["output_tok_s"] / a["output_tok_s"]:.3f} | '
      f'{a["ttft_ms"]["p50"]:.2f} / {b["ttft_ms"]["p50"]:.2f} | {a["tpot_ms"]["p50"]:.2f} / {b["tpot_ms"]["p50"]:.2f} |')
PY
done
