"""genai_config.json in onnxruntime-genai's format, and the tokenizer files beside the model."""
import json
import os
import shutil

# What onnxruntime-genai reads next to a model for its tokenizer (whichever exist are copied).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "generation_config.json")


def genai_config(cfg, opts, filename="model.onnx"):
    """The config onnxruntime-genai's builder writes for CPU. A sliding window lives in the graph
    (GroupQueryAttention's local_window_size, or the mask) over a full-length KV cache, which is
    what the builder writes with windowed_kv_cache=false: no "sliding_window" section here."""
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    if opts.style != "genai" or opts.position_ids:
        inputs["position_ids"] = "position_ids"
    inputs["past_key_names"] = "past_key_values.%d.key"
    inputs["past_value_names"] = "past_key_values.%d.value"
    decoder = {
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
        "filename": filename,
        "head_size": cfg.head_dim,
        "hidden_size": cfg.hidden_size,
        "inputs": inputs,
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value"},
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
    }
    return {
        "model": {
            "bos_token_id": cfg.bos_token_id,
            "context_length": cfg.max_position_embeddings,
            "decoder": decoder,
            "eos_token_id": cfg.eos_token_id,
            "pad_token_id": cfg.pad_token_id,
            "type": cfg.model_type,
            "vocab_size": cfg.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": False,
            "early_stopping": True,
            "length_penalty": 1.0,
            "max_length": cfg.max_position_embeddings,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            # GroupQueryAttention can read and write one max_length buffer; plain Concat caches cannot.
            "past_present_share_buffer": opts.style == "genai" and not opts.separate_kv_buffers,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 50,
            "top_p": 1.0,
        },
    }


def write_genai_config(out_dir, cfg, opts):
    with open(os.path.join(out_dir, "genai_config.json"), "w") as f:
        json.dump(genai_config(cfg, opts), f, indent=4)


def tokenizer_files(tokenizer_dir):
    """The tokenizer files present in tokenizer_dir; fails when there is none."""
    found = [name for name in TOKENIZER_FILES if os.path.isfile(os.path.join(tokenizer_dir, name))]
    if not found:
        raise ValueError(f"{tokenizer_dir} holds none of {', '.join(TOKENIZER_FILES)}")
    return found


def copy_tokenizer(tokenizer_dir, names, out_dir):
    for name in names:
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
