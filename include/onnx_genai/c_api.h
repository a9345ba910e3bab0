/* onnx-genai's C API, shaped like onnxruntime-genai's (ort_genai_c.h): the same function names,
 * argument orders and opaque handles, so that a C program written for onnxruntime-genai builds
 * against this header and libonnx_genai.so by changing its #include.
 *
 *   OgaModel* model = NULL;
 *   OgaResult* r = OgaCreateModel("models/debian-prose-11m", &model);
 *   if (r) { fprintf(stderr, "%s\n", OgaResultGetError(r)); OgaDestroyResult(r); }
 *
 * Errors: every fallible call returns an OgaResult*, NULL on success; a non-NULL result carries
 * the one-line message (OgaResultGetError) and is freed with OgaDestroyResult. Nothing else
 * leaves the library: no C++ exception crosses this header. A NULL handle or output pointer is
 * an error result, never a crash.
 *
 * Lifetimes: each Create has its Destroy; a tokenizer, generator params or generator must not
 * outlive the model they were made from. Strings returned through `const char** out` are freed
 * with OgaDestroyString unless the comment says they belong to the object. Not thread-safe: one
 * thread at a time per generator (different generators of one model may run in parallel); the
 * engine section says which engine calls may come from other threads.
 *
 * Also here: beam search (num_beams), guidance (OgaGeneratorParamsSetGuidance: JSON Schema and
 * regex) and the engine for batched use (OgaEngine, OgaRequest). What onnxruntime-genai has and
 * this library does not (execution providers other than CPU and CUDA, Lark grammars, multimodal
 * processors, adapters, OgaRequestContinue) either has no function here or fails with an error
 * saying so; docs/coming-from-onnxruntime-genai.md lists the differences.
 */
#ifndef ONNX_GENAI_C_API_H_
#define ONNX_GENAI_C_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OGA_EXPORT __attribute__((visibility("default")))
#define OGA_API_CALL

/* Values as in onnxruntime-genai (and ONNX's TensorProto.DataType order); only float32, int32
 * and int64 tensors are accepted by the calls that take tensors. */
typedef enum OgaElementType {
  OgaElementType_undefined,
  OgaElementType_float32,
  OgaElementType_uint8,
  OgaElementType_int8,
  OgaElementType_uint16,
  OgaElementType_int16,
  OgaElementType_int32,
  OgaElementType_int64,
  OgaElementType_string,
  OgaElementType_bool,
  OgaElementType_float16,
  OgaElementType_float64,
  OgaElementType_uint32,
  OgaElementType_uint64,
  OgaElementType_complex64,
  OgaElementType_complex128,
  OgaElementType_bfloat16,
} OgaElementType;

typedef struct OgaResult OgaResult;
typedef struct OgaConfig OgaConfig;
typedef struct OgaModel OgaModel;
typedef struct OgaSequences OgaSequences;
typedef struct OgaTokenizer OgaTokenizer;
typedef struct OgaTokenizerStream OgaTokenizerStream;
typedef struct OgaTensor OgaTensor;
typedef struct OgaStringArray OgaStringArray;
typedef struct OgaGeneratorParams OgaGeneratorParams;
typedef struct OgaGenerator OgaGenerator;
typedef struct OgaEngine OgaEngine;
typedef struct OgaRequest OgaRequest;

/* ---- results, strings ---------------------------------------------------------------------- */

/* The message; owned by the result. */
OGA_EXPORT const char* OGA_API_CALL OgaResultGetError(const OgaResult* result);
OGA_EXPORT void OGA_API_CALL OgaDestroyResult(OgaResult* result);
OGA_EXPORT void OGA_API_CALL OgaDestroyString(const char* string);
/* Nothing to release (no global runtime is kept); present so that programs calling it link. */
OGA_EXPORT void OGA_API_CALL OgaShutdown(void);

/* ---- token sequences ----------------------------------------------------------------------- */

OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateSequences(OgaSequences** out);
OGA_EXPORT void OGA_API_CALL OgaDestroySequences(OgaSequences* sequences);
OGA_EXPORT size_t OGA_API_CALL OgaSequencesCount(const OgaSequences* sequences);
/* Adds a sequence holding token_ptr[0, token_cnt). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaAppendTokenSequence(const int32_t* token_ptr, size_t token_cnt,
                                                          OgaSequences* sequences);
/* Appends to sequence `sequence_index`; an index equal to the count starts a new sequence. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaAppendTokenToSequence(int32_t token, OgaSequences* sequences,
                                                            size_t sequence_index);
/* 0 / NULL for an index out of range. The data belongs to `sequences`. */
OGA_EXPORT size_t OGA_API_CALL OgaSequencesGetSequenceCount(const OgaSequences* sequences, size_t sequence_index);
OGA_EXPORT const int32_t* OGA_API_CALL OgaSequencesGetSequenceData(const OgaSequences* sequences,
                                                                  size_t sequence_index);

/* ---- config and model ---------------------------------------------------------------------- */

/* A model package folder (genai_config.json, or a Hugging Face config.json + model.onnx). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateConfig(const char* config_path, OgaConfig** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyConfig(OgaConfig* config);
/* Providers: "cpu" (the default when none is given) and "cuda" (this build's CUDA kernels, Hopper
 * GPUs), also as "CPUExecutionProvider" / "CUDAExecutionProvider". Any other provider is an
 * error here, not at model creation. The first provider in the list decides the device. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaConfigClearProviders(OgaConfig* config);
OGA_EXPORT OgaResult* OGA_API_CALL OgaConfigAppendProvider(OgaConfig* config, const char* provider);
/* cuda options: device_id (GPU index), enable_cuda_graph ("0"/"1"). Other keys are errors.
 * Appends the provider when the list lacks it. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaConfigSetProviderOption(OgaConfig* config, const char* provider,
                                                              const char* key, const char* value);
/* Merges a JSON object into the configuration (RFC 7386 merge patch, as onnxruntime-genai does).
 * Applied: search.* (the generator params' defaults), model.decoder.session_options
 * .intra_op_num_threads and .provider_options. A value that differs from the package's anywhere
 * else fails here, naming the key, since this runtime would not apply it. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaConfigOverlay(OgaConfig* config, const char* json);

OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateModel(const char* config_path, OgaModel** out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateModelFromConfig(const OgaConfig* config, OgaModel** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyModel(OgaModel* model);
/* "decoder" (the only model type: behaviour comes from the graph, not from a type name) and
 * "CPU" / "CUDA". Free with OgaDestroyString. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaModelGetType(const OgaModel* model, const char** out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaModelGetDeviceType(const OgaModel* model, const char** out);

/* ---- tokenizer ----------------------------------------------------------------------------- */

OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateTokenizer(const OgaModel* model, OgaTokenizer** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyTokenizer(OgaTokenizer* tokenizer);
/* Encodes `str` (UTF-8, with the tokenizer's special tokens such as BOS) and adds it to
 * `sequences` as one more sequence. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerEncode(const OgaTokenizer* tokenizer, const char* str,
                                                      OgaSequences* sequences);
/* An int32 tensor [count, longest], shorter rows padded on the right with the pad token. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerEncodeBatch(const OgaTokenizer* tokenizer, const char** strings,
                                                           size_t count, OgaTensor** out);
/* Decodes each row of an int32 or int64 tensor [rows, length] (special tokens skipped). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerDecodeBatch(const OgaTokenizer* tokenizer, const OgaTensor* tensor,
                                                           OgaStringArray** out);
/* The id of the vocabulary entry spelled exactly `str`. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerToTokenId(const OgaTokenizer* tokenizer, const char* str,
                                                         int32_t* token_id);
/* Special tokens skipped. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerDecode(const OgaTokenizer* tokenizer, const int32_t* tokens,
                                                      size_t token_count, const char** out_string);
/* Renders the package's chat template (or `template_str` when not NULL) over `messages`, a JSON
 * array of {"role", "content"} objects; `tools` is a JSON array or NULL. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerApplyChatTemplate(const OgaTokenizer* tokenizer,
                                                                 const char* template_str, const char* messages,
                                                                 const char* tools, bool add_generation_prompt,
                                                                 const char** out_string);
/* The model's bos token (-1 when it has none), eos tokens (owned by the tokenizer) and pad token. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerGetBosTokenId(const OgaTokenizer* tokenizer, int32_t* token_id);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerGetEosTokenIds(const OgaTokenizer* tokenizer,
                                                              const int32_t** eos_token_ids, size_t* token_count);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerGetPadTokenId(const OgaTokenizer* tokenizer, int32_t* token_id);

/* Decodes one token at a time: each call gives the text that became final with that token
 * (never half a UTF-8 character); `out` belongs to the stream until its next call. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateTokenizerStream(const OgaTokenizer* tokenizer, OgaTokenizerStream** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyTokenizerStream(OgaTokenizerStream* stream);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTokenizerStreamDecode(OgaTokenizerStream* stream, int32_t token,
                                                            const char** out);

/* ---- tensors and string arrays ------------------------------------------------------------- */

/* With `data`, the tensor borrows it (it must outlive the tensor); with NULL it owns zeroed
 * memory of the shape's size. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateTensorFromBuffer(void* data, const int64_t* shape_dims,
                                                             size_t shape_dims_count, OgaElementType element_type,
                                                             OgaTensor** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyTensor(OgaTensor* tensor);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTensorGetType(OgaTensor* tensor, OgaElementType* out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTensorGetShapeRank(OgaTensor* tensor, size_t* out);
/* shape_dims_count must equal the rank. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaTensorGetShape(OgaTensor* tensor, int64_t* shape_dims, size_t shape_dims_count);
OGA_EXPORT OgaResult* OGA_API_CALL OgaTensorGetData(OgaTensor* tensor, void** out);

OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateStringArray(OgaStringArray** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyStringArray(OgaStringArray* string_array);
OGA_EXPORT OgaResult* OGA_API_CALL OgaStringArrayAddString(OgaStringArray* string_array, const char* str);
OGA_EXPORT OgaResult* OGA_API_CALL OgaStringArrayGetCount(const OgaStringArray* string_array, size_t* out);
/* `out` belongs to the array. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaStringArrayGetString(const OgaStringArray* string_array, size_t index,
                                                           const char** out);

/* ---- generator params ---------------------------------------------------------------------- */

/* Starts from the package's search defaults (genai_config.json "search" or
 * generation_config.json) and any config overlay's. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateGeneratorParams(const OgaModel* model, OgaGeneratorParams** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyGeneratorParams(OgaGeneratorParams* params);
/* Number keys: max_length, min_length, top_k, top_p, temperature, repetition_penalty,
 * no_repeat_ngram_size, num_beams, num_return_sequences, length_penalty, random_seed (-1: a
 * random seed), batch_size, diversity_penalty. Bool keys: do_sample, early_stopping,
 * past_present_share_buffer. An unknown key, or a value out of range, is an error naming it.
 * num_beams > 1 runs beam search with Hugging Face transformers' semantics (length_penalty,
 * early_stopping true: stop at num_beams finished hypotheses, false: transformers' heuristic;
 * num_return_sequences <= num_beams); with do_sample, a diversity_penalty other than 0 (group
 * beam search) or num_return_sequences above num_beams, creating the generator fails. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGeneratorParamsSetSearchNumber(OgaGeneratorParams* params, const char* name,
                                                                     double value);
OGA_EXPORT OgaResult* OGA_API_CALL OgaGeneratorParamsSetSearchBool(OgaGeneratorParams* params, const char* name,
                                                                   bool value);
OGA_EXPORT OgaResult* OGA_API_CALL OgaGeneratorParamsGetSearchNumber(const OgaGeneratorParams* params,
                                                                     const char* name, double* out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaGeneratorParamsGetSearchBool(const OgaGeneratorParams* params, const char* name,
                                                                   bool* out);
/* Guidance (structured output), as onnxruntime-genai names it: `type` "json_schema" (`data` a JSON
 * Schema, the subset docs/constraints.md lists) or "regex" (`data` an ECMAScript regular
 * expression the whole output must match) or "lark_grammar" (llguidance's Lark dialect, as
 * docs/constraints.md lists); any other type fails naming the accepted ones; type and data both "" remove the guidance. The schema or
 * expression is compiled against the model's vocabulary here, so a bad one fails at this call
 * with the compiler's message. Every sequence's text then stays a prefix of the language, and
 * eos comes only on a whole match. enable_ff_tokens (onnxruntime-genai's fast-forwarding of
 * forced tokens) is accepted and changes nothing: forced tokens are still picked one step at a
 * time, because onnxruntime-genai's loop reads one token per OgaGenerator_GenerateNextToken
 * (OgaGenerator_GetNextTokens) and a step that kept several would lose text there. The C++ API's
 * SpeculativeParams::fast_forward drafts them. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGeneratorParamsSetGuidance(OgaGeneratorParams* params, const char* type,
                                                                 const char* data, bool enable_ff_tokens);

/* ---- generator ----------------------------------------------------------------------------- */

/* The params are copied; the model must outlive the generator. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateGenerator(const OgaModel* model, const OgaGeneratorParams* params,
                                                      OgaGenerator** out);
OGA_EXPORT void OGA_API_CALL OgaDestroyGenerator(OgaGenerator* generator);
/* True when every sequence has finished (eos or max_length); false before any tokens. */
OGA_EXPORT bool OGA_API_CALL OgaGenerator_IsDone(const OgaGenerator* generator);
/* batch_size * n tokens, row after row. The first call gives the prompts: trailing pad tokens of
 * a row are padding (as OgaTokenizerEncodeBatch pads). Later calls (a further turn) append to
 * every sequence; in a batch, every row must then get the same tokens. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_AppendTokens(OgaGenerator* generator, const int32_t* input_ids,
                                                             size_t input_ids_count);
/* One sequence per batch row, of any lengths (a first call only, for batches). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_AppendTokenSequences(OgaGenerator* generator,
                                                                     const OgaSequences* sequences);
/* Runs the model on what it has not seen and picks one token per unfinished sequence. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_GenerateNextToken(OgaGenerator* generator);
/* The tokens the last GenerateNextToken picked, one per sequence (a finished sequence's is the
 * pad token); `out` belongs to the generator until its next call. With beam search (num_beams > 1)
 * there are batch_size * num_return_sequences sequences: sequence p * num_return_sequences + k is
 * prompt p's k-th best beam, running until the prompt's search ends, then its k-th best finished
 * hypothesis (its tokens may then differ from the earlier steps' beam). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_GetNextTokens(const OgaGenerator* generator, const int32_t** out,
                                                              size_t* out_count);
/* Keeps the first `new_length` tokens (of the longest sequence; the others drop as many). Not
 * available with beam search, nor are appends after the first. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_RewindTo(OgaGenerator* generator, size_t new_length);
/* float32 [batch_size, 1, vocab_size]: the raw model logits the next GenerateNextToken picks
 * from (a finished sequence's row is zeros). The tensor is a copy the caller destroys. Not
 * available with beam search, nor is SetLogits. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_GetLogits(OgaGenerator* generator, OgaTensor** out);
/* Replaces those logits (float32, batch_size * vocab_size values) for the next pick; penalties
 * and sampling still apply to them. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaGenerator_SetLogits(OgaGenerator* generator, OgaTensor* tensor);
/* Tokens of sequence `index` (prompt and generated; 0 / NULL out of range); with beam search,
 * index < batch_size * num_return_sequences, as for GetNextTokens. The data belongs to the
 * generator until its next call. */
OGA_EXPORT size_t OGA_API_CALL OgaGenerator_GetSequenceCount(const OgaGenerator* generator, size_t index);
OGA_EXPORT const int32_t* OGA_API_CALL OgaGenerator_GetSequenceData(const OgaGenerator* generator, size_t index);
/* Tokens in the longest sequence. */
OGA_EXPORT size_t OGA_API_CALL OgaGenerator_TokenCount(const OgaGenerator* generator);

/* ---- engine (many requests, batched) ----------------------------------------------------- */

/* onnxruntime-genai's engine: requests, each with its own generator params and one prompt, are
 * added at any time; every step runs the model once over all running requests (continuous
 * batching over a paged KV cache, with prefix caching), and a request's greedy or seeded tokens
 * are those its own generator would give.
 *
 *   OgaRequest* request;  OgaCreateRequest(params, &request);  OgaRequestAddTokens(request, prompt);
 *   OgaEngineAddRequest(engine, request);
 *   OgaRequest* ready;
 *   while (!OgaEngineStep(engine, &ready) && ready) {
 *     bool more;  int32_t token;
 *     while (!OgaRequestHasUnseenTokens(ready, &more) && more) OgaRequestGetUnseenToken(ready, &token);
 *     OgaDestroyRequest(ready);
 *   }
 *
 * Request handles are counted: OgaCreateRequest gives one, each request OgaEngineStep returns is
 * one more, and each is released with OgaDestroyRequest. A request stays in its engine until
 * OgaEngineRemoveRequest; if its last handle is released before that, the engine aborts and frees
 * it. OgaEngineAddRequest, OgaEngineRemoveRequest and OgaDestroyRequest may be called from other
 * threads while one thread steps; a request's tokens are read on the stepping thread.
 *
 * Not here: onnxruntime-genai's main branch's OgaRequestContinue (another turn on a finished
 * request); its OgaRequestIsTurnComplete is here, meaning OgaRequestIsDone. */

/* The engine loads its own copy of the model's package with the model's providers (the paged KV
 * cache rewrites attention at load); `model` must outlive it. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateEngine(OgaModel* model, OgaEngine** out);
/* Stops what still runs; requests with handles left outlive it, detached. */
OGA_EXPORT void OGA_API_CALL OgaDestroyEngine(OgaEngine* engine);
/* `*request`: a request that got tokens (or finished) since it was last returned, with one more
 * handle; NULL when no request is queued or running. Runs the model only when no request from
 * the last run is still waiting to be returned. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaEngineStep(OgaEngine* engine, OgaRequest** request);
/* Whether a step has anything to do or to return. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaEngineHasPendingRequests(OgaEngine* engine, bool* out);
/* Fails on a request without tokens, one already added (a request runs once), one whose params
 * belong to another model, params with batch_size, num_beams or num_return_sequences other than 1,
 * and on what adding to the engine refuses (a prompt the context or the KV cache cannot hold,
 * tokens outside the vocabulary). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaEngineAddRequest(OgaEngine* engine, OgaRequest* request);
/* Stops the request if it still runs; it keeps its tokens. Removing a request that is in no
 * engine does nothing. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaEngineRemoveRequest(OgaEngine* engine, OgaRequest* request);

/* The params (search options, seed, guidance) are copied. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaCreateRequest(OgaGeneratorParams* params, OgaRequest** out);
/* Appends `tokens` (exactly one sequence) to the prompt; only before the request is added. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestAddTokens(OgaRequest* request, const OgaSequences* tokens);
OGA_EXPORT void OGA_API_CALL OgaDestroyRequest(OgaRequest* request);
/* A pointer the library keeps for the caller and never reads. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestSetOpaqueData(OgaRequest* request, void* opaque_data);
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestGetOpaqueData(OgaRequest* request, void** opaque_data);
/* Generated tokens not yet read (eos included when it ended the request), oldest first;
 * GetUnseenToken fails when there is none. */
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestHasUnseenTokens(const OgaRequest* request, bool* out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestGetUnseenToken(OgaRequest* request, int32_t* out);
/* Finished: eos or max_length (a removed request that had not finished is not done). */
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestIsDone(const OgaRequest* request, bool* out);
OGA_EXPORT OgaResult* OGA_API_CALL OgaRequestIsTurnComplete(const OgaRequest* request, bool* out);

#ifdef __cplusplus
}
#endif

#endif /* ONNX_GENAI_C_API_H_ */
