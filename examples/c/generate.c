/* The C API in one program: load a model package, encode a prompt, stream the generated text.
 * Written as for onnxruntime-genai's ort_genai_c.h; only the #include differs.
 *
 *   cc -std=c11 generate.c -I<prefix>/include -L<prefix>/lib -lonnx_genai -o generate
 *   ./generate MODEL_DIR "Once upon a time" [MAX_LENGTH [REGEX]]
 *
 * With REGEX, the generated text is guided to match it (onnxruntime-genai's guidance).
 */
#include <stdio.h>
#include <stdlib.h>

#include "onnx_genai/c_api.h"

/* Prints the error of a failed call and leaves main with status 1. */
#define CHECK(call)                                          \
  do {                                                       \
    OgaResult* result_ = (call);                             \
    if (result_ != NULL) {                                   \
      fprintf(stderr, "error: %s\n", OgaResultGetError(result_)); \
      OgaDestroyResult(result_);                             \
      status = 1;                                            \
      goto done;                                             \
    }                                                        \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR PROMPT [MAX_LENGTH [REGEX]]\n", argv[0]);
    return 2;
  }
  const double max_length = argc > 3 ? atof(argv[3]) : 64;
  int status = 0;
  OgaConfig* config = NULL;
  OgaModel* model = NULL;
  OgaTokenizer* tokenizer = NULL;
  OgaTokenizerStream* stream = NULL;
  OgaSequences* prompt = NULL;
  OgaGeneratorParams* params = NULL;
  OgaGenerator* generator = NULL;

  CHECK(OgaCreateConfig(argv[1], &config));
  CHECK(OgaConfigClearProviders(config)); /* the CPU */
  CHECK(OgaCreateModelFromConfig(config, &model));
  CHECK(OgaCreateTokenizer(model, &tokenizer));
  CHECK(OgaCreateTokenizerStream(tokenizer, &stream));
  CHECK(OgaCreateSequences(&prompt));
  CHECK(OgaTokenizerEncode(tokenizer, argv[2], prompt));

  CHECK(OgaCreateGeneratorParams(model, &params));
  CHECK(OgaGeneratorParamsSetSearchNumber(params, "max_length", max_length));
  CHECK(OgaGeneratorParamsSetSearchBool(params, "do_sample", false));
  if (argc > 4) CHECK(OgaGeneratorParamsSetGuidance(params, "regex", argv[4], false));
  CHECK(OgaCreateGenerator(model, params, &generator));
  CHECK(OgaGenerator_AppendTokenSequences(generator, prompt));

  printf("%s", argv[2]);
  while (!OgaGenerator_IsDone(generator)) {
    CHECK(OgaGenerator_GenerateNextToken(generator));
    const int32_t* next = NULL;
    size_t count = 0;
    CHECK(OgaGenerator_GetNextTokens(generator, &next, &count));
    const char* piece = NULL;
    CHECK(OgaTokenizerStreamDecode(stream, next[0], &piece));
    printf("%s", piece);
    fflush(stdout);
  }
  printf("\n[%zu tokens]\n", OgaGenerator_GetSequenceCount(generator, 0));

done:
  OgaDestroyGenerator(generator);
  OgaDestroyGeneratorParams(params);
  OgaDestroySequences(prompt);
  OgaDestroyTokenizerStream(stream);
  OgaDestroyTokenizer(tokenizer);
  OgaDestroyModel(model);
  OgaDestroyConfig(config);
  return status;
}
