// JSON Schema (draft 2020-12 and draft-07) compiled to a grammar whose sentences are JSON texts
// valid under the schema. What is supported, and why each refusal exists: docs/constraints.md.
// A keyword the compiler cannot enforce exactly fails with its name and JSON pointer, e.g.
//   json schema: unsupported keyword "patternProperties" at /properties/a
#pragma once

#include <string_view>

#include "constraints/grammar.h"

namespace onnx_genai::constraints {

enum class SchemaDraft { k2020_12, kDraft7 };

struct JsonSchemaOptions {
  // The draft when the schema's "$schema" names none it knows (draft-07 and 2020-12 differ in
  // "items" and in whether "$ref" ignores its siblings).
  SchemaDraft default_draft = SchemaDraft::k2020_12;
  bool compact = false;  // ConstraintSpec::compact_json
};

Result<Grammar> compile_json_schema(std::string_view schema_text, const JsonSchemaOptions& options = {});

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
Result<Grammar> any_json_object_grammar(bool compact = false);

}  // namespace onnx_genai::constraints
