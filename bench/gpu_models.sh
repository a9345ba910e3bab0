#!/usr/bin/env bash
# Whole models on the GPU: Qwen2.5-0.5B's shape with random weights (tools/build_model.py), int4
# (MatMulNBits block 32, accuracy level 4, f16 activations; CUDA graphs on and off) and fp16 (next
# to PyTorch on the same weights: bench/torch_reference.py), side by side in one run, next to the
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

echo
echo "## Whole models on the GPU (bench/gpu_models.sh)"
echo
echo "Greedy, 128 new tokens after a prompt of 'context' tokens. Roofline: the weight bytes a step reads"
echo "(embedding rows aside; the KV cache not counted) at the measured copy bandwidth ($copy_gb_s GB/s)."
echo "8-token steps: ms/token is ms per step of 8 fed tokens (the M=8 step; compare with the M=1 row)."
echo
echo "| model | engine | context | decode tok/s | ms/token | roofline ms/token | of roofline | prefill tok/s | TTFT ms | graphs per step | transfers |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
status=0
# name : build arguments : CUDA graph settings to compare : "torch" for PyTorch on the same weights
for spec in "qwen2.5-0.5b-int4:--weights int4 --block-size 32 --accuracy-level 4 --io-dtype f16:on off:" \
            "qwen2.5-0.5b-fp16:--weights float --io-dtype f16:on:torch"; do
  IFS=: read -r name build_args graph_settings torch <<<"$spec"
  read -r -a args <<<"$build_args"
  checkpoint=$models/$name.safetensors
  [[ -n $torch ]] && args+=(--save-checkpoint "$checkpoint")
  dir=$(build "$name" "${qwen05b[@]}" "${args[@]}") || { echo "| $name | build failed | | | | | | | | | |"; status=1; continue; }
  bytes=$(read_bytes "$dir/model.onnx") || { echo "| $name | cannot read $dir/model.onnx | | | | | | | | | |"; status=1; continue; }
  for prompt in 128 2048; do
    for graphs in $graph_settings; do
      if json=$("$ours" bench "$dir" --device cuda --cuda-graphs "$graphs" --prompt-len $prompt --gen-len 128 --json 2>&1); then
        row "$name" "onnx-genai, graphs $graphs" $prompt "$bytes" "$json" "$copy_gb_s"
      else
        echo "| $name | onnx-genai, graphs $graphs | $prompt | failed: $(echo "$json" | tail -1) | | | | | | | |"
        status=1
      fi
    done
    if [[ $prompt == 128 ]]; then  # a speculative verify's shape: 8 tokens fed per step, one sampled
      if json=$("$ours" bench "$dir" --device cuda --step-tokens 8 --prompt-len $prompt --gen-len 64 --json 2>&1); then
        row "$name" "onnx-genai, graphs on, 8-token steps" $prompt "$bytes" "$json" "$copy_gb_s"
      else
        echo "| $name | onnx-genai, 8-token steps | $prompt | failed: $(echo "$json" | tail -1) | | | | | | | |"
        status=1
      fi
    fi
    # PyTorch at the short context only: each context is another compilation (minutes).
    [[ -z $torch || $prompt != 128 ]] && continue
    if json=$(timeout 240 "$python" "$repo/bench/torch_reference.py" "$dir" "$checkpoint" --prompt-len $prompt --gen-len 128 2>&1); then
      row "$name" "PyTorch fp16 (torch.compile)" $prompt "$bytes" "$json" "$copy_gb_s"
    else
      echo "| $name | PyTorch | $prompt | failed: $(echo "$json" | tail -1 | cut -c1-160) | | | | | | | |"
    fi
  done
done
exit $status
