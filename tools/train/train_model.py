#!/usr/bin/env python3
"""Trains the project's small default model (Llama architecture, ~11M parameters) in a fixed wall time.

    tools/train/train_model.py --corpus CORPUS_DIR --tokenizer TOK_DIR --out OUT_DIR [--minutes 8]
        [--device cuda|cpu] [--seed 0] [--steps N] [--tiny] [--token-ids TOK_DIR]

Token ids come from TOK_DIR/train.npy and valid.npy (train_tokenizer.py writes them) when
--token-ids is given, else the corpus (train.txt, valid.txt) is encoded with TOK_DIR/tokenizer.json
through the `tokenizers` package the same way: each document, then <|endoftext|> (id 0).

Default shape: vocab 8192, hidden 320, 5 heads of 64, 1 kv head, 8 layers, SwiGLU 864, context 512.
--target: hidden 768, 12 heads of 64, 4 kv heads, 14 layers, SwiGLU 2048 (94.4M parameters).
--tiny: 2 layers, hidden 64, context 128, 30 seconds (CPU smoke tests).
Training: AdamW (0.9, 0.95, weight decay 0.1 on matrices), linear warmup then cosine decay to 10%
of the peak LR, batches of random context-length windows, gradient clipping 1.0, bf16 autocast and
torch.compile on CUDA. The number of steps is estimated from the measured step time so that the
cosine schedule ends when --minutes are up (--steps N fixes it instead, for reproducible runs).
Validation loss over valid.npy (non-overlapping windows) every --eval-every steps; the best
weights are exported.

OUT_DIR gets config.json (Hugging Face LlamaForCausalLM), model-0000i-of-0000K.safetensors float16
shards under 15 MB with model.safetensors.index.json, the tokenizer files, train_log.json and
loss.png (when matplotlib is importable).
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
from train_tokenizer import encode_documents, read_documents  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", help="folder with train.txt and valid.txt (not needed with --token-ids)")
    p.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (copied into --out)")
    p.add_argument("--token-ids", help="folder with train.npy, valid.npy, meta.json instead of tokenizing")
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, help="wall time for training (default 8; --tiny 0.5)")
    p.add_argument("--steps", type=int, help="fixed number of steps instead of a time budget")
    p.add_argument("--tiny", action="store_true", help="2 layers, hidden 64: CPU smoke tests")
    p.add_argument("--target", action="store_true",
                   help="hidden 768, 14 layers (94M): the speculative-decoding target the default model drafts for")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, help="windows per step (default 64; --tiny 16)")
    p.add_argument("--lr", type=float, default=1.5e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, help="warmup steps (default 200; --tiny 10)")
    p.add_argument("--eval-every", type=int, help="steps between validation passes (default 250; --tiny 20)")
    p.add_argument("--dropout", type=float, default=0.0, help="residual and embedding dropout while training")
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args(argv)
    if args.token_ids is None and args.corpus is None:
        p.error("give --corpus or --token-ids")
    for name, full, tiny in (("minutes", 8.0, 0.5), ("batch_size", 64, 16), ("warmup", 200, 10),
                             ("eval_every", 250, 20)):
        if getattr(args, name) is None:
            setattr(args, name, tiny if args.tiny else full)
    return args


def load_token_ids(args):
    """(train, valid, vocab_size) as int64 numpy arrays."""
    if args.token_ids:
        with open(os.path.join(args.token_ids, "meta.json")) as f:
            vocab_size = json.load(f)["vocab_size"]
        train, valid = (np.load(os.path.join(args.token_ids, f"{n}.npy")) for n in ("train", "valid"))
    else:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
        vocab_size = tokenizer.get_vocab_size()

        def encode_batch(docs):
            return (e.ids for e in tokenizer.encode_batch(docs, add_special_tokens=False))

        train, valid = (encode_documents(encode_batch, read_documents(os.path.join(args.corpus, f"{n}.txt")), 0)
                        for n in ("train", "valid"))
    return train.astype(np.int64), valid.astype(np.int64), vocab_size


class Batches:
    """Random context-length windows of the training ids, from a seeded generator."""

    def __init__(self, ids, context, batch_size, seed, device):
        self.ids = torch.from_numpy(ids)
        self.context, self.batch_size, self.device = context, batch_size, device
        self.rng = np.random.default_rng(seed)
        self.offsets = torch.arange(context + 1)

    def next(self):
        starts = torch.from_numpy(self.rng.integers(0, len(self.ids) - self.context - 1, self.batch_size))
        windows = self.ids[starts[:, None] + self.offsets]
        if self.device == "cuda":
            windows = windows.pin_memory().to(self.device, non_blocking=True)
        return windows[:, :-1], windows[:, 1:]


def learning_rate(step, total_steps, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, total_steps - args.warmup))
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def make_optimizer(model, args):
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": matrices, "weight_decay": 0.1}, {"params": vectors, "weight_decay": 0.0}]
    extra = {"fused": True} if args.device == "cuda" else {}
    # the first step's rate: compile_model's trial step runs before the loop sets rates
    return torch.optim.AdamW(groups, lr=learning_rate(0, 1, args), betas=(0.9, 0.95), **extra)


def autocast(device):
    if device == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@torch.no_grad()
def validation_loss(model, valid, context, batch_size, device):
    """Mean next-token loss over valid split into non-overlapping windows of context + 1 ids."""
    model.eval()
    count = (len(valid) - 1) // context
    windows = torch.from_numpy(valid[:count * context + 1])
    total, tokens = 0.0, 0
    for first in range(0, count, batch_size):
        rows = range(first, min(count, first + batch_size))
        batch = torch.stack([windows[r * context:(r + 1) * context + 1] for r in rows]).to(device)
        with autocast(device):
            logits = model(batch[:, :-1])
        total += F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(), reduction="sum").item()
        tokens += batch[:, 1:].numel()
    model.train()
    return total / tokens


def train_step(compiled, optimizer, batch, args):
    inputs, targets = batch
    with autocast(args.device):
        logits = compiled(inputs)
    loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(compiled.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def compile_model(model, args, optimizer, batches):
    """torch.compile on CUDA, tried on one real step; the eager model when it fails."""
    if args.device != "cuda" or args.no_compile or not hasattr(torch, "compile"):
        return model, None
    try:
        compiled = torch.compile(model)
        first_loss = train_step(compiled, optimizer, batches.next(), args).item()
        return compiled, first_loss
    except Exception as e:  # compilation problems surface on the first call
        print(f"train_model: torch.compile failed ({type(e).__name__}: {e}); training eagerly", file=sys.stderr)
        optimizer.zero_grad(set_to_none=True)
        return model, None


class Schedule:
    """Total steps: fixed, or re-estimated from the measured time per step so training ends on time."""

    def __init__(self, args, start):
        self.fixed = args.steps is not None
        self.deadline = start + args.minutes * 60
        self.total = args.steps if self.fixed else 10 ** 9
        self.mark = None

    def update(self, step):
        if self.fixed:
            return
        now = time.time()
        if self.mark is None or step < 5:  # the first steps include compilation and warm-up
            self.mark = (step, now)
            return
        done, since = step - self.mark[0], now - self.mark[1]
        if done > 0:
            self.total = step + int((self.deadline - now) * done / since)

    def finished(self, step):
        return step >= self.total or (not self.fixed and time.time() >= self.deadline)


def export(out_dir, model, shape, args, log):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(llama.hf_config(shape, eos_id=0), f, indent=2)
    shards = llama.write_safetensors_shards(out_dir, model.state_dict())
    for name in TOKENIZER_FILES:
        source = os.path.join(args.tokenizer, name)
        if os.path.isfile(source):
            shutil.copyfile(source, os.path.join(out_dir, name))
    with open(os.path.join(out_dir, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
    plot_losses(out_dir, log)
    print(f"train_model: wrote {', '.join(shards)} and config.json to {out_dir}")


def plot_losses(out_dir, log):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train_model: matplotlib is not importable; no loss.png")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["tokens"] for r in log["train"]], [r["loss"] for r in log["train"]], label="train", lw=0.8)
    ax.plot([r["tokens"] for r in log["valid"]], [r["loss"] for r in log["valid"]], "o-", label="valid")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("loss (nats/token)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "loss.png"), dpi=120)


def main(argv):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    train, valid, vocab_size = load_token_ids(args)
    shape = llama.Shape(vocab_size=vocab_size, **(llama.TINY if args.tiny else llama.TARGET if args.target else {}))
    context = shape.max_position_embeddings
    model = llama.LlamaForCausalLM(shape)
    model.dropout = args.dropout
    model.init_weights()
    model.to(args.device)
    params = model.num_parameters()
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"train_model: {params} parameters ({params / 1e6:.2f}M), {len(train)} train / {len(valid)} valid "
          f"tokens, {device_name}")
    optimizer = make_optimizer(model, args)
    batches = Batches(train, context, args.batch_size, args.seed, args.device)
    log = {"params": params, "device": device_name, "shape": vars(shape), "seed": args.seed,
           "batch_tokens": args.batch_size * context, "train": [], "valid": []}
    start = time.time()
    compiled, first_loss = compile_model(model, args, optimizer, batches)
    step = 0 if first_loss is None else 1
    schedule = Schedule(args, start)  # compilation time counts against --minutes
    best = (float("inf"), None, 0)
    while True:
        schedule.update(step)
        stop = schedule.finished(step)
        if step % args.eval_every == 0 or stop:
            loss = validation_loss(model, valid, context, args.batch_size, args.device)
            log["valid"].append({"step": step, "seconds": round(time.time() - start, 2), "loss": loss,
                                 "tokens": step * args.batch_size * context})
            print(f"step {step:6d}/{schedule.total if schedule.total < 10 ** 9 else '?'}  valid {loss:.4f}  "
                  f"{time.time() - start:7.1f}s", flush=True)
            if loss < best[0]:
                best = (loss, {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}, step)
        if stop:
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, schedule.total, args)
        loss = train_step(compiled, optimizer, batches.next(), args)
        step += 1
        if step % 10 == 0 or step < 10:
            log["train"].append({"step": step, "seconds": round(time.time() - start, 2), "loss": loss.item(),
                                 "tokens": step * args.batch_size * context, "lr": optimizer.param_groups[0]["lr"]})
    model.load_state_dict(best[1])
    log.update(steps=step, seconds=round(time.time() - start, 2), best_step=best[2], final_valid_loss=best[0],
               final_valid_ppl=math.exp(best[0]), tokens_seen=step * args.batch_size * context)
    print(f"train_model: {step} steps in {log['seconds']}s; best valid loss {best[0]:.4f} "
          f"(ppl {math.exp(best[0]):.2f}) at step {best[2]}")
    export(args.out, model.to("cpu").float(), shape, args, log)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
