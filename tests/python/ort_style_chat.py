"""A chat script written as for onnxruntime_genai (the shape of its model-chat example: config
with providers and an overlay, a tokenizer stream, the generator loop), differing only in the
import. test_ort_style_program.py runs it; it reads one question per line from stdin."""

import argparse
import json
import sys

import onnx_genai as og  # was: import onnxruntime_genai as og


def main(args):
    config = og.Config(args.model_path)
    if args.execution_provider != "follow_config":
        config.clear_providers()
        if args.execution_provider != "cpu":
            config.append_provider(args.execution_provider)
    config.overlay(json.dumps({"search": {"max_length": args.max_length}}))
    model = og.Model(config)
    tokenizer = og.Tokenizer(model)
    tokenizer_stream = tokenizer.create_stream()

    search_options = {name: getattr(args, name) for name in ["do_sample", "top_k", "top_p", "temperature"]
                      if getattr(args, name) is not None}
    params = og.GeneratorParams(model)
    params.set_search_options(**search_options)
    generator = og.Generator(model, params)

    for question in sys.stdin:
        messages = json.dumps([{"role": "user", "content": question.strip()}])
        prompt = tokenizer.apply_chat_template(messages=messages, add_generation_prompt=True)
        generator.append_tokens(tokenizer.encode(prompt))
        while not generator.is_done():
            generator.generate_next_token()
            new_token = generator.get_next_tokens()[0]
            print(tokenizer_stream.decode(new_token), end="", flush=True)
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", "--model_path", required=True)
    parser.add_argument("-e", "--execution_provider", default="follow_config")
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--do_sample", action="store_true", default=None)
    parser.add_argument("--top_k", type=int)
    parser.add_argument("--top_p", type=float)
    parser.add_argument("--temperature", type=float)
    main(parser.parse_args())
