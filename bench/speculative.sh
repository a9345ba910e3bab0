#!/usr/bin/env bash
# Speculative decoding at batch 1, side by side in one run: plain greedy decoding, prompt lookup
# and a draft model, on three prompts (bench/prompts/speculative/: free continuation, a passage
# to repeat, code), ROUNDS alternating rounds, the median of each.
#   bench/speculative.sh ONNX_GENAI TARGET_DIR DRAFT_DIR [ROUNDS] [generate options...]
# e.g. bench/speculative.sh build/src/cli/onnx-genai /tmp/debian-prose-94m models/debian-prose-11m 3 --threads 1
# Prints one Markdown row per prompt and method: decode tok/s, speed-up over plain, drafted
# tokens accepted, mean accepted tokens per verify step. Decoding is greedy, eos ignored, 192 new
# tokens, with the target package's search settings.
set -euo pipefail
cli=$1 target=$2 draft=$3 rounds=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
extra=("$@")
here=$(cd "$(dirname "$0")" && pwd)
run() {  # prompt method -> "tok/s accepted% mean"
  local prompt=$1 method=$2 spec=()
  [ "$method" = plain ] || spec=(--speculative "$method")
  "$cli" generate "$target" --prompt "$(cat "$prompt")" --greedy --ignore-eos --max-new-tokens 192 --stats \
    "${spec[@]}" "${extra[@]}" 2>&1 >/dev/null |
    awk '/ decode / { for (i = 1; i <= NF; ++i) if ($i == "tok/s);") { rate = substr($(i-1), 2) } }
         /^speculative/ { for (i = 1; i <= NF; ++i) { if ($i ~ /%\),$/) pct = substr($i, 2, length($i) - 4); if ($i == "length") mean = $(i+1) } }
         END { printf "%s %s %s\n", rate, (pct == "" ? "-" : pct), (mean == "" ? "-" : substr(mean, 1, length(mean) - 1)) }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| prompt | method | decode tok/s | vs plain | accepted | tokens per verify |"
echo "|---|---|---:|---:|---:|---:|"
for prompt in "$here"/prompts/speculative/*.txt; do
  declare -A rates=() stats=()
  for ((r = 0; r < rounds; ++r)); do
    for method in plain ngram "$draft"; do
      read -r rate pct mean < <(run "$prompt" "$method")
      rates[$method]+="$rate "
      stats[$method]="$pct $mean"
    done
  done
  plain=$(tr ' ' '\n' <<<"${rates[plain]}" | grep . | median)
  for method in plain ngram "$draft"; do
    rate=$(tr ' ' '\n' <<<"${rates[$method]}" | grep . | median)
    read -r pct mean <<<"${stats[$method]}"
    name=$method; [ "$method" = "$draft" ] && name="draft $(basename "$draft")"
    printf "| %s | %s | %s | %.2f | %s | %s |\n" "$(basename "$prompt" .txt)" "$name" "$rate" \
      "$(awk -v a="$rate" -v b="$plain" 'BEGIN { print (b > 0 ? a / b : 0) }')" "$pct" "$mean"
  done
done
