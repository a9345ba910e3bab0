#!/usr/bin/env bash
# Soak test of `onnx-genai serve`: MINUTES of streamed chat at CONCURRENCY with random aborts
# (bench/serve_soak.mjs, the openai client from tests/oracle), then the RSS curve as a PNG
# (bench/serve_soak_plot.py). Exits non-zero on any request error.
#
#   bench/serve_soak.sh ONNX_GENAI MODEL_DIR MINUTES CONCURRENCY OUT_DIR [serve options...]
set -euo pipefail
ours=${1:?usage: serve_soak.sh ONNX_GENAI MODEL_DIR MINUTES CONCURRENCY OUT_DIR [serve options]}
model=${2:?model folder}
minutes=${3:?minutes}
concurrency=${4:?concurrency}
out=${5:?output folder}
shift 5
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"$ours" serve "$model" --port 0 "$@" 2>"$out/server.log" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 600); do grep -q 'listening on' "$out/server.log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' "$out/server.log" | head -1)
[[ -n $url ]] || { cat "$out/server.log" >&2; exit 1; }
node "$here/serve_soak.mjs" "$url" "$server" "$minutes" "$concurrency" "$out/rss.csv" | tee "$out/soak.jsonl"
python3 "$here/serve_soak_plot.py" "$out/rss.csv" "$out/rss.png"
kill -TERM $server && wait $server
echo "server exit status: $? (0 after draining); plot: $out/rss.png"
