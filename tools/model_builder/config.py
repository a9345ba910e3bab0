"""Model configuration: Hugging Face config.json keys, presets per architecture, overrides.

A config is the subset of a Hugging Face `config.json` that decoder-only LLMs share, plus the
flags that tell the architectures apart. The graph emitters read only the flags, never the
architecture name, so a new architecture is an entry in ARCHITECTURES (and a preset):

    llama    plain RMSNorm decoder, SiLU-gated MLP
    qwen2    + bias on the q/k/v projections
    qwen3    + RMSNorm over each q/k head (before rotary)
    mistral  + sliding-window attention
    phi3     q/k/v and gate/up weights stored fused (qkv_proj, gate_up_proj)
    gemma    embeddings scaled by sqrt(hidden), norm weights stored as w with scale (1 + w),
             tanh-approximated GELU MLP, tied embeddings, optional logit softcaps
    mixtral  mixture-of-experts MLP: softmax router, top k renormalised, SiLU-gated experts
    qwen3_moe  Qwen3's attention with mixture-of-experts MLPs (moe_intermediate_size wide,
             norm_topk_prob, optional dense layers: decoder_sparse_step, mlp_only_layers)
    gpt_oss  biases on q/k/v/o, attention sinks, sliding-window and full attention alternating,
             router with bias taking the top k logits then their softmax, experts with biases and
             a clamped SwiGLU: min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, +-limit) + 1)
"""
import dataclasses
import json
import math

import numpy as np

