#!/usr/bin/env bash
# Serving on the GPU through HTTP, next to llama.cpp's llama-server in the same lease, with one
# load tool (`onnx-genai bench-serve --url`): closed loop, streamed /v1/completions, random
# token-id prompts of PROMPT tokens and GEN output tokens (eos ignored), concurrency 1 and 64.
# Ours: the engine in process, then `onnx-genai serve --device cuda` (what HTTP costs); then
# llama-server (continuous batching, 64 slots, flash attention) on a random-weight Q4_0 GGUF of
# the same shape. Prints a markdown table and nvidia-smi -L.
#
#   bench/gpu_serve.sh ONNX_GENAI MODEL_DIR [LLAMA_SRV_TGZ ANCHOR_DIR SHAPE]
#
# LLAMA_SRV_TGZ: the llama-server source (../shared/anchors/llamacpp/mksrc_server.sh); ANCHOR_DIR:
# that folder (its mkmodel.py writes the GGUF); SHAPE: mkmodel.py's shape name (qwen2.5-0.5b).
# PROMPT / GEN / REQUESTS (for concurrency 64) override 1024 / 256 / 256.
set -uo pipefail
ours=${1:?usage: gpu_serve.sh ONNX_GENAI MODEL_DIR [LLAMA_SRV_TGZ ANCHOR_DIR SHAPE]}
model=${2:?model folder}
tgz=${3:-} anchors=${4:-} shape=${5:-qwen2.5-0.5b}
prompt=${PROMPT:-1024} gen=${GEN:-256} requests=${REQUESTS:-256}
work=$(mktemp -d)
if [[ -n $tgz ]]; then  # llama-server and its model first: nothing else runs while either is timed
  (tar xzf "$tgz" -C "$work" &&
   GGUF_PY=$work/src/gguf-py PYTHONPATH=$work/src/gguf-py python3 "$anchors/mkmodel.py" "$shape" q4_0 "$work/m.gguf" "$work/src/models/ggml-vocab-qwen2.gguf" &&
   cmake -S "$work/src" -B "$work/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
     -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF &&
   cmake --build "$work/b" --target llama-server -j"$(nproc)") >"$work/llama-build.log" 2>&1 ||
    { echo "llama-server build failed:"; tail -20 "$work/llama-build.log"; exit 1; }
fi
load=(--range 0 --prompt-len "$prompt" --gen-len "$gen" --json)
row() {  # name concurrency json
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
name, c, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print(f'| {name} | {c} | {j["output_tok_s"]:.0f} | {j["ttft_ms"]["p50"]:.1f} / {j["ttft_ms"]["p99"]:.1f} | '
      f'{j["tpot_ms"]["p50"]:.2f} / {j["tpot_ms"]["p99"]:.2f} |')
PY
}
count() { [[ $1 == 1 ]] && echo 8 || echo "$requests"; }
echo "| server | concurrency | output tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms |"
echo "|---|---|---|---|---|"
engine=(--device cuda --max-num-seqs 64 --kv-cache-memory 8GiB --max-num-batched-tokens 2048)
for c in 1 64; do
  j=$("$ours" bench-serve "$model" --concurrency "$c" --num-requests "$(count $c)" "${engine[@]}" "${load[@]}") &&
    row "onnx-genai engine (in process)" "$c" "$j"
done
"$ours" serve "$model" --port 8090 "${engine[@]}" 2>"$work/serve.log" &
server=$!
for _ in $(seq 600); do grep -q 'listening on' "$work/serve.log" && break; sleep 0.2; done
for c in 1 64; do
  j=$("$ours" bench-serve "$model" --url http://127.0.0.1:8090 --concurrency "$c" --num-requests "$(count $c)" "${load[@]}") &&
    row "onnx-genai serve (HTTP)" "$c" "$j"
done
kill -TERM $server; wait $server
if [[ -n $tgz ]]; then
  "$work/b/bin/llama-server" -m "$work/m.gguf" -ngl 99 -fa on -np 64 -c $((64 * (prompt + gen + 32))) -b 2048 -ub 512 \
    --port 8089 --no-webui >"$work/llama-server.log" 2>&1 &
  llama=$!
  for _ in $(seq 240); do curl -sf localhost:8089/health >/dev/null && break; sleep 1; done
  for c in 1 64; do
    j=$("$ours" bench-serve "$model" --url http://127.0.0.1:8089 --concurrency "$c" --num-requests "$(count $c)" "${load[@]}") &&
      row "llama-server $shape Q4_0" "$c" "$j"
  done
  kill $llama
fi
nvidia-smi -L
