"""set_guidance as onnxruntime_genai users call it: the text must validate under references
independent of onnx-genai's constraints engine (python3-jsonschema, Python's re), and equal the
CLI's text under the same constraint (--json-schema / --regex, the C++ API)."""

import json
import re

import jsonschema
import pytest

import onnx_genai as og
from conftest import MODEL_DIR, generate

MAX_LENGTH = 80
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
REGEX = r"(yes|no), [0-9]{2,4} (sheep|goats)\."


def guided(model, tokenizer, prompt, guidance):
    generator, text = generate(model, tokenizer, prompt, guidance, max_length=MAX_LENGTH)
    assert generator.token_count() < MAX_LENGTH, "ended by max_length, not by a whole match"
    return text, str(MAX_LENGTH - len(tokenizer.encode(prompt)))


def test_json_schema_output_validates_and_matches_the_cli(model, tokenizer, cli, tmp_path):
    text, new_tokens = guided(model, tokenizer, "A person:", ("json_schema", json.dumps(SCHEMA)))
    jsonschema.validate(json.loads(text), SCHEMA)
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    assert text == cli("generate", MODEL_DIR, "--prompt", "A person:", "--greedy", "--max-new-tokens", new_tokens,
                       "--json-schema", str(schema_file))


def test_regex_output_matches_and_matches_the_cli(model, tokenizer, cli):
    text, new_tokens = guided(model, tokenizer, "Count the flock:", ("regex", REGEX))
    assert re.fullmatch(REGEX, text), text
    assert text == cli("generate", MODEL_DIR, "--prompt", "Count the flock:", "--greedy", "--max-new-tokens", new_tokens,
                       "--regex", REGEX)
    # Fast-forwarding is accepted and changes nothing here.
    _, forwarded = generate(model, tokenizer, "Count the flock:", ("regex", REGEX, True), max_length=MAX_LENGTH)
    assert forwarded == text


def test_guidance_errors_are_runtime_errors_with_the_reason(model):
    params = og.GeneratorParams(model)
    with pytest.raises(RuntimeError, match="^OgaGeneratorParamsSetGuidance: lark grammar:1:.*%import from \"python\""):
        params.set_guidance("lark_grammar", '%import python.NUMBER\nstart: NUMBER')
    with pytest.raises(RuntimeError, match=r"unknown guidance type 'xml' \(onnxruntime-genai's types: json_schema, regex, "
                                           r"lark_grammar\)"):
        params.set_guidance("xml", "<a/>")
    with pytest.raises(RuntimeError, match='unsupported keyword "not"'):
        params.set_guidance("json_schema", '{"type": "object", "not": {"required": ["a"]}}')
    with pytest.raises(RuntimeError, match=r"^OgaGeneratorParamsSetGuidance: lark grammar:2:16: token <\|im_end\|> is not in "
                                           r"the vocabulary$"):
        params.set_guidance("lark_grammar", 'start: "a" end\nend: "." | "!" <|im_end|>')


def test_lark_grammar_naming_the_eos_token_ends_with_it(model, tokenizer):
    # <|endoftext|> is the model's eos: the text is complete only after it, so the grammar's token
    # is what ends the generation (llguidance's <|...|> syntax, as onnxruntime-genai passes it on).
    grammar = "start: WORD (\" \" WORD){2,4} <|endoftext|>\nWORD: /[a-z]{1,8}/\n"
    generator, text = generate(model, tokenizer, "The animal:", ("lark_grammar", grammar), max_length=MAX_LENGTH)
    assert re.fullmatch(r"[a-z]{1,8}( [a-z]{1,8}){2,4}", text), text
    assert generator.get_sequence(0)[-1] == tokenizer.encode("<|endoftext|>")[-1]
