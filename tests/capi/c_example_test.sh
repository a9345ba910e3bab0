#!/usr/bin/env bash
# examples/c/generate.c as a user builds it: the header and library installed into a prefix,
# compiled with `cc -std=c11 -Wall -Werror`, run on the default model. Its greedy text must be
# the CLI's for the same prompt and length, also when guided by a regex (the CLI's --regex).
#   c_example_test.sh BUILD_DIR SOURCE_DIR ONNX_GENAI_CLI
set -euo pipefail
build=$1 source=$2 cli=$3
model="$source/models/debian-prose-11m"
prompt="The Lord is my shepherd"
max_length=40

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --component capi --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libonnx_genai.so | head -1)")
cc -std=c11 -Wall -Wextra -Werror -pedantic "$source/examples/c/generate.c" -I"$prefix/include" -L"$libdir" \
  -lonnx_genai -Wl,-rpath,"$libdir" -o "$prefix/generate"

got=$("$prefix/generate" "$model" "$prompt" "$max_length")
prompt_tokens=$("$cli" tokenize "$model" --text "$prompt" --ids | wc -w)
new_tokens=$((max_length - prompt_tokens))
text=$("$cli" generate "$model" --prompt "$prompt" --greedy --max-new-tokens "$new_tokens")
expected="$prompt$text
[$max_length tokens]"
if [ "$got" != "$expected" ]; then
  printf 'C example printed:\n%s\n--- expected (CLI, %d new tokens):\n%s\n' "$got" "$new_tokens" "$expected" >&2
  exit 1
fi

regex='(yes|no), [0-9]{2,4} (sheep|goats)\.'
prompt="Count the flock:"
max_length=80
got=$("$prefix/generate" "$model" "$prompt" "$max_length" "$regex" | head -n -1)  # without the token count
prompt_tokens=$("$cli" tokenize "$model" --text "$prompt" --ids | wc -w)
text=$("$cli" generate "$model" --prompt "$prompt" --greedy --max-new-tokens $((max_length - prompt_tokens)) --regex "$regex")
if [ "$got" != "$prompt$text" ]; then
  printf 'C example guided by %s printed:\n%s\n--- expected (CLI):\n%s\n' "$regex" "$got" "$prompt$text" >&2
  exit 1
fi
echo "C example: same text as the CLI, unguided and guided by a regex"
