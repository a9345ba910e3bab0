"""What a user of onnxruntime_genai writes, run against onnx_genai: a generation loop, a padded
batch, a streamed chat, seeded sampling, beam search, rewind, logits read and replaced. The text is held to
the CLI's for the same settings (the CLI drives the C++ API directly)."""

import numpy as np
import pytest

import onnx_genai as og
from conftest import MODEL_DIR, generate, run_without_the_gil

PROMPT = "The Lord is my shepherd"


def test_greedy_loop_matches_the_cli(model, tokenizer, cli):
    generator, text = generate(model, tokenizer, PROMPT, max_length=40, do_sample=False)
    prompt_tokens = len(tokenizer.encode(PROMPT))
    sequence = generator.get_sequence(0)
    assert sequence.dtype == np.int32 and len(sequence) == 40 == generator.token_count()
    assert text == cli("generate", MODEL_DIR, "--prompt", PROMPT, "--greedy", "--max-new-tokens", str(40 - prompt_tokens))
    assert tokenizer.decode(sequence[prompt_tokens:]) == text


def test_beam_search_matches_the_cli(model, tokenizer, cli):
    prompt = tokenizer.encode(PROMPT)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + 10, num_beams=4, num_return_sequences=2, length_penalty=0.7,
                              early_stopping=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
        assert len(generator.get_next_tokens()) == 2  # batch_size * num_return_sequences
    texts = [tokenizer.decode(generator.get_sequence(i)[len(prompt):]) for i in range(2)]
    assert "\n".join(texts) == cli("generate", MODEL_DIR, "--prompt", PROMPT, "--max-new-tokens", "10", "--num-beams", "4",
                                   "--num-return-sequences", "2", "--length-penalty", "0.7", "--early-stopping", "false")
    with pytest.raises(RuntimeError, match="not available with beam search"):
        generator.get_logits()


def test_config_overlay_and_providers(tokenizer):
    config = og.Config(MODEL_DIR)
    config.clear_providers()
    config.append_provider("cpu")
    config.overlay('{"search": {"max_length": 12}}')
    model = og.Model(config)
    assert model.device_type == "CPU"
    generator, _ = generate(model, og.Tokenizer(model), PROMPT)
    assert generator.token_count() == 12
    with pytest.raises(RuntimeError, match="execution provider 'dml' is not available"):
        config.append_provider("dml")
    with pytest.raises(RuntimeError, match="/model/context_length"):
        config.overlay('{"model": {"context_length": 4096}}')


def test_batched_generate_matches_one_by_one(model, tokenizer):
    prompts = ["The Lord is my shepherd", "A fortune:", "In the beginning God created"]
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=32, batch_size=len(prompts))
    generator = og.Generator(model, params)
    tokens = tokenizer.encode_batch(prompts)
    assert tokens.as_numpy().shape[0] == 3
    generator.append_tokens(tokens)
    while not generator.is_done():
        generator.generate_next_token()
        assert generator.get_next_tokens().shape == (3,)
    for i, prompt in enumerate(prompts):
        alone, _ = generate(model, tokenizer, prompt, max_length=32)
        assert list(generator.get_sequence(i)) == list(alone.get_sequence(0)), prompt
    texts = tokenizer.decode_batch(tokens)
    assert texts == prompts


def test_streaming_chat_over_two_turns(model, tokenizer):
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=96)
    generator = og.Generator(model, params)
    messages = '[{"role": "user", "content": "Who is my shepherd?"}]'
    prompt = tokenizer.apply_chat_template(messages=messages, add_generation_prompt=True)
    assert prompt == "user: Who is my shepherd?\nassistant:"
    for turn in [prompt, "\nuser: And then?\nassistant:"]:
        generator.append_tokens(tokenizer.encode(turn))
        start = generator.token_count()
        stream = tokenizer.create_stream()
        streamed = ""
        for _ in range(10):
            if generator.is_done():
                break
            generator.generate_next_token()
            streamed += stream.decode(generator.get_next_tokens()[0])
        whole = tokenizer.decode(generator.get_sequence(0)[start:])
        assert streamed and whole.startswith(streamed)
    assert tokenizer.decode(generator.get_sequence(0)).startswith(prompt)


def test_seeded_sampling_repeats_and_matches_the_cli(model, tokenizer, cli):
    options = dict(max_length=40, do_sample=True, temperature=0.8, top_k=20, random_seed=7)
    _, first = generate(model, tokenizer, PROMPT, **options)
    _, again = generate(model, tokenizer, PROMPT, **options)
    _, other = generate(model, tokenizer, PROMPT, **{**options, "random_seed": 8})
    assert first == again != other
    new_tokens = 40 - len(tokenizer.encode(PROMPT))
    assert first == cli("generate", MODEL_DIR, "--prompt", PROMPT, "--temperature", "0.8", "--top-k", "20",
                        "--seed", "7", "--max-new-tokens", str(new_tokens))


def test_rewind_and_regenerate(model, tokenizer):
    generator, _ = generate(model, tokenizer, PROMPT, max_length=30)
    full = list(generator.get_sequence(0))
    generator.rewind_to(10)
    assert list(generator.get_sequence(0)) == full[:10] and not generator.is_done()
    while not generator.is_done():
        generator.generate_next_token()
    assert list(generator.get_sequence(0)) == full


def test_logits_read_and_replaced(model, tokenizer):
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=30, repetition_penalty=1.0, no_repeat_ngram_size=0)
    generator = og.Generator(model, params)
    generator.append_tokens(tokenizer.encode(PROMPT))
    logits = generator.get_logits()
    assert logits.dtype == np.float32 and logits.shape == (1, 1, 8192)
    generator.generate_next_token()
    assert generator.get_next_tokens()[0] == int(np.argmax(logits[0, 0]))
    forced = 4321
    replaced = np.full((1, 1, 8192), -1e9, dtype=np.float32)
    replaced[0, 0, forced] = 0
    generator.get_logits()
    generator.set_logits(replaced)
    generator.generate_next_token()
    assert generator.get_next_tokens()[0] == forced
    with pytest.raises(RuntimeError, match="8192 expected"):
        generator.set_logits(np.zeros(5, dtype=np.float32))


def test_errors_carry_the_library_message(model):
    with pytest.raises(RuntimeError, match="/nonexistent: no such file or folder"):
        og.Model("/nonexistent")
    params = og.GeneratorParams(model)
    with pytest.raises(RuntimeError, match="unknown search option 'top_q'"):
        params.set_search_options(top_q=0.5)
    params.set_search_options(num_beams=2, do_sample=True)
    with pytest.raises(RuntimeError, match=r"beam search \(num_beams 2\) cannot be combined with sampling"):
        og.Generator(model, params)
    params.set_search_options(do_sample=False, num_return_sequences=3)
    with pytest.raises(RuntimeError, match=r"num_return_sequences must be in \[1, num_beams 2\], got 3"):
        og.Generator(model, params)
    generator = og.Generator(model, og.GeneratorParams(model))
    with pytest.raises(RuntimeError, match="outside the vocabulary"):
        generator.append_tokens(np.array([1, 99999], dtype=np.int32))


def test_the_gil_is_released_while_the_model_runs(model, tokenizer):
    # generate_next_token prefills ~450 tokens.
    prompt = tokenizer.encode(" ".join(["and the earth was without form, and void;"] * 45))[:450]
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=460)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    run_without_the_gil(generator.generate_next_token)
