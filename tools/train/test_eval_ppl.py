#!/usr/bin/env python3
"""Checks eval_ppl's sliding-window NLL against a token-by-token restatement of the protocol.

    /usr/bin/python3 tools/train/test_eval_ppl.py

For each token i >= 1 the reference finds the first window whose end is past i, runs the model
on t[begin, i] alone and takes the NLL of t[i]: a separate forward per token, so it shares no
indexing with eval_ppl's batched slicing. A random tiny model is enough (the protocol, not the
model, is under test).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_ppl  # noqa: E402
import llama  # noqa: E402


def reference_nll(model, ids, window, stride):
    total, scored = 0.0, 0
    for i in range(1, len(ids)):
        k = 0
        while min(k * stride + window, len(ids)) <= i:
            k += 1
        begin = k * stride
        if i == begin:  # a window's first token has no context in it (stride == window)
            continue
        with torch.no_grad():
            logits = model(torch.tensor([ids[begin:i]]))[0, -1].double()
        total -= torch.log_softmax(logits, -1)[ids[i]].item()
        scored += 1
    return total, scored


def main():
    torch.manual_seed(0)
    model = llama.LlamaForCausalLM(llama.Shape(vocab_size=50, **llama.TINY))
    model.init_weights(std=0.3)
    model.eval()
    ids = torch.randint(0, 50, (61,)).tolist()
    failures = 0
    for window, stride in ((16, 5), (16, 8), (16, 16), (100, 50), (7, 1)):
        got = eval_ppl.sliding_window_nll(model, ids, window, stride)
        want = reference_nll(model, ids, window, stride)
        ok = got[1] == want[1] and math.isclose(got[0], want[0], rel_tol=1e-5)
        failures += not ok
        print(f"window {window:3d} stride {stride:2d}: scored {got[1]} vs {want[1]}, nll {got[0]:.6f} vs "
              f"{want[0]:.6f} {'ok' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
