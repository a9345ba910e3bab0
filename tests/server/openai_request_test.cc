// The OpenAI request parser (server/openai_request.h) on the default model: what each field
// becomes, the 400 each malformed field gets (naming it), the context-length error's numbers,
// and seeded mutations of valid bodies (under the sanitizers: no crash, an error or a job).
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "fuzz_mutations.h"
#include "oracle_io.h"

namespace onnx_genai::server {
namespace {

using nlohmann::json;

const genai::Model& model() {
  static const std::unique_ptr<genai::Model> loaded = [] {
    auto m = genai::Model::load((std::filesystem::path(testing::source_dir()) / "models" / "debian-prose-11m").string());
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return std::move(m).value();
  }();
  return *loaded;
}

json chat_body(json extra = json::object()) {
  json body{{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}};
  body.update(extra);
  return body;
}

const GenerationJob& job_of(const JobResult& r) {
  if (const ApiError* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<GenerationJob>(r);
}

ApiError error_of(const JobResult& r) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(r));
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(OpenAiRequest, ChatFieldsBecomeEngineParameters) {
  const JobResult r = parse_chat_request(
      chat_body({{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 7}, {"min_p", 0.1}, {"seed", 42}, {"max_tokens", 9},
                 {"stop", "END"}, {"presence_penalty", 0.5}, {"frequency_penalty", -0.5}, {"logit_bias", {{"17", -100}}},
                 {"logprobs", true}, {"top_logprobs", 4}, {"n", 3}, {"stream", true},
                 {"stream_options", {{"include_usage", true}}}, {"repetition_penalty", 1.1}, {"ignore_eos", true}}),
      model());
  const GenerationJob& job = job_of(r);
  const genai::RequestParams& p = job.params;
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_EQ(p.sampling.seed, 42u);
  EXPECT_EQ(job.choice_params(2).sampling.seed, 44u);
  EXPECT_EQ(p.max_new_tokens, 9);
  EXPECT_EQ(p.stop_strings, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(p.sampling.logit_bias.at(17), -100.0f);
  EXPECT_TRUE(p.sampling.logprobs);
  EXPECT_EQ(p.sampling.top_logprobs, 4);
  EXPECT_EQ(job.logprobs, 4);
  EXPECT_EQ(job.n, 3);
  EXPECT_EQ(job.choices(), 3u);
  EXPECT_TRUE(job.stream && job.include_usage && p.ignore_eos);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(p.sampling.no_repeat_ngram_size, 0) << "the package's n-gram ban is not an API default";
  // The prompt is the chat template's rendering, encoded.
  ChatRequest chat;
  chat.messages_json = R"([{"role":"user","content":"Hello"}])";
  chat.add_generation_prompt = true;
  EXPECT_EQ(job.prompts.at(0), model().encode_chat(chat).value());
}

TEST(OpenAiRequest, ContentPartsAndDeveloperRoleReachTheTemplateAsStrings) {
  const json parts = chat_body({{"messages", json::array({{{"role", "developer"}, {"content", "Be brief."}},
                                                          {{"role", "user"},
                                                           {"content", json::array({{{"type", "text"}, {"text", "Hel"}},
                                                                                    {{"type", "text"}, {"text", "lo"}}})}}})}});
  const json plain = chat_body({{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                          {{"role", "user"}, {"content", "Hello"}}})}});
  EXPECT_EQ(job_of(parse_chat_request(parts, model())).prompts, job_of(parse_chat_request(plain, model())).prompts);
}

TEST(OpenAiRequest, ResponseFormatsBecomeConstraints) {
  const GenerationJob object = job_of(parse_chat_request(chat_body({{"response_format", {{"type", "json_object"}}}}), model()));
  ASSERT_TRUE(object.params.constraint);
  EXPECT_EQ(object.params.constraint->kind, ConstraintKind::kJsonObject);
  const json schema{{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  const GenerationJob typed = job_of(parse_chat_request(
      chat_body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}}), model()));
  ASSERT_TRUE(typed.params.constraint);
  EXPECT_EQ(typed.params.constraint->kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(json::parse(typed.params.constraint->text), schema);
  EXPECT_FALSE(job_of(parse_chat_request(chat_body({{"response_format", {{"type", "text"}}}}), model())).params.constraint);
}

TEST(OpenAiRequest, MalformedFieldsAre400sNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"temperature", "hot"}}, "temperature"},       {{{"temperature", 2.5}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},                       {{{"n", 0}}, "n"},
      {{{"n", 1000}}, "n"},                            {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", 1.5}}, "max_tokens"},           {{{"seed", "x"}}, "seed"},
      {{{"stop", 3}}, "stop"},                         {{{"stop", json::array({"a", ""})}}, "stop"},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},  {{{"logit_bias", {{"5", 101}}}}, "logit_bias"},
      {{{"logit_bias", {{"99999999", 1}}}}, "logit_bias"}, {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format"},
      {{{"tools", json::array({{{"type", "function"}}})}}, "tools"},
      {{{"messages", "hi"}}, "messages"},              {{{"messages", json::array()}}, "messages"},
      {{{"messages", json::array({{{"role", "king"}, {"content", "x"}}})}}, "role"},
      {{{"messages", json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}}, "image_url"},
      {{{"messages", json::array({{{"role", "user"}}})}}, "content"},
      {{{"stream", "yes"}}, "stream"},                 {{{"presence_penalty", -3}}, "presence_penalty"},
  };
  for (const auto& [fields, word] : cases) {
    const ApiError e = error_of(parse_chat_request(chat_body(fields), model()));
    EXPECT_EQ(e.status, 400) << fields.dump();
    EXPECT_NE(e.message.find(word), std::string::npos) << fields.dump() << " -> " << e.message;
  }
  EXPECT_EQ(error_of(parse_chat_request(json::array(), model())).status, 400);
  EXPECT_EQ(error_of(parse_completion_request(json{{"prompt", 5}}, model())).status, 400);
  EXPECT_EQ(error_of(parse_completion_request(json{{"prompt", json::array({-1})}}, model())).status, 400);
  EXPECT_EQ(error_of(parse_completion_request(json{{"prompt", "x"}, {"suffix", "y"}}, model())).status, 400);
  EXPECT_EQ(error_of(parse_completion_request(json{{"prompt", "x"}, {"echo", true}, {"logprobs", 1}}, model())).status, 400);
}

