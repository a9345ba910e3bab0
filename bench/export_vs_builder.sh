#!/usr/bin/env bash
# A Hugging Face export next to the onnxruntime-genai builder's graph of the same shape: how fast
# we run the standard-op file (torch.onnx's graph) relative to the fused-op one, and how fast
# ONNX Runtime runs the same export. Rounds alternate the three runs; prints a markdown table.
#
#   bench/export_vs_builder.sh EXPORT_DIR... [--prompt-len P] [--gen-len G] [--repeat R]
#                              [--threads N] [--rounds K] [--build DIR]
#
# EXPORT_DIR holds model.onnx + config.json (tools/hf_export/export_fixtures.py --bench writes
# int4 ones: dynamo export, ORT's MatMulNBitsQuantizer block 32, accuracy level 4). The builder's
# graph comes from tools/build_model.py --config EXPORT_DIR/config.json with the same
# quantization (random weights of the same shape), built once into BUILD/export-vs-builder/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prompt_len=128 gen_len=32 repeat=3 threads=1 rounds=2 build=$repo/build exports=()
while (($#)); do
  case $1 in
    --prompt-len) prompt_len=$2; shift 2 ;;
    --gen-len) gen_len=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -*) echo "export_vs_builder: unknown argument $1" >&2; exit 1 ;;
    *) exports+=("$1"); shift ;;
  esac
done
ours=$build/src/cli/onnx-genai
[[ -x $ours ]] || { echo "export_vs_builder: $ours is missing; build it: ninja -C $build onnx-genai" >&2; exit 1; }
((${#exports[@]})) || { echo "export_vs_builder: name at least one export folder" >&2; exit 1; }

decode_rate() {  # MODEL_DIR -> our decode tok/s
  "$ours" bench "$1" --prompt-len "$prompt_len" --gen-len "$gen_len" --repeat "$repeat" --threads "$threads" --json |
    python3 -c 'import json,sys; t=sys.stdin.read(); print(json.loads(t[t.index("{"):])["decode_tok_s"])'
}
ort_rate() {  # MODEL_DIR -> ONNX Runtime's decode tok/s on the same file
  node "$repo/bench/ort_generate_bench.mjs" "$1/model.onnx" --prompt-len "$prompt_len" --gen-len "$gen_len" \
    --repeat "$repeat" --threads "$threads" | python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tok_s"])'
}

echo "| export | threads | ours on the export tok/s | ours on the builder graph tok/s | export / builder | ORT on the export tok/s | ours / ORT (export) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for export in "${exports[@]}"; do
  builder=$build/export-vs-builder/$(basename "$export")
  if [[ ! -f $builder/model.onnx ]]; then
    /usr/bin/python3 "$repo/tools/build_model.py" "$builder" --config "$export/config.json" --weights int4 \
      --block-size 32 --accuracy-level 4 >/dev/null
  fi
  best_export=0 best_builder=0 best_ort=0
  for ((r = 0; r < rounds; ++r)); do  # best of the rounds: the machine is shared
    best_export=$(python3 -c "print(max($best_export, $(decode_rate "$export")))")
    best_builder=$(python3 -c "print(max($best_builder, $(decode_rate "$builder")))")
    best_ort=$(python3 -c "print(max($best_ort, $(ort_rate "$export")))")
  done
  python3 -c "print('| $(basename "$export") | $threads | %.1f | %.1f | %.2f | %.1f | %.2f |' % ($best_export, $best_builder, $best_export / $best_builder, $best_ort, $best_export / $best_ort))"
done
