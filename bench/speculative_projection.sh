#!/usr/bin/env bash
# Projected prompt-lookup speed-up on a larger model from measured step costs: the drafts and
# acceptances of a run here (bench/prompts/speculative/, greedy, eos ignored, 192 new tokens, up
# to K = 7 drafted), priced with that model's measured 1-token and 8-token step times.
#   bench/speculative_projection.sh ONNX_GENAI MODEL_DIR STEP1_MS STEP8_MS [generate options...]
# e.g. the Qwen2.5-7B-shape int4 b32 steps of docs/STATUS.md's GPU table (2.872 ms, 4.075 ms):
#   bench/speculative_projection.sh build/src/cli/onnx-genai models/debian-prose-11m 2.872 4.075 --threads 1
# A step of n tokens is priced by linear interpolation, c(n) = c1 + (n - 1) (c8 - c1) / 7, so a
# run of T decode tokens with D drafted and A accepted costs (T - A) c1 + D (c8 - c1) / 7 against
# T c1 plain (each verify step is one plain step plus its drafted rows). Prompt lookup drafts for
# free; the acceptance is this run's model's, which the larger model's text would change.
set -euo pipefail
cli=$1 model=$2 c1=$3 c8=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
echo "| prompt | decode tokens | verify steps | drafted | accepted | projected speed-up |"
echo "|---|---:|---:|---:|---:|---:|"
for prompt in "$here"/prompts/speculative/*.txt; do
  "$cli" generate "$model" --prompt "$(cat "$prompt")" --greedy --ignore-eos --max-new-tokens 192 --stats \
    --speculative ngram --draft-tokens 7 "$@" 2>&1 >/dev/null |
    awk -v name="$(basename "$prompt" .txt)" -v c1="$c1" -v c8="$c8" '
      / decode / { for (i = 1; i <= NF; ++i) if ($i == "decode") tokens = $(i + 1) }
      /^speculative/ { steps = $3; drafted = $6; accepted = $8 }
      END {
        slope = (c8 - c1) / 7
        printf "| %s | %d | %d | %d | %d | %.2f |\n", name, tokens, steps, drafted, accepted,
          tokens * c1 / ((tokens - accepted) * c1 + drafted * slope)
      }'
done
