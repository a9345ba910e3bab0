"""og.Engine and og.Request as onnxruntime_genai's engine examples use them: requests with their
own params (search options, seed, guidance) join, engine.step() hands back the request object that
got tokens, the loop ends when step() returns None. Each request's tokens must be those its own
og.Generator gives alone."""

import json
import os
import subprocess
import sys

import pytest

import onnx_genai as og
from conftest import generate, run_without_the_gil

PROMPTS = ["The Lord is my shepherd", "In the beginning", "Blessed are the meek", "Count the flock:"]
OPTIONS = [dict(max_length=40), dict(max_length=24), dict(max_length=40, do_sample=True, top_k=20, temperature=0.8,
                                                          random_seed=7), dict(max_length=60)]
GUIDANCE = [None, None, None, ("regex", r"(yes|no), [0-9]{2,4} (sheep|goats)\.")]


def make_request(model, tokenizer, i):
    params = og.GeneratorParams(model)
    params.set_search_options(**OPTIONS[i])
    if GUIDANCE[i]:
        params.set_guidance(*GUIDANCE[i])
    request = og.Request(params)
    request.add_tokens(tokenizer.encode(PROMPTS[i]))
    request.set_opaque_data({"index": i, "tokens": []})
    return request


def drain(engine, request):
    """What onnxruntime_genai's continuous-batching example does with a request step() returns."""
    data = request.get_opaque_data()
    while request.has_unseen_tokens():
        data["tokens"].append(request.get_unseen_token())
    if request.is_done():
        engine.remove_request(request)


def alone(model, tokenizer, i):
    generator, _ = generate(model, tokenizer, PROMPTS[i], GUIDANCE[i], **OPTIONS[i])
    return list(generator.get_sequence(0))[len(tokenizer.encode(PROMPTS[i])):]


def test_batched_requests_give_each_its_own_generators_tokens(model, tokenizer):
    engine = og.Engine(model)
    requests = [make_request(model, tokenizer, i) for i in range(len(PROMPTS))]
    for request in requests[:3]:
        engine.add_request(request)
    steps = 0
    while request := engine.step():
        assert any(request is r for r in requests)
        drain(engine, request)
        steps += 1
        if steps == 2:
            engine.add_request(requests[3])  # joins a running batch
    assert not engine.has_pending_requests()
    for i, request in enumerate(requests):
        assert request.is_done() and request.is_turn_complete()
        assert request.get_opaque_data()["tokens"] == alone(model, tokenizer, i), PROMPTS[i]


def test_step_releases_the_gil_and_requests_join_meanwhile(model, tokenizer):
    # One thread's step prefills ~450 tokens while the main thread adds a request.
    engine = og.Engine(model)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=460)
    long_request = og.Request(params)
    long_request.add_tokens(tokenizer.encode(" ".join(["and the earth was without form, and void;"] * 45))[:450])
    long_request.set_opaque_data({"index": None, "tokens": []})
    engine.add_request(long_request)
    joined = make_request(model, tokenizer, 1)
    first = run_without_the_gil(engine.step, lambda: engine.add_request(joined))
    assert first is long_request or first is joined
    drain(engine, first)
    while request := engine.step():
        drain(engine, request)
    assert joined.get_opaque_data()["tokens"] == alone(model, tokenizer, 1)


def test_engine_errors_are_runtime_errors_with_the_reason(model, tokenizer):
    engine = og.Engine(model)
    params = og.GeneratorParams(model)
    empty = og.Request(params)
    with pytest.raises(RuntimeError, match=r"^OgaEngineAddRequest: the request has no tokens \(OgaRequestAddTokens first\)$"):
        engine.add_request(empty)
    with pytest.raises(RuntimeError, match=r"no unseen tokens \(all 0 generated tokens were read\)"):
        empty.get_unseen_token()
    params.set_search_options(num_beams=2)
    beams = og.Request(params)
    beams.add_tokens(tokenizer.encode("In the beginning"))
    with pytest.raises(RuntimeError, match="an engine request is one sequence: num_beams must be 1, got 2"):
        engine.add_request(beams)
    assert engine.step() is None and not engine.has_pending_requests()


def test_tensor_parallel_overlay_keeps_one_ranks_tokens(tmp_path):
    """{"model": {"tensor_parallel": 2}} (an onnx-genai key) on a llama preset with 4 KV heads from
    tools/build_model.py: the engine's and a generator's greedy tokens equal those at N = 1."""
    root = os.path.join(os.path.dirname(__file__), "../..")
    out = tmp_path / "tp_llama"
    subprocess.run([sys.executable, os.path.join(root, "tools/build_model.py"), str(out), "--preset", "llama",
                    "--set", "num_attention_heads=8", "--set", "num_key_value_heads=4", "--set", "vocab_size=300"],
                   check=True, capture_output=True)
    prompts = [[5, 17, 42, 99, 7], [8, 1, 64], [120, 121, 122, 123, 9, 250, 11]]

    def tokens(ranks):
        config = og.Config(str(out))
        config.overlay(json.dumps({"model": {"tensor_parallel": ranks}}))
        model = og.Model(config)
        engine = og.Engine(model)
        requests = []
        for i, prompt in enumerate(prompts):
            params = og.GeneratorParams(model)
            params.set_search_options(max_length=24, do_sample=False)
            request = og.Request(params)
            request.add_tokens(prompt)
            request.set_opaque_data({"index": i, "tokens": []})
            engine.add_request(request)
            requests.append(request)
        while request := engine.step():
            drain(engine, request)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=24, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(prompts[0])
        while not generator.is_done():
            generator.generate_next_token()
        return [r.get_opaque_data()["tokens"] for r in requests], list(generator.get_sequence(0))

    one = tokens(1)
    assert one[1][len(prompts[0]):] == one[0][0]
    assert tokens(2) == one
    config = og.Config(str(out))
    with pytest.raises(RuntimeError, match="model.tensor_parallel must be a whole number"):
        config.overlay(json.dumps({"model": {"tensor_parallel": 0}}))
