#!/usr/bin/env python3
"""Exports real Hugging Face modelling code to ONNX the way users do, as test fixtures.

    python3 tools/hf_export/export_fixtures.py OUT_DIR [--arch llama,qwen2,...] [--steps 8]

Needs torch, transformers, onnx and onnxruntime (the GPU machine has them; Debian's do not run
transformers 5). Nothing here is our code under test: each architecture is transformers' own
modelling code, randomly initialised from a tiny config (seeded), exported by torch.onnx with
the cache as Hugging Face/Optimum name it (inputs input_ids, attention_mask, position_ids,
past_key_values.N.key/value; outputs logits, present.N.key/value), and

  dynamo-f32         the current exporter (torch.onnx.export(dynamo=True))
  torchscript-f32    the TorchScript exporter most published Optimum files came from
  dynamo-f16         the model in float16, exported by the current exporter
  int4-bB-sym|asym-accA  dynamo-f32 through ONNX Runtime's MatMulNBitsQuantizer

Each variant folder holds model.onnx, config.json, generation_config.json and reference.json:
the prompts, and transformers' own float32 greedy decode of each prompt (batch 1, eager
attention): its tokens and, per step, the last position's logits (raw little-endian float32 in
reference_logits.bin, [prompts, steps + 1, vocab]). OUT_DIR/manifest.json records, for every
variant tried, whether it exported and how ONNX Runtime's greedy decode of the file compares with
transformers' (tokens equal, max |logit diff|) — or the error that stopped it.
"""
import argparse
import json
import multiprocessing
import os
import shutil
import sys
import traceback

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

SEED = 1234
VOCAB = 256
PROMPTS = [[1, 17, 200, 45, 99, 3, 250], [1, 5, 88, 130]]
IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
LLAMA_DIMS = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  initializer_range=0.08, **IDS)

# Tiny configs of the architectures people run; each keeps its family's distinguishing parts
# (bias on q/k/v, q/k norms, fused projections, softcaps, multipliers, learned positions).
ARCHS = {
    "llama": ("LlamaConfig", dict(LLAMA_DIMS, tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", dict(LLAMA_DIMS, tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", dict(LLAMA_DIMS, head_dim=16, tie_word_embeddings=True)),
    "mistral": ("MistralConfig", dict(LLAMA_DIMS, sliding_window=None, tie_word_embeddings=False)),
    "phi3": ("Phi3Config", dict(LLAMA_DIMS, original_max_position_embeddings=128, tie_word_embeddings=False)),
    "gemma2": ("Gemma2Config", dict(LLAMA_DIMS, head_dim=16, query_pre_attn_scalar=16, sliding_window=64,
                                    final_logit_softcapping=30.0, attn_logit_softcapping=50.0)),
    "gemma3": ("Gemma3TextConfig", dict(LLAMA_DIMS, head_dim=16, query_pre_attn_scalar=16, sliding_window=64)),
    "granite": ("GraniteConfig", dict(LLAMA_DIMS, embedding_multiplier=12.0, logits_scaling=8.0,
                                      residual_multiplier=0.22, attention_multiplier=0.0625)),
    "olmo2": ("Olmo2Config", dict(LLAMA_DIMS)),
    "gpt2": ("GPT2Config", dict(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                initializer_range=0.08, **IDS)),
}
QUANT_CONFIGS = [(32, True, 0), (32, False, 4), (128, True, 4), (128, False, 0)]


# --bench: a shape where a decode step costs more than its overheads (kept under 16 MB in int4).
BENCH_DIMS = dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=4096, max_position_embeddings=1024)


def build_model(arch, **overrides):
    class_name, kwargs = ARCHS[arch]
    config = getattr(transformers, class_name)(**dict(kwargs, **overrides))
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return model.eval()


def cache_dims(config):
    heads = getattr(config, "num_attention_heads", None) or config.n_head
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    hidden = getattr(config, "hidden_size", None) or config.n_embd
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    return layers, kv_heads, head_dim


def layer_states(cache, layer):
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]


class FlatCache(torch.nn.Module):
    """The model with the cache as flat tensors, as Optimum's exports see it."""

    def __init__(self, model, layers):
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids, attention_mask, position_ids, past):
        cache = transformers.DynamicCache()
        for layer in range(self.layers):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        presents = []
        for layer in range(self.layers):
            presents.extend(layer_states(out.past_key_values, layer))
        return (out.logits, *presents)


def io_names(layers):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]
    for layer in range(layers):
        inputs += [f"past_key_values.{layer}.key", f"past_key_values.{layer}.value"]
        outputs += [f"present.{layer}.key", f"present.{layer}.value"]
    return inputs, outputs