# Small defaults: every preset builds in well under a second.
_SMALL_DEFAULTS = {
    "hidden_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": None,
    "intermediate_size": 256,
    "vocab_size": 1000,
    "num_hidden_layers": 2,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

# What each architecture changes (from Hugging Face model_type to flags).
ARCHITECTURES = {
    "llama": {},
    "qwen2": {"attention_bias": True},
    "qwen3": {"qk_norm": True},
    "mistral": {},  # its sliding_window comes from the config
    "phi3": {"fused_weights": True},
    "gemma": {"hidden_act": "gelu_pytorch_tanh", "norm_weight_offset": 1.0, "scale_embeddings": True,
              "tie_word_embeddings": True},
    "mixtral": {"num_experts": 8, "num_experts_per_tok": 2},
    "qwen3_moe": {"qk_norm": True, "num_experts": 8, "num_experts_per_tok": 2},
    "gpt_oss": {"attention_bias": True, "o_proj_bias": True, "attention_sinks": True, "sliding_window_pattern": 2,
                "num_experts": 4, "num_experts_per_tok": 2, "moe_routing": "topk_softmax", "moe_bias": True,
                "swiglu_alpha": 1.702, "swiglu_beta": 1.0, "swiglu_limit": 7.0},
}

# Presets: an architecture at a small size that shows what sets it apart.
PRESETS = {
    "llama": {},
    "qwen2": {"tie_word_embeddings": True},
    "qwen3": {"head_dim": 64},
    "mistral": {"sliding_window": 6},
    "phi3": {"num_key_value_heads": 4},
    "gemma": {"num_key_value_heads": 1, "head_dim": 64},
    "mixtral": {"num_experts": 4},
    "qwen3_moe": {"head_dim": 64, "num_experts": 8, "num_experts_per_tok": 4, "moe_intermediate_size": 64,
                  "norm_topk_prob": True},
    # Window 6 on the sliding layers so a short decode reaches it.
    # YaRN as gpt-oss's (factor 32, beta_fast 32, beta_slow 1, untruncated, theta 150000), its
    # original context shrunk with max_position_embeddings so that their ratio stays 32.
    "gpt_oss": {"sliding_window": 6, "head_dim": 64, "num_attention_heads": 4, "num_key_value_heads": 1,
                "rope_theta": 150000.0,
                "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 8,
                                 "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}},
}

MOE_ROUTINGS = ("softmax_topk", "topk_softmax")

ACTIVATIONS = ("silu", "gelu_pytorch_tanh")


@dataclasses.dataclass
class ModelConfig:
    model_type: str
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    num_hidden_layers: int
    head_dim: int = None
    rope_theta: float = 10000.0
    rope_scaling: dict = None  # Hugging Face's; type "yarn" only (rope.py)
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    attention_bias: bool = False  # bias on q/k/v projections (not o_proj)
    qk_norm: bool = False  # RMSNorm over each q and k head, weight [head_dim]
    sliding_window: int = None  # a query sees itself and the window-1 keys before it
    fused_weights: bool = False  # checkpoint stores qkv_proj and gate_up_proj
    norm_weight_offset: float = 0.0  # effective norm scale = offset + stored weight
    scale_embeddings: bool = False  # embeddings multiplied by sqrt(hidden_size)
    attn_logit_softcapping: float = None  # scores -> cap * tanh(scores / cap)
    final_logit_softcapping: float = None  # logits -> cap * tanh(logits / cap)
    o_proj_bias: bool = False  # bias on o_proj too (gpt-oss)
    attention_sinks: bool = False  # a learned logit per head joins each softmax, then is dropped
    # Which layers the sliding window applies to: all, or every layer but each pattern-th
    # (gpt-oss: 2, sliding then full); Hugging Face's layer_types list overrides both.
    sliding_window_pattern: int = None
    layer_types: list = None  # "sliding_attention" / "full_attention" per layer
    # Mixture of experts (num_experts 0: dense MLPs everywhere).
    num_experts: int = 0
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = None  # an expert's width; default intermediate_size
    norm_topk_prob: bool = True  # softmax_topk routing: the k weights divided by their sum
    moe_routing: str = "softmax_topk"  # or topk_softmax: softmax over the k largest logits
    moe_bias: bool = False  # biases on the router and on every expert projection (gpt-oss)
    swiglu_alpha: float = 1.0  # expert activation: g * sigmoid(alpha * g) * (u + beta), g and u
    swiglu_beta: float = 0.0   # clamped to swiglu_limit (g from above, u both ways) when set
    swiglu_limit: float = None
    decoder_sparse_step: int = 1  # layer i has experts when (i + 1) % step == 0 ...
    mlp_only_layers: list = None  # ... and it is not listed here
    bos_token_id: int = 1
    eos_token_id: int = 2
    pad_token_id: int = 0

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        self.validate()

    def validate(self):
        positive = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                    "vocab_size", "num_hidden_layers", "head_dim", "max_position_embeddings")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                             f"num_key_value_heads {self.num_key_value_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ValueError(f"sliding_window must be positive or null, got {self.sliding_window}")
        if self.layer_types is not None and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(f"layer_types has {len(self.layer_types)} entries for {self.num_hidden_layers} layers")
        self._validate_rope_scaling()
        self._validate_moe()

    def _validate_rope_scaling(self):
        s = self.rope_scaling
        if s is None:
            return
        kind = s.get("rope_type", s.get("type")) if isinstance(s, dict) else None
        if kind != "yarn":
            raise ValueError(f"rope_scaling {s!r} is not supported (type yarn only)")
        if not isinstance(s.get("factor"), (int, float)) or s["factor"] <= 0:
            raise ValueError(f"rope_scaling factor must be a positive number, got {s.get('factor')!r}")

    def _validate_moe(self):
        if not self.num_experts:
            return
        if not 0 < self.num_experts_per_tok <= self.num_experts:
            raise ValueError(f"num_experts_per_tok must be in [1, num_experts={self.num_experts}], "
                             f"got {self.num_experts_per_tok}")
        if not isinstance(self.moe_inter, int) or self.moe_inter <= 0:
            raise ValueError(f"moe_intermediate_size must be a positive integer, got {self.moe_intermediate_size!r}")
        if self.moe_routing not in MOE_ROUTINGS:
            raise ValueError(f"moe_routing {self.moe_routing!r} is not one of {MOE_ROUTINGS}")
        if self.hidden_act != "silu":
            raise ValueError(f"experts use a SiLU-gated (SwiGLU) activation, not hidden_act {self.hidden_act!r}")
        if self.decoder_sparse_step < 1:
            raise ValueError(f"decoder_sparse_step must be >= 1, got {self.decoder_sparse_step}")

    @property
    def group_size(self):
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def q_size(self):
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self):
        return self.num_key_value_heads * self.head_dim

    @property
    def moe_inter(self):
        return self.moe_intermediate_size or self.intermediate_size

    def is_moe_layer(self, i):
        return (self.num_experts > 0 and (i + 1) % self.decoder_sparse_step == 0
                and i not in (self.mlp_only_layers or []))

    def layer_window(self, i):
        """Layer i's sliding window, or None where it attends to everything."""
        if self.sliding_window is None:
            return None
        if self.layer_types is not None:
            return self.sliding_window if self.layer_types[i] == "sliding_attention" else None
        if self.sliding_window_pattern and (i + 1) % self.sliding_window_pattern == 0:
            return None
        return self.sliding_window

    @property
    def embedding_multiplier(self):
        return math.sqrt(self.hidden_size) if self.scale_embeddings else 1.0

    def to_json(self):
        return dataclasses.asdict(self)


