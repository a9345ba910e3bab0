#!/usr/bin/python3
"""Builds a decoder-only LLM (Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma, Mixtral, Qwen3-MoE, gpt-oss style) as an ONNX model.

    /usr/bin/python3 tools/build_model.py OUT_DIR --preset llama [--set num_key_value_heads=1 ...]
        [--style genai|standard|opset23] [--io-dtype f32|f16]
        [--weights float|int4|int8 --block-size 32 --accuracy-level 0 --asymmetric --quantize-embeddings]
        [--moe-weights mxfp4]
        [--position-ids] [--seqlens-keepdims] [--separate-qkv] [--separate-kv-buffers] [--external-data] [--seed 0 | --checkpoint model.safetensors]
        [--tokenizer-dir DIR] [--save-checkpoint FILE.safetensors [--checkpoint-dtype f32|f16]]

The model comes from a preset (llama qwen2 qwen3 mistral phi3 gemma mixtral qwen3_moe gpt_oss;
tools/model_builder/config.py)
or --config FILE (a Hugging Face config.json, or the model_config.json a build writes), each
changed by --set KEY=VALUE. Weights are seeded random float32 (the same seed gives the same
weights in every style and precision) or read from safetensors (a file or a folder of shards) or
a torch state_dict, with Hugging Face Llama names (Phi-3's fused qkv_proj and gate_up_proj are
split on load). --save-checkpoint writes the weights back as such a checkpoint.

Styles:
  genai     what onnxruntime-genai's model builder writes: GroupQueryAttention (rotary inside,
            cos/sin caches), SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization,
            MatMul or MatMulNBits (int4/int8), optional GatherBlockQuantized embeddings, seqlens_k
            and total_sequence_length computed from attention_mask in the graph; opset 21
  standard  torch.onnx / Optimum style: opset 17, MatMul/Softmax, Concat KV cache, rotary from
            Slice/Concat/Mul/Add, RMSNorm from Pow/ReduceMean/Sqrt/Div/Mul, mask from attention_mask
  opset23   the standard graph with ONNX Attention, RMSNormalization and RotaryEmbedding

Mixture-of-experts models (genai style only) get com.microsoft MoE with float weights, QMoE
with int4/int8 block-quantized experts, or QMoE with MXFP4 experts (--moe-weights mxfp4, as
gpt-oss checkpoints ship them; the rest follows --weights). docs/moe.md shows the graph. A gpt-oss
checkpoint's own MXFP4 experts (*_blocks / *_scales) go into QMoE byte for byte.

OUT_DIR gets model.onnx (+ model.onnx.data with 64-byte aligned tensors when --external-data or
past 1 GiB of weights), genai_config.json, model_config.json and the tokenizer files.

    --reference TOKENS.json --reference-out DIR

runs the PyTorch reference forward (float64) on each token list in TOKENS.json (a JSON list of
lists, unpadded) and writes DIR/manifest.json with row{b}.logits [len, vocab] float32, using the
weights the built model computes with (quantized ones dequantized). OUT_DIR may then be omitted.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model_builder  # noqa: E402
from model_builder.config import PRESETS, STYLES, BuildOptions  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", nargs="?", help="folder to write the model into")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", choices=sorted(PRESETS))
    source.add_argument("--config", help="config JSON (Hugging Face config.json or model_config.json)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    p.add_argument("--style", choices=STYLES, default="genai")
    p.add_argument("--io-dtype", choices=("f32", "f16"), default="f32")
    p.add_argument("--weights", choices=("float", "int4", "int8"), default="float")
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--accuracy-level", type=int, default=0)
    p.add_argument("--asymmetric", action="store_true", help="quantize with zero points")
    p.add_argument("--quantize-embeddings", action="store_true", help="GatherBlockQuantized embeddings")
    p.add_argument("--moe-weights", choices=("mxfp4",),
                   help="mixture-of-experts models: experts in MXFP4 (QMoE quant_type fp4) whatever --weights says")
    p.add_argument("--position-ids", action="store_true",
                   help="genai: position_ids input and RotaryEmbedding nodes instead of rotary inside attention")
    p.add_argument("--seqlens-keepdims", action="store_true",
                   help="genai: seqlens_k [batch, 1] from a ReduceSum keeping dims, as older builders wrote it")
    p.add_argument("--separate-qkv", action="store_true",
                   help="genai: q, k and v projections as three MatMuls into GroupQueryAttention")
    p.add_argument("--separate-kv-buffers", action="store_true",
                   help="genai: past and present KV in separate buffers (past_present_share_buffer false)")
    p.add_argument("--external-data", action="store_true")
    weights = p.add_mutually_exclusive_group()
    weights.add_argument("--seed", type=int, default=0)
    weights.add_argument("--checkpoint", help=".safetensors file, folder of .safetensors shards, or torch "
                         "state_dict (.pt/.bin)")
    p.add_argument("--tokenizer-dir")
    p.add_argument("--save-checkpoint", metavar="FILE.safetensors",
                   help="also write the weights as a safetensors checkpoint (Hugging Face names)")
    p.add_argument("--checkpoint-dtype", choices=("f32", "f16"), default="f32",
                   help="the --save-checkpoint tensors' dtype")
    p.add_argument("--reference", metavar="TOKENS.json")
    p.add_argument("--reference-out")
    p.add_argument("--reference-dtype", choices=("float64", "float32"), default="float64")
    args = p.parse_args(argv)
    if (args.reference is None) != (args.reference_out is None):
        p.error("--reference and --reference-out go together")
    if args.out_dir is None and args.reference is None and args.save_checkpoint is None:
        p.error("give OUT_DIR, --reference or --save-checkpoint")
    return args


def main(argv):
    args = parse_args(argv)
    try:
        cfg = model_builder.load_config(args.preset, args.config, args.set)
        opts = BuildOptions(style=args.style, io_dtype=args.io_dtype, weights=args.weights,
                            block_size=args.block_size, accuracy_level=args.accuracy_level,
                            symmetric=not args.asymmetric, quantize_embeddings=args.quantize_embeddings,
                            position_ids=args.position_ids, seqlens_keepdims=args.seqlens_keepdims,
                            separate_qkv=args.separate_qkv, separate_kv_buffers=args.separate_kv_buffers,
                            external_data=args.external_data, moe_weights=args.moe_weights)
        opts.validate(cfg)
        weights = model_builder.load_weights(cfg, args.seed, args.checkpoint)
        if args.out_dir:
            model_builder.write_model(args.out_dir, cfg, weights, opts, args.tokenizer_dir)
        if args.save_checkpoint:
            model_builder.write_safetensors(args.save_checkpoint, cfg, weights, args.checkpoint_dtype.upper())
        if args.reference:
            from model_builder.reference import ReferenceModel, write_reference

            with open(args.reference) as f:
                sequences = json.load(f)
            model = ReferenceModel(cfg, model_builder.effective_weights(cfg, weights, opts), args.reference_dtype)
            write_reference(args.reference_out, model, sequences)
    except (ValueError, OSError) as e:
        print(f"build_model: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