def sample_inputs(layers, kv_heads, head_dim, dtype):
    # Every dynamic dim distinct and >= 2, so no exporter specialises one to a constant.
    batch, seq, past = 2, 4, 3
    ids = torch.randint(3, VOCAB, (batch, seq))
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    mask[1, 0] = 0  # a left-padded row keeps the padding path in a traced graph
    positions = torch.arange(past, past + seq).unsqueeze(0).repeat(batch, 1)
    cache = [torch.randn(batch, kv_heads, past, head_dim, dtype=dtype) for _ in range(2 * layers)]
    return ids, mask, positions, cache


def export(model, dtype, exporter, path):
    layers, kv_heads, head_dim = cache_dims(model.config)
    wrapper = FlatCache(model, layers)
    args = sample_inputs(layers, kv_heads, head_dim, dtype)
    inputs, outputs = io_names(layers)
    if exporter == "dynamo":
        dyn = torch.export.Dim.DYNAMIC
        shapes = ({0: dyn, 1: dyn}, {0: dyn, 1: dyn}, {0: dyn, 1: dyn}, [{0: dyn, 2: dyn}] * (2 * layers))
        program = torch.onnx.export(wrapper, args, dynamo=True, dynamic_shapes=shapes, input_names=inputs,
                                    output_names=outputs, external_data=False, optimize=True)
        program.save(path)
    else:
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
                "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
        for name in inputs[3:]:
            axes[name] = {0: "batch", 2: "past"}
        for name in outputs[1:]:
            axes[name] = {0: "batch", 2: "total"}
        torch.onnx.export(wrapper, args, path, dynamo=False, input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=17)
    onnx.checker.check_model(path)


def quantize(source, path, block, symmetric, accuracy):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    quantizer = MatMulNBitsQuantizer(onnx.load(source), block_size=block, is_symmetric=symmetric,
                                     accuracy_level=accuracy)
    quantizer.process()
    if not any(n.op_type == "MatMulNBits" for n in quantizer.model.model.graph.node):
        # GPT-2: its projections are Gemm nodes and its tied LM head multiplies by a transposed
        # embedding, none of which the quantizer takes; an "int4" file equal to the float one is no fixture.
        raise ValueError("the quantizer found no MatMul with a constant weight")
    quantizer.model.save_model_to_file(path, use_external_data_format=False)


def greedy(step_fn, prompt, steps, layers, kv_heads, head_dim, np_dtype):
    """Batch-1 greedy decode through step_fn(ids, mask, positions, past) -> (logits, presents)."""
    ids = np.array([prompt], dtype=np.int64)
    past = [np.zeros((1, kv_heads, 0, head_dim), dtype=np_dtype) for _ in range(2 * layers)]
    total = len(prompt)
    positions = np.arange(total, dtype=np.int64)[None]
    tokens, rows = [], []
    for _ in range(steps + 1):
        logits, past = step_fn(ids, np.ones((1, total), dtype=np.int64), positions, past)
        row = np.asarray(logits, dtype=np.float32)[0, -1]
        rows.append(row)
        tokens.append(int(np.argmax(row)))  # ties to the lowest id, as every engine here breaks them
        ids = np.array([[tokens[-1]]], dtype=np.int64)
        positions = np.array([[total]], dtype=np.int64)
        total += 1
    return tokens, np.stack(rows)


def torch_step(model):
    layers = cache_dims(model.config)[0]
    wrapper = FlatCache(model, layers)

    def step(ids, mask, positions, past):
        with torch.no_grad():
            out = wrapper(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(positions),
                          [torch.from_numpy(p) for p in past])
        return out[0].float().numpy(), [t.numpy() for t in out[1:]]

    return step


def ort_step(path, layers):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs, _ = io_names(layers)
    wanted = {i.name for i in session.get_inputs()}

    def step(ids, mask, positions, past):
        feeds = dict(zip(inputs, [ids, mask, positions, *past]))
        outs = session.run(None, {k: v for k, v in feeds.items() if k in wanted})
        return outs[0], outs[1:]

    return step


def op_counts(path):
    counts = {}
    for node in onnx.load(path, load_external_data=False).graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def write_variant(folder, model, path, reference, meta):
    model.config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    tokens, logits = reference
    np.stack(logits).astype("<f4").tofile(os.path.join(folder, "reference_logits.bin"))
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(dict(meta, prompts=PROMPTS, steps=len(tokens[0]) - 1, vocab=VOCAB, transformers_tokens=tokens,
                       logits_file="reference_logits.bin", logits_shape=[len(PROMPTS), len(tokens[0]), VOCAB]),
                  f, indent=1)


