#!/usr/bin/env bash
# Generation side by side: `onnx-genai bench` and the same greedy loop in ONNX Runtime
# (bench/ort_generate_bench.mjs) on the same Qwen2.5-0.5B-shaped int4 model files, at 1 and 2
# threads, alternating which engine runs first. Prints a markdown table of prefill and decode
# tok/s and the speed ratio ours/ORT (> 1: we are faster).
#
#   bench/generate_side_by_side.sh [--prompt-len P] [--gen-len G] [--repeat R] [--threads "1 2"]
#                                  [--build DIR] [--models DIR] [--set KEY=VALUE ...]
#
# Defaults: P=128 G=32 R=3, --build build (must hold src/cli/onnx-genai; nothing is compiled
# here), --models BUILD/generate-bench-models (apart from bench/prepare.sh's BUILD/bench-models,
# which that script empties when tools/make_bench_models.py changes). The models (random weights, seed 0, built by
# tools/build_model.py: genai style, int4 MatMulNBits block 32, accuracy level 0 and 4) are
# built once and reused while their build command is unchanged (a stamp file holds it). --set changes the model's config after the Qwen2.5-0.5B shape
# (e.g. --set num_hidden_layers=2 --set vocab_size=1000 for a quick try), in folders of their own.
#
# Ours runs G-1 decode steps (the first token comes from the prefill), ORT's script G; both
# report per-step rates, so the ratio is unaffected.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prompt_len=128 gen_len=32 repeat=3 threads="1 2" build=$repo/build models= overrides=()
while (($#)); do
  case $1 in
    --prompt-len) prompt_len=$2; shift 2 ;;
    --gen-len) gen_len=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --set) overrides+=(--set "$2"); shift 2 ;;
    *) echo "generate_side_by_side: unknown argument $1" >&2; exit 1 ;;
  esac
done
models=${models:-$build/generate-bench-models}
ours=$build/src/cli/onnx-genai
if [[ ! -x $ours ]]; then
  echo "generate_side_by_side: $ours is missing; build it: ninja -C $build onnx-genai" >&2
  exit 1
fi
if [[ ! -d $repo/tests/oracle/node_modules/onnxruntime-node ]]; then
  echo "generate_side_by_side: onnxruntime-node is missing: cd tests/oracle && " \
       "ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts" >&2
  exit 1
fi

# Qwen2.5-0.5B's shape (config.json of Qwen/Qwen2.5-0.5B), random weights.
qwen05b_shape=(--set vocab_size=151936 --set hidden_size=896 --set num_hidden_layers=24
               --set num_attention_heads=14 --set num_key_value_heads=2 --set intermediate_size=4864
               --set max_position_embeddings=32768 --set rope_theta=1000000.0 "${overrides[@]}")
variant=
if ((${#overrides[@]})); then variant=-$(echo "${overrides[*]}" | md5sum | cut -c1-8); fi

# build_model NAME ACCURACY_LEVEL: the model folder, built when missing or built differently.
build_model() {
  local dir=$models/$1
  local command=(/usr/bin/python3 "$repo/tools/build_model.py" --preset qwen2 --style genai --weights int4
                 --block-size 32 --accuracy-level "$2" "${qwen05b_shape[@]}")
  if [[ -f $dir/model.onnx && "$(cat "$dir/build-command" 2>/dev/null)" == "${command[*]}" ]]; then
    echo "$dir"
    return
  fi
  echo "building $dir ..." >&2
  rm -rf "$dir" "$dir.partial"
  mkdir -p "$models"
  local start=$SECONDS
  "${command[@]}" "$dir.partial" >&2
  echo "${command[*]}" >"$dir.partial/build-command"
  mv "$dir.partial" "$dir"
  echo "built $dir in $((SECONDS - start)) s" >&2
  echo "$dir"
}

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
run_ours() {
  "$ours" bench "$1" --prompt-len "$prompt_len" --gen-len "$gen_len" --repeat "$repeat" --threads "$2" --json
}
run_ort() {
  node "$repo/bench/ort_generate_bench.mjs" "$1" --prompt-len "$prompt_len" --gen-len "$gen_len" \
    --repeat "$repeat" --threads "$2"
}

case_index=0
for level in 0 4; do
  dir=$(build_model "qwen2.5-0.5b-int4-acc$level$variant" "$level")
  for t in $threads; do
    key=acc$level.t$t
    # Swap the order every other case so neither engine always runs second.
    if ((case_index % 2 == 0)); then order="ours ort"; else order="ort ours"; fi
    for engine in $order; do
      echo "running $engine: accuracy level $level, $t thread(s)" >&2
      "run_$engine" "$dir" "$t" >"$results/$key.$engine.json"
    done
    case_index=$((case_index + 1))
  done
done

/usr/bin/python3 - "$results" "$prompt_len" "$gen_len" "$repeat" "$threads" <<'EOF'
import json, os, sys
results, prompt_len, gen_len, repeat, threads = sys.argv[1:]
ort_version = None
print(f"prompt {prompt_len} tokens, {gen_len} generated, {repeat} runs after a warm-up; "
      "ratio = ours/ORT speed (> 1: we are faster)\n")
print("| model | threads | ours prefill tok/s | ORT prefill tok/s | prefill ratio "
      "| ours decode tok/s | ORT decode tok/s | decode ratio | ours TTFT ms | ORT TTFT ms |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for level in (0, 4):
    for t in threads.split():
        load = lambda engine: json.load(open(os.path.join(results, f"acc{level}.t{t}.{engine}.json")))
        ours, ort = load("ours"), load("ort")
        ort_version = ort["ort_version"]
        print(f"| int4 acc{level} | {t} | {ours['prefill_tok_s']:.1f} | {ort['prefill_tok_s']:.1f} "
              f"| {ours['prefill_tok_s'] / ort['prefill_tok_s']:.2f} | {ours['decode_tok_s']:.1f} "
              f"| {ort['decode_tok_s']:.1f} | {ours['decode_tok_s'] / ort['decode_tok_s']:.2f} "
              f"| {ours['ttft_ms']:.1f} | {ort['ttft_ms']:.1f} |")
print(f"\nONNX Runtime {ort_version} (onnxruntime-node, KV bound as onnxruntime-genai binds it)")
EOF
