#!/usr/bin/env bash
# Whole models on the GPU: the shapes of Qwen2.5-0.5B, Qwen2.5-7B and GLM-4-9B with random weights
# (tools/build_model.py), int4 (MatMulNBits block 32 or 128, accuracy level 4, f16 activations) and
# fp16 (next to PyTorch on the same weights: bench/torch_reference.py), side by side in one run, next to the
# HBM roofline (the weight bytes a decode step reads — every initializer except tables only
# gathered from, like the embedding table — over the measured copy bandwidth). Prints a markdown
# section (gpu-check appends it to its report).
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

build() {  # build NAME ARGS...: the model folder, built when missing
  local dir=$models/$1
  shift
  if [[ ! -f $dir/model.onnx ]]; then
    mkdir -p "$models"
    "$python" "$repo/tools/build_model.py" --style genai "$@" "$dir" >&2 || return 1
  fi
  echo "$dir"
}

# read_bytes MODEL.onnx: bytes of the initializers a decode step reads (all but those that only
# Gather and GatherBlockQuantized read rows of).
read_bytes() {
  "$python" - "$1" <<'EOF'
import sys
import numpy as np
import onnx
model = onnx.load(sys.argv[1], load_external_data=False)
gathered, read = set(), set()
for node in model.graph.node:
    for i, name in enumerate(node.input):
        (gathered if node.op_type in ("Gather", "GatherBlockQuantized") and i == 0 else read).add(name)
total = 0
for t in model.graph.initializer:
    if t.name in gathered and t.name not in read:
        continue
    external = {e.key: e.value for e in t.external_data}
    total += int(external["length"]) if "length" in external else (
        len(t.raw_data) or int(np.prod(t.dims)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize)
print(total)
EOF
}

# row MODEL ENGINE CONTEXT BYTES JSON COPY_GB_S: one table row from a bench JSON (ours, or
# torch_reference.py's)
row() {
  "$python" - "$@" <<'EOF'
import json, sys
name, engine, context, bytes_, text, copy = sys.argv[1:7]
try:
    r = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]  # the first JSON object, past any log lines
except ValueError:
    print(f"| {name} | {engine} | {context} | no result: {' '.join(text.split())[:160]} | | | | | | | |")
    sys.exit(1)
ms = 1e3 / r["decode_tok_s"]
roof = float(bytes_) / (float(copy) * 1e9) * 1e3
print(f"| {name} | {engine} | {context} | {r['decode_tok_s']:.1f} | {ms:.3f} | {roof:.3f} | {roof / ms:.2f} | "
      f"{r['prefill_tok_s']:.0f} | {r['ttft_ms']:.2f} | {r.get('decode_plan_graph_segments', '')} | "
      f"{r.get('decode_plan_transfers', '')} |")
EOF
}

# Shapes (Hugging Face config values; random weights). GLM-4-9B's dimensions are built as Qwen2-style
# layers (the same matrices and attention shape; GLM's partial rotary does not change the bytes a
# step reads).
declare -A shapes=(
  [qwen2.5-0.5b]="--preset qwen2 --set vocab_size=151936 --set hidden_size=896 --set num_hidden_layers=24
    --set num_attention_heads=14 --set num_key_value_heads=2 --set intermediate_size=4864
    --set max_position_embeddings=32768 --set rope_theta=1000000.0"
  [qwen2.5-7b]="--preset qwen2 --set vocab_size=152064 --set hidden_size=3584 --set num_hidden_layers=28
    --set num_attention_heads=28 --set num_key_value_heads=4 --set intermediate_size=18944
    --set max_position_embeddings=32768 --set rope_theta=1000000.0 --set tie_word_embeddings=false"
  [glm-4-9b]="--preset qwen2 --set vocab_size=151552 --set hidden_size=4096 --set num_hidden_layers=40
    --set num_attention_heads=32 --set num_key_value_heads=2 --set intermediate_size=13696
    --set max_position_embeddings=32768 --set rope_theta=10000.0 --set tie_word_embeddings=false"
)
declare -A precisions=(
  [int4-b32]="--weights int4 --block-size 32 --accuracy-level 4 --io-dtype f16"
  [int4-b128]="--weights int4 --block-size 128 --accuracy-level 4 --io-dtype f16"
  [fp16]="--weights float --io-dtype f16"
)
# OG_GPU_MODELS: which SHAPE-PRECISION models to run (default: the 0.5B ones; a 7B build takes about
# a minute and an fp16 one with PyTorch next to it several).
selected=${OG_GPU_MODELS:-qwen2.5-0.5b-int4-b32 qwen2.5-0.5b-fp16}