def _coerce(name, text):
    """Parses a --set value with the type the field is declared with."""
    field = {f.name: f for f in dataclasses.fields(ModelConfig)}.get(name)
    if field is None:
        raise ValueError(f"unknown config key {name!r}")
    if text.lower() in ("none", "null"):
        return None
    if field.type is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{name} wants true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if field.type is dict:  # JSON: rope_scaling={"rope_type": "yarn", "factor": 4}
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name} wants a JSON object, got {text!r}") from e
    if field.type is list:  # comma-separated: mlp_only_layers=0,2 or layer_types=full_attention,...
        return [int(item) if item.strip().isdigit() else item.strip() for item in text.split(",") if item.strip()]
    try:
        return field.type(text)
    except ValueError:
        raise ValueError(f"{name} wants a {field.type.__name__}, got {text!r}") from None


def _from_hf_json(data):
    """Keeps the keys ModelConfig knows and adds the flags the model_type implies."""
    model_type = data.get("model_type")
    if model_type not in ARCHITECTURES:
        raise ValueError(f"model_type {model_type!r} is not one of {sorted(ARCHITECTURES)}")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    merged = dict(ARCHITECTURES[model_type], model_type=model_type)
    merged.update({k: v for k, v in data.items() if k in known and v is not None})
    if model_type == "gemma":  # Gemma reads hidden_activation; its hidden_act says "gelu" but is ignored
        merged["hidden_act"] = data.get("hidden_activation") or "gelu_pytorch_tanh"
    if data.get("use_sliding_window") is False:  # Qwen2 configs carry a window they do not use
        merged.pop("sliding_window", None)
    rope = data.get("rope_parameters")  # newer Hugging Face configs: rope_theta and rope_scaling in one
    if isinstance(rope, dict):
        merged["rope_theta"] = rope.get("rope_theta", merged.get("rope_theta"))
        if rope.get("rope_type", "default") != "default":
            merged["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    if "num_local_experts" in data:  # Mixtral's and gpt-oss's name for num_experts
        merged["num_experts"] = data["num_local_experts"]
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        if isinstance(merged.get(key), list):
            merged[key] = merged[key][0]
    if merged.get("pad_token_id") is None and "eos_token_id" in merged:  # onnxruntime-genai's default
        merged["pad_token_id"] = merged["eos_token_id"]
    return merged


def load_config(preset=None, json_path=None, overrides=()):
    """A preset's values, else a JSON file's (ours or a Hugging Face config.json), then KEY=VALUE overrides."""
    if (preset is None) == (json_path is None):
        raise ValueError("give exactly one of a preset and a config file")
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
        values = dict(_SMALL_DEFAULTS, model_type=preset)
        values.update(ARCHITECTURES[preset])
        values.update(PRESETS[preset])
    else:
        with open(json_path) as f:
            values = _from_hf_json(json.load(f))
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not KEY=VALUE")
        key, text = item.split("=", 1)
        values[key.strip()] = _coerce(key.strip(), text.strip())
    return ModelConfig(**values)


STYLES = ("genai", "standard", "opset23")


@dataclasses.dataclass
class BuildOptions:
    """How the graph is written (the model itself is the ModelConfig)."""

    style: str = "genai"  # genai: onnxruntime-genai builder ops; standard: opset 17; opset23: ONNX Attention etc.
    io_dtype: str = "f32"  # activations, float weights, KV cache and logits: f32 or f16
    weights: str = "float"  # genai style: float MatMul, or int4/int8 MatMulNBits
    block_size: int = 32
    accuracy_level: int = 0
    symmetric: bool = True  # False: asymmetric blocks with zero points
    quantize_embeddings: bool = False  # genai int4/int8: GatherBlockQuantized embedding table
    position_ids: bool = False  # genai: RotaryEmbedding nodes fed by a position_ids input
    # genai, as older onnxruntime-genai builders wrote it: seqlens_k from a ReduceSum that keeps
    # dims ([B, 1]); q, k and v as three projections into GroupQueryAttention (rotary inside);
    # past and present as separate buffers (past_present_share_buffer false).
    seqlens_keepdims: bool = False
    separate_qkv: bool = False
    separate_kv_buffers: bool = False
    external_data: bool = False
    moe_weights: str = None  # experts: None (as --weights) or mxfp4 (QMoE quant_type fp4)

    def validate(self, cfg):
        if self.style not in STYLES:
            raise ValueError(f"style {self.style!r} is not one of {STYLES}")
        if self.io_dtype not in ("f32", "f16"):
            raise ValueError(f"io dtype {self.io_dtype!r} is not f32 or f16")
        if self.weights not in ("float", "int4", "int8"):
            raise ValueError(f"weights {self.weights!r} is not float, int4 or int8")
        if self.weights != "float" and (self.block_size < 16 or self.block_size & (self.block_size - 1)):
            raise ValueError(f"block size must be a power of two >= 16, got {self.block_size}")
        genai_only = (self.weights != "float", self.quantize_embeddings, self.position_ids, self.seqlens_keepdims,
                      self.separate_qkv, self.separate_kv_buffers)
        if self.style != "genai" and any(genai_only):
            raise ValueError("quantized weights, quantized embeddings, --position-ids, --seqlens-keepdims, "
                             "--separate-qkv and --separate-kv-buffers are genai-style options")
        self._validate_moe(cfg)
        if self.quantize_embeddings:
            if self.weights == "float":
                raise ValueError("quantized embeddings need int4 or int8 weights")
            if cfg.hidden_size % self.block_size:
                raise ValueError(f"quantized embeddings need hidden_size {cfg.hidden_size} to be a multiple "
                                 f"of the block size {self.block_size}")

    def _validate_moe(self, cfg):
        if self.moe_weights not in (None, "mxfp4"):
            raise ValueError(f"moe weights {self.moe_weights!r} is not mxfp4")
        if not cfg.num_experts:
            if self.moe_weights:
                raise ValueError("--moe-weights needs a mixture-of-experts config (num_experts > 0)")
            return
        if self.style != "genai":
            raise ValueError(f"mixture-of-experts models are written in the genai style only "
                             f"(com.microsoft MoE / QMoE), not {self.style}")
        if self.expert_format == "float":
            return
        block = 32 if self.expert_format == "mxfp4" else self.block_size
        for name, k in (("hidden_size", cfg.hidden_size), ("moe_intermediate_size", cfg.moe_inter)):
            if k % block:
                raise ValueError(f"{self.expert_format} experts need {name} {k} to be a multiple of the block "
                                 f"size {block}")

    @property
    def expert_format(self):
        """How expert weights are stored: float (MoE), int4 / int8 or mxfp4 (QMoE)."""
        return self.moe_weights or self.weights

    @property
    def bits(self):
        return {"int4": 4, "int8": 8}.get(self.weights)

    @property
    def float_dtype(self):
        return np.float16 if self.io_dtype == "f16" else np.float32
