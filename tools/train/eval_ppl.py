#!/usr/bin/env python3
"""Perplexity of a trained checkpoint over a text, with the sliding-window protocol (reference for
onnx-genai's eval-ppl).

    tools/train/eval_ppl.py --checkpoint DIR --text FILE --tokenizer DIR [--window 512] [--stride 256]
    tools/train/eval_ppl.py --checkpoint DIR --token-ids FILE.json [--window 512] [--stride 256]

Model: config.json + .safetensors shards in DIR (train_model.py's output), run in float32 on CPU.

Tokenization: FILE's bytes are decoded as UTF-8 (strict) and the whole text, unchanged (no
stripping, trailing newline kept, no normalization beyond what tokenizer.json itself does), is
encoded in one call `Tokenizer.from_file(DIR/tokenizer.json).encode(text, add_special_tokens=False)`
of the Hugging Face `tokenizers` package: no bos, no eos, no truncation. Where `tokenizers` is
not importable, --token-ids gives those ids as a JSON list of integers instead.

Protocol (Hugging Face's "perplexity of fixed-length models" with a stride), for n tokens t[0..n):
window k covers t[b, e) with b = k * stride, e = min(b + window, n); k runs from 0 until the
first window with e == n. The model sees only t[b, e) (positions restart at 0 in each window).
Window k scores the tokens t[i] for max(b + 1, e_prev) <= i < e, where e_prev is the previous
window's end (0 for the first window), each with the NLL of t[i] given t[b, i). With
stride < window every token but t[0] is scored exactly once (scored = n - 1); with stride ==
window each window's first token is not scored. ppl = exp(nll / scored), nll being the sum of
the scored tokens' negative log-likelihoods (natural log).

Prints {"tokens": n, "scored": count, "nll": total NLL, "ppl": perplexity} as JSON.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402


def tokenize(args):
    if args.token_ids:
        with open(args.token_ids) as f:
            return [int(t) for t in json.load(f)]
    from tokenizers import Tokenizer

    with open(args.text, "rb") as f:
        text = f.read().decode("utf-8")
    tokenizer = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    return tokenizer.encode(text, add_special_tokens=False).ids


def windows(n, window, stride):
    """(begin, end, first_scored) per window: the protocol in the module docstring."""
    result, previous_end, begin = [], 0, 0
    while True:
        end = min(begin + window, n)
        result.append((begin, end, max(begin + 1, previous_end)))
        if end == n:
            return result
        previous_end, begin = end, begin + stride


@torch.no_grad()
def sliding_window_nll(model, ids, window, stride):
    """(total NLL, scored tokens) over ids."""
    total, scored = 0.0, 0
    for begin, end, first in windows(len(ids), window, stride):
        chunk = torch.tensor([ids[begin:end]], dtype=torch.long)
        log_probs = torch.log_softmax(model(chunk)[0].double(), dim=-1)
        # logits at position j predict token begin + j + 1
        targets = torch.tensor(ids[first:end], dtype=torch.long)
        rows = torch.arange(first - begin - 1, end - begin - 1)
        total -= log_probs[rows, targets].sum().item()
        scored += end - first
    return total, scored


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--checkpoint", required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--text")
    source.add_argument("--token-ids", help="JSON list of token ids (when `tokenizers` is not importable)")
    p.add_argument("--tokenizer", help="folder with tokenizer.json (default: --checkpoint)")
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--stride", type=int, default=256)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on small machines more threads mostly spin)")
    args = p.parse_args(argv)
    args.tokenizer = args.tokenizer or args.checkpoint
    if not 0 < args.stride <= args.window:
        p.error(f"need 0 < stride <= window, got stride {args.stride}, window {args.window}")
    torch.set_num_threads(args.threads)
    model, config = llama.load_checkpoint(args.checkpoint, torch.float32)
    if args.window > config["max_position_embeddings"]:
        p.error(f"window {args.window} is longer than the model's context {config['max_position_embeddings']}")
    ids = tokenize(args)
    if len(ids) < 2:
        p.error(f"need at least 2 tokens, got {len(ids)}")
    if max(ids) >= config["vocab_size"] or min(ids) < 0:
        p.error(f"token ids must lie in [0, {config['vocab_size']}), got [{min(ids)}, {max(ids)}]")
    nll, scored = sliding_window_nll(model, ids, args.window, args.stride)
    print(json.dumps({"tokens": len(ids), "scored": scored, "nll": nll, "ppl": math.exp(nll / scored)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
