#!/usr/bin/python3
"""Checks of the model builder's mixture-of-experts pieces that need no runtime (ctest
model_builder_moe): checkpoint names of Mixtral and gpt-oss read back as the canonical weights,
gpt-oss's MXFP4 expert tensors written into the model byte for byte, MXFP4 codes and their
dequantisation, YaRN rotary tables against a float64 implementation of their own, and refused
combinations."""
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import numpy_helper

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "..", "tests", "genai"))

import gpt_oss_mxfp4_checkpoint  # noqa: E402  (the test checkpoint writer)
import model_builder  # noqa: E402
from model_builder import quantize, rope  # noqa: E402
from model_builder.config import BuildOptions  # noqa: E402
from model_builder.weights import canonicalize, read_safetensors  # noqa: E402


def _dense_part(weights):
    return {n: a for n, a in weights.items() if ".experts." not in n and ".mlp.gate." not in n}


def mixtral_checkpoint(cfg, w):
    ck = _dense_part(w)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        ck[p + "block_sparse_moe.gate.weight"] = w[p + "mlp.gate.weight"]
        for e in range(cfg.num_experts):
            for old, new in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
                ck[p + f"block_sparse_moe.experts.{e}.{old}.weight"] = w[p + f"mlp.experts.{e}.{new}.weight"]
    return ck


def gpt_oss_checkpoint(cfg, w):
    """Hugging Face gpt-oss layout: stacked [E, in, out] experts, gate and up interleaved."""
    ck = _dense_part(w)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        ck[p + "mlp.router.weight"], ck[p + "mlp.router.bias"] = w[p + "mlp.gate.weight"], w[p + "mlp.gate.bias"]
        expert = [f"{p}mlp.experts.{e}." for e in range(cfg.num_experts)]
        ck[p + "mlp.experts.gate_up_proj"] = np.stack([
            np.stack([w[x + "gate_proj.weight"].T, w[x + "up_proj.weight"].T], -1).reshape(cfg.hidden_size, -1)
            for x in expert])
        ck[p + "mlp.experts.gate_up_proj_bias"] = np.stack([
            np.stack([w[x + "gate_proj.bias"], w[x + "up_proj.bias"]], -1).reshape(-1) for x in expert])
        ck[p + "mlp.experts.down_proj"] = np.stack([w[x + "down_proj.weight"].T for x in expert])
        ck[p + "mlp.experts.down_proj_bias"] = np.stack([w[x + "down_proj.bias"] for x in expert])
    return ck


class CheckpointNames(unittest.TestCase):
    def check(self, preset, to_checkpoint):
        cfg = model_builder.load_config(preset)
        weights = model_builder.load_weights(cfg, seed=3)
        got = canonicalize(cfg, to_checkpoint(cfg, weights))
        self.assertEqual(set(got), set(weights))
        for name, array in weights.items():
            np.testing.assert_array_equal(got[name], array, err_msg=name)

    def test_mixtral_names(self):
        self.check("mixtral", mixtral_checkpoint)

    def test_gpt_oss_stacked_experts(self):
        self.check("gpt_oss", gpt_oss_checkpoint)


