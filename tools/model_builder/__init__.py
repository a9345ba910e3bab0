"""Builds decoder-only LLMs as ONNX models for the onnx-genai tests (see tools/build_model.py)."""
import json
import os

from . import genai_style, standard_style
from .config import BuildOptions, ModelConfig, load_config
from .genai_config import copy_tokenizer, tokenizer_files, write_genai_config
from .onnx_graph import save_model
from .quantize import effective_weights
from .weights import load_checkpoint, random_weights, write_safetensors

__all__ = ["BuildOptions", "ModelConfig", "load_config", "load_weights", "write_model", "effective_weights",
           "write_safetensors"]


def load_weights(cfg, seed=0, checkpoint=None):
    """Canonical float32 weights: from a checkpoint file when given, else seeded random ones."""
    return load_checkpoint(cfg, checkpoint) if checkpoint else random_weights(cfg, seed)


def write_model(out_dir, cfg, weights, opts, tokenizer_dir=None):
    """Writes model.onnx (+ model.onnx.data), genai_config.json, the config it was built from
    (model_config.json) and the tokenizer files; returns the model path."""
    opts.validate(cfg)
    tokenizer = tokenizer_files(tokenizer_dir) if tokenizer_dir else []
    os.makedirs(out_dir, exist_ok=True)
    emit = genai_style.build if opts.style == "genai" else standard_style.build
    path = os.path.join(out_dir, "model.onnx")
    save_model(emit(cfg, weights, opts), path, opts.external_data)
    write_genai_config(out_dir, cfg, opts)
    with open(os.path.join(out_dir, "model_config.json"), "w") as f:
        json.dump(cfg.to_json(), f, indent=2)
    copy_tokenizer(tokenizer_dir, tokenizer, out_dir)
    return path