TEST(OpenAiRequest, PromptsOverTheContextNameBothNumbers) {
  const int64_t context = model().info().context_length;
  std::string text;
  for (int i = 0; i < 600; ++i) text += " word";
  const ApiError e = error_of(parse_completion_request(json{{"prompt", text}, {"max_tokens", 5}}, model()));
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_NE(e.message.find("maximum context length is " + std::to_string(context)), std::string::npos) << e.message;
  const size_t tokens = model().encode(text).value().size();
  EXPECT_NE(e.message.find(std::to_string(tokens) + " in the prompt"), std::string::npos) << e.message;
  // A prompt that fits, but not with max_tokens on top.
  const GenerationJob fits = job_of(parse_completion_request(json{{"prompt", "word"}}, model()));
  const auto room = context - static_cast<int64_t>(fits.prompts[0].size());
  EXPECT_TRUE(std::holds_alternative<GenerationJob>(parse_completion_request(json{{"prompt", "word"}, {"max_tokens", room}}, model())));
  EXPECT_EQ(error_of(parse_completion_request(json{{"prompt", "word"}, {"max_tokens", room + 1}}, model())).code,
            "context_length_exceeded");
}

TEST(OpenAiRequest, CompletionPromptsInEveryForm) {
  const std::vector<int32_t> ids = model().encode("The sea").value();
  const GenerationJob text = job_of(parse_completion_request(json{{"prompt", "The sea"}}, model()));
  EXPECT_EQ(text.prompts, std::vector<std::vector<int32_t>>{ids});
  EXPECT_EQ(text.prompt_texts, std::vector<std::string>{"The sea"});
  EXPECT_EQ(job_of(parse_completion_request(json{{"prompt", ids}}, model())).prompts[0], ids);
  const GenerationJob batch = job_of(parse_completion_request(json{{"prompt", json::array({"The sea", ids})}, {"n", 2}}, model()));
  EXPECT_EQ(batch.prompts.size(), 2u);
  EXPECT_EQ(batch.choices(), 4u);
  EXPECT_EQ(batch.prompts[1], ids);
}

TEST(OpenAiRequest, MutatedBodiesGiveAJobOrAnError) {
  const json valid = chat_body({{"temperature", 0.7}, {"stop", json::array({"a", "b"})}, {"logit_bias", {{"3", 2}}},
                                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "object"}}}}}}},
                                {"max_tokens", 5}, {"n", 2}});
  testing::FuzzRng rng(20261206);
  int parsed = 0, refused = 0;
  for (int i = 0; i < 400; ++i) {
    const json body = json::parse(testing::mutate_json(rng, valid), nullptr, false);
    if (body.is_discarded()) continue;
    const JobResult r = i % 2 ? parse_chat_request(body, model()) : parse_completion_request(body, model());
    if (const ApiError* e = std::get_if<ApiError>(&r)) {
      EXPECT_EQ(e->status, 400);
      EXPECT_FALSE(e->message.empty());
      ++refused;
    } else {
      ++parsed;
    }
  }
  EXPECT_GT(parsed + refused, 300);
}

}  // namespace
}  // namespace onnx_genai::server
