// The generation API in a few lines: load a model package, encode a prompt, stream the reply.
//
//   <build>/examples/generate MODEL_DIR "Once upon a time" [MAX_NEW_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "onnx_genai/genai.h"

namespace genai = onnx_genai::genai;

namespace {

int fail(const onnx_genai::Status& status) {
  std::fprintf(stderr, "\ngenerate: %s\n", status.message().c_str());
  return 1;
}

void print(size_t /*sequence*/, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR PROMPT [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  auto model = genai::Model::load(argv[1]);
  if (!model.is_ok()) return fail(model.status());
  auto prompt = (*model)->encode(argv[2]);
  if (!prompt.is_ok()) return fail(prompt.status());

  genai::GeneratorParams params = (*model)->default_params();  // sampling defaults from the package
  params.max_new_tokens = argc > 3 ? std::atoi(argv[3]) : 64;
  params.prompts = {*prompt};
  auto generator = genai::Generator::create(**model, params);
  if (!generator.is_ok()) return fail(generator.status());
  if (auto status = (*generator)->generate(print); !status.is_ok()) return fail(status);
  std::printf("\n[finished: %s]\n", std::string(genai::finish_reason_name((*generator)->finish_reason(0))).c_str());
  return 0;
}