# bench_row NAME DIR BYTES ENGINE CONTEXT ARGS...: one row of ours
bench_row() {
  local name=$1 dir=$2 bytes=$3 engine=$4 context=$5 json
  shift 5
  if json=$("$ours" bench "$dir" --device cuda --prompt-len "$context" --json "$@" 2>&1); then
    row "$name" "$engine" "$context" "$bytes" "$json" "$copy_gb_s"
  else
    echo "| $name | $engine | $context | failed: $(echo "$json" | grep -v '^\s*$' | tail -1) | | | | | | | |"
    return 1
  fi
}

echo
echo "## Whole models on the GPU (bench/gpu_models.sh)"
echo
echo "Greedy decode of 128 new tokens after a prompt of 'context' tokens (prefill rows: 8 new tokens)."
echo "Roofline: the weight bytes a step reads (embedding rows aside; the KV cache not counted) at the"
echo "measured copy bandwidth ($copy_gb_s GB/s). 8-token steps: ms/token is ms per step of 8 fed tokens"
echo "(the M=8 step; compare with the M=1 row)."
echo
echo "| model | engine | context | decode tok/s | ms/token | roofline ms/token | of roofline | prefill tok/s | TTFT ms | graphs per step | transfers |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
status=0
for name in $selected; do
  shape=${name%-int4-*}; shape=${shape%-fp16}
  precision=${name#"$shape"-}
  if [[ -z ${shapes[$shape]:-} || -z ${precisions[$precision]:-} ]]; then
    echo "| $name | unknown model (shapes: ${!shapes[*]}; precisions: ${!precisions[*]}) | | | | | | | | | |"
    status=1
    continue
  fi
  read -r -d '' -a args <<<"${shapes[$shape]} ${precisions[$precision]} --external-data"
  checkpoint=$models/$name.safetensors
  [[ $precision == fp16 ]] && args+=(--save-checkpoint "$checkpoint" --checkpoint-dtype f16)
  start=$SECONDS
  dir=$(build "$name" "${args[@]}") || { echo "| $name | build failed | | | | | | | | | |"; status=1; continue; }
  echo "$name: built in $((SECONDS - start)) s" >&2
  bytes=$(read_bytes "$dir/model.onnx") || { echo "| $name | cannot read $dir/model.onnx | | | | | | | | | |"; status=1; continue; }
  bench_row "$name" "$dir" "$bytes" "onnx-genai, graphs on" 128 --gen-len 128 || status=1
  [[ $name == qwen2.5-0.5b-int4-b32 ]] && { bench_row "$name" "$dir" "$bytes" "onnx-genai, graphs off" 128 --gen-len 128 --cuda-graphs off || status=1; }
  # A speculative verify's shape: 8 tokens fed per step, one sampled.
  bench_row "$name" "$dir" "$bytes" "onnx-genai, 8-token steps" 128 --gen-len 64 --step-tokens 8 || status=1
  bench_row "$name" "$dir" "$bytes" "onnx-genai, graphs on" 2048 --gen-len 128 || status=1
  for context in 512 1024; do bench_row "$name" "$dir" "$bytes" "onnx-genai, prefill" $context --gen-len 8 || status=1; done
  # PyTorch at the short context only: each context is another compilation (minutes).
  if [[ $precision == fp16 ]]; then
    if json=$(timeout 420 "$python" "$repo/bench/torch_reference.py" "$dir" "$checkpoint" --prompt-len 128 --gen-len 128 2>&1); then
      row "$name" "PyTorch fp16 (torch.compile)" 128 "$bytes" "$json" "$copy_gb_s"
    else
      echo "| $name | PyTorch | 128 | failed: $(echo "$json" | tail -1 | cut -c1-160) | | | | | | | |"
    fi
  fi
  # A 7B fp16 model and its checkpoint fill 30 GB of the GPU machine's disk.
  rm -rf "$dir" "$checkpoint"
done
exit $status
