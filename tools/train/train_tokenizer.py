#!/usr/bin/env python3
"""Trains the default model's byte-level BPE tokenizer and writes the corpus as token ids.

    tools/train/train_tokenizer.py CORPUS_DIR OUT_DIR [--vocab-size 8192] [--context 512]
    tools/train/train_tokenizer.py CORPUS_DIR OUT_DIR --bytes-fallback      (CPU smoke tests only)

CORPUS_DIR holds train.txt and valid.txt from corpus.py (documents separated by a blank line).
OUT_DIR gets:
    tokenizer.json          Hugging Face `tokenizers` byte-level BPE, GPT-2 pre-tokenizer regex,
                            add_prefix_space false, ByteLevel decoder, no normalizer, no post-processor;
                            special token <|endoftext|> = id 0 (bos, eos and pad)
    tokenizer_config.json   PreTrainedTokenizerFast, model_max_length = --context, a plain-text chat
                            template ("role: content" lines, then "assistant:")
    special_tokens_map.json
    train.npy, valid.npy    uint16 token ids: each document's text (its lines joined by "\n") encoded
                            without special tokens, followed by <|endoftext|>
    meta.json               {"vocab_size", "eos_token_id", "tokens": {"train", "valid"}}

--bytes-fallback needs no `tokenizers` package: it writes a BPE tokenizer.json with no merges whose
ids are the raw UTF-8 bytes + 1 (vocab 257). It only exists so the pipeline can be smoke-tested
on a machine without `tokenizers`; it is not the shipped tokenizer.
"""
import argparse
import json
import os
import sys

import numpy as np

EOS = "<|endoftext|>"
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


def read_documents(path):
    """A corpus.py file's documents, each as one string (its lines joined by newlines)."""
    with open(path, encoding="utf-8") as f:
        return [doc.strip("\n") for doc in f.read().split("\n\n") if doc.strip()]


def bytes_to_unicode():
    """GPT-2's map from each byte to the printable character byte-level BPE uses for it."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def train_bpe(documents, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(documents, trainer=trainer, length=len(documents))
    if tokenizer.token_to_id(EOS) != 0:
        raise ValueError(f"{EOS} got id {tokenizer.token_to_id(EOS)}, expected 0")
    return tokenizer


def bytes_tokenizer_json():
    """tokenizer.json for a merge-free byte-level BPE: id 0 <|endoftext|>, id b + 1 for byte b."""
    vocab = {EOS: 0}
    vocab.update({char: byte + 1 for byte, char in bytes_to_unicode().items()})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": EOS, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def encode_documents(encode_batch, documents, eos_id):
    """One uint16 array: each document's ids followed by eos."""
    pieces = []
    for ids in encode_batch(documents):
        pieces.append(np.asarray(ids, dtype=np.uint16))
        pieces.append(np.asarray([eos_id], dtype=np.uint16))
    return np.concatenate(pieces)


def write_tokenizer(args, train_documents, path):
    """Writes tokenizer.json; returns (vocab size, encode_batch: documents -> iterable of id lists)."""
    if args.bytes_fallback:
        print("train_tokenizer: --bytes-fallback: byte ids for smoke tests, not a trained tokenizer")
        with open(path, "w") as f:
            json.dump(bytes_tokenizer_json(), f, ensure_ascii=False)
        return 257, lambda docs: ([b + 1 for b in doc.encode("utf-8")] for doc in docs)
    tokenizer = train_bpe(train_documents, args.vocab_size)
    tokenizer.save(path)
    return tokenizer.get_vocab_size(), lambda docs: (e.ids for e in tokenizer.encode_batch(
        docs, add_special_tokens=False))


def write_configs(out_dir, context):
    special = {"bos_token": EOS, "eos_token": EOS, "pad_token": EOS}
    config = dict(special, tokenizer_class="PreTrainedTokenizerFast", model_max_length=context,
                  add_bos_token=False, add_eos_token=False, clean_up_tokenization_spaces=False,
                  chat_template=CHAT_TEMPLATE,
                  added_tokens_decoder={"0": {"content": EOS, "lstrip": False, "normalized": False,
                                              "rstrip": False, "single_word": False, "special": True}})
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=2)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("corpus_dir")
    p.add_argument("out_dir")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--context", type=int, default=512, help="model_max_length in tokenizer_config.json")
    p.add_argument("--bytes-fallback", action="store_true",
                   help="SMOKE TESTS ONLY: ids = UTF-8 bytes + 1, no BPE training, no `tokenizers` needed")
    args = p.parse_args(argv)
    splits = {name: read_documents(os.path.join(args.corpus_dir, f"{name}.txt")) for name in ("train", "valid")}
    os.makedirs(args.out_dir, exist_ok=True)
    vocab_size, encode_batch = write_tokenizer(args, splits["train"], os.path.join(args.out_dir, "tokenizer.json"))
    write_configs(args.out_dir, args.context)
    counts = {}
    for name, documents in splits.items():
        ids = encode_documents(encode_batch, documents, eos_id=0)
        np.save(os.path.join(args.out_dir, f"{name}.npy"), ids)
        counts[name] = int(ids.size)
        text_bytes = sum(len(d.encode()) + 1 for d in documents)
        print(f"train_tokenizer: {name}: {ids.size} tokens, {text_bytes / ids.size:.2f} bytes per token")
    with open(os.path.join(args.out_dir, "meta.json"), "w") as f:
        json.dump({"vocab_size": vocab_size, "eos_token_id": 0, "tokens": counts}, f, indent=2)
    print(f"train_tokenizer: vocab {vocab_size} -> {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
