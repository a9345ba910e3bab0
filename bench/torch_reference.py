#!/usr/bin/env python3
"""PyTorch on the same weights as an onnx-genai model: the reference the GPU numbers stand next to.

    python3 bench/torch_reference.py MODEL_DIR CHECKPOINT.safetensors [--prompt-len 128] [--gen-len 128]

MODEL_DIR is a tools/build_model.py output (its model_config.json gives the architecture) and
CHECKPOINT the weights that build wrote with --save-checkpoint (Hugging Face names). The
model runs in fp16 on cuda:0 through transformers with a static KV cache, where generate()
compiles the forward with torch.compile; greedy, exactly --gen-len new tokens after a random
--prompt-len prompt. Two warm-up generations (they compile), then the best of three: TTFT is a
one-token generation, decode tok/s is the rest of a full generation. Prints one JSON line.
"""
import argparse
import json
import time

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

ARCHITECTURE_KEYS = ["vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                     "num_hidden_layers", "head_dim", "rope_theta", "max_position_embeddings", "rms_norm_eps",
                     "tie_word_embeddings", "hidden_act"]


def load_model(model_dir, checkpoint, context):
    with open(f"{model_dir}/model_config.json") as f:
        built = json.load(f)
    config = AutoConfig.for_model(built["model_type"], **{k: built[k] for k in ARCHITECTURE_KEYS if k in built})
    config.max_position_embeddings = max(config.max_position_embeddings, context)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    weights = {name: tensor.to(torch.float16) for name, tensor in load_file(checkpoint).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if config.tie_word_embeddings:
        missing = [name for name in missing if name != "lm_head.weight"]
        model.tie_weights()
    if missing or unexpected:
        raise SystemExit(f"torch_reference: checkpoint does not fit the model: missing {missing[:4]}, "
                         f"unexpected {unexpected[:4]}")
    return model.eval(), config


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("checkpoint")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=128)
    args = parser.parse_args()
    model, config = load_model(args.model_dir, args.checkpoint, args.prompt_len + args.gen_len + 8)
    prompt = torch.randint(3, config.vocab_size, (1, args.prompt_len), device="cuda",
                           generator=torch.Generator(device="cuda").manual_seed(0))

    def seconds(new_tokens):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, cache_implementation="static",
                                 pad_token_id=0)
        torch.cuda.synchronize()
        assert out.shape[1] == args.prompt_len + new_tokens
        return time.perf_counter() - start

    start = time.perf_counter()
    for _ in range(2):
        seconds(args.gen_len)
    warm_up = time.perf_counter() - start
    ttft = min(seconds(1) for _ in range(3))
    total = min(seconds(args.gen_len) for _ in range(3))
    print(json.dumps({"engine": f"torch {torch.__version__} fp16, static cache (generate compiles)",
                      "prompt_len": args.prompt_len, "gen_len": args.gen_len,
                      "decode_tok_s": (args.gen_len - 1) / (total - ttft),
                      "prefill_tok_s": args.prompt_len / ttft, "ttft_ms": ttft * 1e3,
                      "warm_up_s": warm_up}))


if __name__ == "__main__":
    main()
