#!/usr/bin/env python3
"""Validates generated JSON texts with python3-jsonschema, the independent validator of the
constraint engine's outputs. Input: JSON lines {"schema", "draft", "text"}. Prints one line per
failure and a summary; exits 1 if any text fails to parse or validate."""
import json
import sys

import jsonschema

VALIDATORS = {"2020-12": jsonschema.Draft202012Validator, "7": jsonschema.Draft7Validator}


def main(path):
    failures = 0
    count = 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            count += 1
            validator = VALIDATORS[entry["draft"]](entry["schema"], format_checker=jsonschema.FormatChecker())
            try:
                instance = json.loads(entry["text"])
            except ValueError as error:
                failures += 1
                print(f"not JSON ({error}): {entry['text']!r} under {json.dumps(entry['schema'])}")
                continue
            errors = list(validator.iter_errors(instance))
            if errors:
                failures += 1
                print(f"invalid ({errors[0].message}): {entry['text']!r} under {json.dumps(entry['schema'])}")
    print(f"validated {count} texts, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