class GptOssMxfp4Checkpoint(unittest.TestCase):
    """The published layout (tests/genai/gpt_oss_mxfp4_checkpoint.py writes a tiny one)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        gpt_oss_mxfp4_checkpoint.write_checkpoints(cls.tmp.name)
        cls.cfg = model_builder.load_config("gpt_oss")
        cls.shards = [read_safetensors(os.path.join(cls.tmp.name, "mxfp4", f"model-0000{s}-of-00002.safetensors"))
                      for s in range(2)]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_codes_reach_the_model_unchanged(self):
        weights = model_builder.load_weights(self.cfg, checkpoint=os.path.join(self.tmp.name, "mxfp4"))
        out = os.path.join(self.tmp.name, "model")
        model_builder.write_model(out, self.cfg, weights, BuildOptions(moe_weights="mxfp4"))
        inits = {t.name: t for t in onnx.load(os.path.join(out, "model.onnx")).graph.initializer}
        for layer, shard in enumerate(self.shards):
            for proj in ("gate_up_proj", "down_proj"):
                ck = f"model.layers.{layer}.mlp.experts.{proj}"
                graph = f"model.layers.{layer}.moe.experts.{proj}"
                blocks, scales = shard[ck + "_blocks"], shard[ck + "_scales"]
                codes = numpy_helper.to_array(inits[graph + ".qweight"])
                np.testing.assert_array_equal(codes, blocks.reshape(codes.shape), err_msg=graph)
                stored = np.frombuffer(inits[graph + ".scales"].raw_data, np.uint8).reshape(scales.shape)
                np.testing.assert_array_equal(stored, scales, err_msg=graph)

    def test_floats_are_the_dequantised_codes(self):
        weights = model_builder.load_weights(self.cfg, checkpoint=os.path.join(self.tmp.name, "mxfp4"))
        dense = model_builder.load_weights(self.cfg, checkpoint=os.path.join(self.tmp.name, "dense.safetensors"))
        self.assertEqual(set(weights), set(dense))
        for name, array in dense.items():
            np.testing.assert_array_equal(weights[name], array, err_msg=name)

    def test_bad_tensors_are_errors_naming_them(self):
        ck = {**self.shards[0], **self.shards[1]}
        prefix = "model.layers.1.mlp.experts.down_proj"
        broken = dict(ck)
        del broken[prefix + "_scales"]
        with self.assertRaisesRegex(ValueError, f"{prefix}: checkpoint has one of _blocks and _scales"):
            canonicalize(self.cfg, broken)
        broken = dict(ck, **{prefix + "_blocks": ck[prefix + "_blocks"].reshape(4, 128, 16, 8)})
        with self.assertRaisesRegex(ValueError, rf"{prefix}_blocks \[4, 128, 16, 8\] should be"):
            canonicalize(self.cfg, broken)
        broken = dict(ck, **{prefix + "_scales": ck[prefix + "_scales"].astype(np.float32)})
        with self.assertRaisesRegex(ValueError, f"{prefix}_blocks / _scales must be U8"):
            canonicalize(self.cfg, broken)


class Mxfp4(unittest.TestCase):
    def test_codes_hold_every_e2m1_value_exactly(self):
        values = np.concatenate([quantize.E2M1, -quantize.E2M1[1:], [0.0] * 17]).reshape(1, 32) * 2.0 ** -3
        q = quantize.quantize_mxfp4(values)
        np.testing.assert_array_equal(quantize.dequantize_mxfp4(q), values.astype(np.float32))
        self.assertEqual(q.scales[0, 0], 127 - 3)

    def test_error_within_half_a_step_of_the_block_scale(self):
        w = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
        q = quantize.quantize_mxfp4(w)
        self.assertEqual((q.codes.shape, q.scales.shape), ((8, 32), (8, 2)))
        scale = 2.0 ** (q.scales.astype(np.float64) - 127)
        error = np.abs(quantize.dequantize_mxfp4(q) - w).reshape(8, 2, 32).max(axis=-1)
        self.assertTrue(np.all(error <= scale + 1e-12))  # the widest e2m1 step (4 -> 6) is 2 units
        self.assertTrue(np.all(np.abs(w).reshape(8, 2, 32).max(axis=-1) <= 6 * scale))


def yarn_tables(head_dim, theta, factor, original, beta_fast, beta_slow, truncate, positions):
    """cos / sin [positions, head_dim / 2] of YaRN written from the paper's wavelengths, float64:
    pair i turns orig * theta_i / (2 pi) times over the original context; pairs turning more than
    beta_fast times keep theta_i, fewer than beta_slow times take theta_i / factor, and in between
    the mix is linear in i (Hugging Face's ramp); cos and sin carry 0.1 ln(factor) + 1."""
    def pair_turning(beta):  # the (fractional) pair index that turns exactly beta times
        return (head_dim / 2) * math.log(original / (2 * math.pi * beta)) / math.log(theta)
    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    table = np.empty((len(positions), head_dim // 2, 2))
    for i in range(head_dim // 2):
        theta_i = theta ** (-2.0 * i / head_dim)
        mix = min(max((i - low) / (high - low), 0.0), 1.0)
        freq = theta_i * (1 - mix) + theta_i / factor * mix
        for row, p in enumerate(positions):
            table[row, i] = math.cos(p * freq), math.sin(p * freq)
    return table * (0.1 * math.log(factor) + 1)


class YarnRope(unittest.TestCase):
    def test_gpt_oss_preset_tables(self):
        cfg = model_builder.load_config("gpt_oss")
        cos, sin = rope.half_tables(cfg)
        want = yarn_tables(64, 150000.0, 32.0, 8, 32, 1, False, range(cfg.max_position_embeddings))
        np.testing.assert_allclose(cos, want[..., 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(sin, want[..., 1], rtol=0, atol=1e-12)

    def test_gpt_oss_20b_and_truncated_ranges(self):
        for truncate in (False, True):
            scaling = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                       "beta_fast": 32.0, "beta_slow": 1.0, "truncate": truncate}
            cfg = model_builder.load_config("gpt_oss", overrides=[
                "max_position_embeddings=131072", f"rope_scaling={json.dumps(scaling)}"])
            positions = [0, 1, 7, 4095, 4096, 100000, 131071]
            angles = rope.rotary_angles(cfg, positions)
            factor = rope.frequencies(cfg)[1]
            want = yarn_tables(64, 150000.0, 32.0, 4096, 32, 1, truncate, positions)
            np.testing.assert_allclose(np.cos(angles) * factor, want[..., 0], rtol=0, atol=1e-9)
            np.testing.assert_allclose(np.sin(angles) * factor, want[..., 1], rtol=0, atol=1e-9)

    def test_newer_configs_rope_parameters(self):
        preset = model_builder.load_config("gpt_oss")
        hf = {"model_type": "gpt_oss", "num_local_experts": 4, "rope_parameters": dict(preset.rope_scaling, rope_theta=150000.0)}
        hf.update({k: getattr(preset, k) for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                                   "intermediate_size", "vocab_size", "num_hidden_layers",
                                                   "max_position_embeddings")})
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(hf, f)
            f.flush()
            cfg = model_builder.load_config(json_path=f.name)
        self.assertEqual((cfg.rope_theta, cfg.rope_scaling), (preset.rope_theta, preset.rope_scaling))

    def test_other_rope_scaling_is_refused(self):
        with self.assertRaisesRegex(ValueError, "rope_scaling .* is not supported"):
            model_builder.load_config("llama", overrides=['rope_scaling={"rope_type": "llama3", "factor": 8}'])


class Refusals(unittest.TestCase):
    def refused(self, preset, message, **options):
        cfg = model_builder.load_config(preset)
        with self.assertRaisesRegex(ValueError, message):
            BuildOptions(**options).validate(cfg)

    def test_refused_combinations(self):
        self.refused("mixtral", "genai style only", style="standard")
        self.refused("llama", "needs a mixture-of-experts config", moe_weights="mxfp4")
        self.refused("qwen3_moe", "moe_intermediate_size 64 to be a multiple of the block size 128",
                     weights="int4", block_size=128)
        with self.assertRaisesRegex(ValueError, "num_experts_per_tok must be in"):
            model_builder.load_config("mixtral", overrides=["num_experts_per_tok=5"])


if __name__ == "__main__":
    unittest.main()