def compare(reference, result):
    ref_tokens, ref_logits = reference
    tokens, logits = result
    return dict(tokens_equal=tokens == ref_tokens,
                max_abs_logit_diff=float(max(np.abs(a - b).max() for a, b in zip(ref_logits, logits))),
                ort_tokens=tokens)


def run_arch(arch, out_dir, steps, manifest):
    torch.set_num_threads(1)  # one process an architecture (main)
    model = build_model(arch)
    layers, kv_heads, head_dim = cache_dims(model.config)
    step = torch_step(model)
    runs = [greedy(step, p, steps, layers, kv_heads, head_dim, np.float32) for p in PROMPTS]
    reference = ([t for t, _ in runs], [l for _, l in runs])
    base = dict(arch=arch, torch=torch.__version__, transformers=transformers.__version__,
                onnxruntime=ort.__version__)

    def attempt(name, make, dtype=np.float32):
        folder = os.path.join(out_dir, f"{arch}-{name}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        entry = dict(base, variant=name)
        try:
            make(path)
            entry["ops"] = op_counts(path)
            entry["bytes"] = os.path.getsize(path)
            ort_runs = [greedy(ort_step(path, layers), p, steps, layers, kv_heads, head_dim, dtype) for p in PROMPTS]
            entry.update(compare(reference, ([t for t, _ in ort_runs], [l for _, l in ort_runs])))
            write_variant(folder, model, path, reference, dict(base, variant=name))
            entry["status"] = "exported"
        except Exception as e:  # recorded: the manifest lists what failed and why
            entry["status"] = "failed"
            entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]
            entry["trace"] = traceback.format_exc()[-1500:]
            shutil.rmtree(folder, ignore_errors=True)
        manifest.append(entry)
        print(json.dumps({k: v for k, v in entry.items() if k not in ("ops", "trace")}), flush=True)
        return entry["status"] == "exported"

    f32 = os.path.join(out_dir, f"{arch}-dynamo-f32", "model.onnx")
    have_f32 = attempt("dynamo-f32", lambda p: export(model, torch.float32, "dynamo", p))
    attempt("torchscript-f32", lambda p: export(model, torch.float32, "torchscript", p))
    attempt("dynamo-f16", lambda p: export(build_model(arch).half(), torch.float16, "dynamo", p), np.float16)
    if have_f32:
        block, symmetric, accuracy = QUANT_CONFIGS[list(ARCHS).index(arch) % len(QUANT_CONFIGS)]
        name = f"int4-b{block}-{'sym' if symmetric else 'asym'}-acc{accuracy}"
        attempt(name, lambda p: quantize(f32, p, block, symmetric, accuracy))


def bench_model(arch, out_dir):
    """A larger random model, dynamo-exported and int4-quantized, for speed next to the genai builder."""
    torch.set_num_threads(1)
    model = build_model(arch, **BENCH_DIMS)
    folder = os.path.join(out_dir, f"bench-{arch}-int4")
    os.makedirs(folder, exist_ok=True)
    f32 = os.path.join(out_dir, f"bench-{arch}-f32.onnx")
    export(model, torch.float32, "dynamo", f32)
    quantize(f32, os.path.join(folder, "model.onnx"), 32, True, 4)
    os.remove(f32)
    model.config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    return []


def run_arch_recorded(arch, out_dir, steps):
    manifest = []
    try:
        run_arch(arch, out_dir, steps, manifest)
    except Exception as e:
        manifest.append(dict(arch=arch, status="failed", error=f"{type(e).__name__}: {e}"[:400],
                             trace=traceback.format_exc()[-1500:]))
        print(f"{arch}: {manifest[-1]['error']}", flush=True)
    return manifest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--arch", default=",".join(ARCHS))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--bench", default="", help="architectures to export at BENCH_DIMS too")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    archs = args.arch.split(",")
    with multiprocessing.get_context("spawn").Pool(min(len(archs), os.cpu_count() or 1)) as pool:
        benches = [pool.apply_async(bench_model, (arch, args.out_dir)) for arch in args.bench.split(",") if arch]
        parts = pool.starmap(run_arch_recorded, [(arch, args.out_dir, args.steps) for arch in archs])
        for bench in benches:
            try:
                bench.get()
            except Exception as e:  # the fixtures still count; the note says the bench is missing
                print(f"bench export failed: {type(e).__name__}: {e}", flush=True)
    manifest = [entry for part in parts for entry in part]
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
