#!/usr/bin/python3
"""Random-weight GGUF of a Qwen3-MoE decoder (llama.cpp arch qwen3moe), for timing llama.cpp next to
onnx-genai on the same shape (bench/moe_side_by_side.sh builds ours with tools/build_model.py).

usage: PYTHONPATH=$LLAMACPP_SRC/gguf-py /usr/bin/python3 bench/llamacpp_moe_gguf.py OUT.gguf
           [--layers 4] [--hidden 2048] [--heads 32] [--kv-heads 4] [--head-dim 128]
           [--experts 128] [--top-k 8] [--expert-ff 768]

The defaults are Qwen3-30B-A3B's layer (its 48 layers cut to --layers). Every 2-D and 3-D weight
(token_embd and output too, as llama-quantize --pure writes) is Q4_0: an fp16 scale of 0.005 and 16
bytes of random nibbles per 32 values; the router (ffn_gate_inp) and the norms are f32, as
llama.cpp's converter leaves them. Speed does not depend on the values. The tokenizer is copied
from $LLAMACPP_SRC/models/ggml-vocab-qwen2.gguf (151,936 rows with padding).
"""
import argparse
import os

import numpy as np
import gguf


def copy_tokenizer(src, w):
    for key, f in src.fields.items():
        if not key.startswith('tokenizer.'):
            continue
        t0 = f.types[0]
        if t0 == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]) for i in f.data]
            else:
                val = [f.parts[i][0].item() for i in f.data]
            w.add_key_value(key, val, gguf.GGUFValueType.ARRAY, sub_type=sub)
        elif t0 == gguf.GGUFValueType.STRING:
            w.add_key_value(key, bytes(f.parts[f.data[0]]), t0)
        else:
            w.add_key_value(key, f.parts[f.data[0]][0].item(), t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('out')
    p.add_argument('--layers', type=int, default=4)
    p.add_argument('--hidden', type=int, default=2048)
    p.add_argument('--heads', type=int, default=32)
    p.add_argument('--kv-heads', type=int, default=4)
    p.add_argument('--head-dim', type=int, default=128)
    p.add_argument('--experts', type=int, default=128)
    p.add_argument('--top-k', type=int, default=8)
    p.add_argument('--expert-ff', type=int, default=768)
    a = p.parse_args()
    src = gguf.GGUFReader(os.path.join(os.environ['LLAMACPP_SRC'], 'models/ggml-vocab-qwen2.gguf'))
    vocab = 151936  # Qwen's padded embedding rows (the tokenizer has fewer)
    D, HD = a.hidden, a.head_dim

    w = gguf.GGUFWriter(a.out, 'qwen3moe')
    w.add_name('random-qwen3-moe-shape')
    w.add_context_length(40960)
    w.add_embedding_length(D)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.expert_ff * a.top_k)
    w.add_expert_feed_forward_length(a.expert_ff)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.top_k)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    copy_tokenizer(src, w)

    rng = np.random.default_rng(0)
    scale = np.frombuffer(np.float16(0.005).tobytes(), np.uint8)

    def q4_0(*shape):  # numpy [..., rows, cols] = ggml ne (cols, rows, ...); blocks of 32 along cols
        *lead, cols = shape
        blocks = np.empty((*lead, cols // 32, 18), np.uint8)
        blocks[..., 0:2] = scale
        blocks[..., 2:] = rng.integers(0, 256, size=(*lead, cols // 32, 16), dtype=np.uint8)
        return dict(tensor=blocks.reshape(*lead, cols // 32 * 18), raw_dtype=gguf.GGMLQuantizationType.Q4_0)

    def f32(*shape, value=None):
        if value is not None:
            return np.full(shape, value, np.float32)
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    w.add_tensor('token_embd.weight', **q4_0(vocab, D))
    w.add_tensor('output_norm.weight', f32(D, value=1.0))
    w.add_tensor('output.weight', **q4_0(vocab, D))
    for i in range(a.layers):
        b = f'blk.{i}.'
        w.add_tensor(b + 'attn_norm.weight', f32(D, value=1.0))
        w.add_tensor(b + 'attn_q.weight', **q4_0(a.heads * HD, D))
        w.add_tensor(b + 'attn_k.weight', **q4_0(a.kv_heads * HD, D))
        w.add_tensor(b + 'attn_v.weight', **q4_0(a.kv_heads * HD, D))
        w.add_tensor(b + 'attn_output.weight', **q4_0(D, a.heads * HD))
        w.add_tensor(b + 'attn_q_norm.weight', f32(HD, value=1.0))
        w.add_tensor(b + 'attn_k_norm.weight', f32(HD, value=1.0))
        w.add_tensor(b + 'ffn_norm.weight', f32(D, value=1.0))
        w.add_tensor(b + 'ffn_gate_inp.weight', f32(a.experts, D))
        w.add_tensor(b + 'ffn_gate_exps.weight', **q4_0(a.experts, a.expert_ff, D))
        w.add_tensor(b + 'ffn_up_exps.weight', **q4_0(a.experts, a.expert_ff, D))
        w.add_tensor(b + 'ffn_down_exps.weight', **q4_0(a.experts, D, a.expert_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f'wrote {a.out}: qwen3moe, {a.layers} layers, hidden {D}, {a.experts} experts top-{a.top_k} of width {a.expert_ff}')


if __name__ == '__main__':
    main()
