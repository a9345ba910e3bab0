#!/usr/bin/env bash
# Whole models on the GPU: Qwen2.5-0.5B's shape with random weights (tools/build_model.py; int4
# MatMulNBits block 32, accuracy level 4, f16 activations), greedy decode with CUDA graphs on and
# off, side by side in one run, next to the HBM roofline (the model's bytes / the measured copy
# bandwidth: an upper bound on what a token must read, since it counts the whole embedding
# table). Prints a markdown section (gpu-check appends it to its report).
#
#   bench/gpu_models.sh ONNX_GENAI MODELS_DIR [COPY_GB_S]
#
# COPY_GB_S: the device's copy bandwidth (read + write) measured by cuda_bench in the same run;
# default 4185, the last H200 reading.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ours=${1:?usage: gpu_models.sh ONNX_GENAI MODELS_DIR [COPY_GB_S]}
models=${2:?usage: gpu_models.sh ONNX_GENAI MODELS_DIR [COPY_GB_S]}
copy_gb_s=${3:-4185}
python=${OG_PYTHON:-python3}

qwen05b=(--preset qwen2 --set vocab_size=151936 --set hidden_size=896 --set num_hidden_layers=24
         --set num_attention_heads=14 --set num_key_value_heads=2 --set intermediate_size=4864
         --set max_position_embeddings=32768 --set rope_theta=1000000.0)

build() {  # build NAME ARGS...: the model folder, built when missing
  local dir=$models/$1
  shift
  if [[ ! -f $dir/model.onnx ]]; then
    mkdir -p "$models"
    "$python" "$repo/tools/build_model.py" --style genai "$@" "$dir" >&2 || return 1
  fi
  echo "$dir"
}

echo
echo "## Whole models on the GPU (bench/gpu_models.sh)"
echo
echo "| model | context | CUDA graphs | decode tok/s | ms/token | roofline ms/token | of roofline | prefill tok/s | TTFT ms | graphs per step | transfers |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
status=0
for spec in "qwen2.5-0.5b-int4:--weights int4 --block-size 32 --accuracy-level 4 --io-dtype f16"; do
  name=${spec%%:*}
  read -r -a args <<<"${spec#*:}"
  dir=$(build "$name" "${qwen05b[@]}" "${args[@]}") || { echo "| $name | build failed | | | | | | | | | |"; status=1; continue; }
  bytes=$(du -cb "$dir"/model.onnx* | tail -1 | cut -f1)
  for prompt in 128 2048; do
    for graphs in on off; do
      json=$("$ours" bench "$dir" --device cuda --cuda-graphs $graphs --prompt-len $prompt --gen-len 128 --json 2>&1) ||
        { echo "| $name | $prompt | $graphs | failed: $(echo "$json" | tail -1) | | | | | | | |"; status=1; continue; }
      "$python" - "$json" "$name" "$prompt" "$graphs" "$bytes" "$copy_gb_s" <<'EOF'
import json, sys
r = json.loads(sys.argv[1]); name, prompt, graphs = sys.argv[2:5]
bytes_, copy = float(sys.argv[5]), float(sys.argv[6])
ms = 1e3 / r["decode_tok_s"]
roof = bytes_ / (copy * 1e9) * 1e3
print(f"| {name} | {prompt} | {graphs} | {r['decode_tok_s']:.1f} | {ms:.3f} | {roof:.3f} | {roof / ms:.2f} | "
      f"{r['prefill_tok_s']:.0f} | {r['ttft_ms']:.2f} | {r['decode_plan_graph_segments']} | {r['decode_plan_transfers']} |")
EOF
    done
  done
done
exit $status
