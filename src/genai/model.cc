// genai::Model: a package loaded into a Session, its decoder I/O derived, its tokenizer loaded.
#include <algorithm>
#include <climits>
#include <filesystem>

#include "genai/model_parts.h"
#include "onnx/model.h"
#include "runtime/execution_device.h"
#include "runtime/generation_passes.h"

namespace onnx_genai::genai {

namespace {

template <typename T>
Result<T> in_context(Result<T> result, const std::string& where) {
  if (result.is_ok()) return result;
  return result.status().with_context(where);
}

GraphFacts read_graph_facts(const Graph& graph, const Package& package) {
  GraphFacts facts;
  facts.inputs_read_by_gqa = inputs_read_as_gqa_past(graph);
  const std::string& mask = package.names.attention_mask;
  facts.mask_only_sets_lengths = mask_only_sets_lengths(graph, mask.empty() ? "attention_mask" : mask);
  return facts;
}

// The configs' token ids against the graph's vocabulary (the configs' own vocab_size was checked
// as they were read, and the graph may say otherwise): generation would feed or wait for a token
// the decoder cannot produce.
Status check_special_ids(const Package& package, int64_t vocab_size) {
  const auto check = [&](const char* key, int32_t id) -> Status {
    if (id < vocab_size) return Status::ok();
    return OG_ERROR((package.dir / package.config_name).string(), " (or generation_config.json): ", key, " ", id,
                    " is not below the decoder's vocabulary size ", vocab_size, " (the width of its logits)");
  };
  for (const int32_t id : package.eos_token_ids) OG_RETURN_IF_ERROR(check("eos_token_id", id));
  if (package.pad_token_id) OG_RETURN_IF_ERROR(check("pad_token_id", *package.pad_token_id));
  if (package.bos_token_id) OG_RETURN_IF_ERROR(check("bos_token_id", *package.bos_token_id));
  return Status::ok();
}

ModelInfo describe(const ModelParts& parts) {
  ModelInfo info;
  const Package& package = parts.package;
  info.model_file = package.model_file.string();
  info.config_name = package.config_name;
  info.context_length = package.context_length;
  info.vocab_size = parts.io.vocab_size;
  info.num_layers = parts.io.num_layers;
  info.kv_heads = parts.io.kv_heads;
  info.head_size = parts.io.head_size;
  info.kv_dtype = parts.io.kv_dtype;
  info.shared_kv_buffer = parts.io.shared_buffer;
  info.right_padding = parts.io.right_padding;
  info.warnings = parts.io.warnings;
  info.eos_token_ids = package.eos_token_ids;
  if (info.eos_token_ids.empty() && parts.tokenizer && parts.tokenizer->eos_token_id()) {
    info.eos_token_ids.push_back(*parts.tokenizer->eos_token_id());
  }
  // onnxruntime-genai's default: pad with eos when the config names no pad token.
  info.pad_token_id = package.pad_token_id.value_or(info.eos_token_ids.empty() ? 0 : info.eos_token_ids.front());
  return info;
}

}  // namespace

namespace {

std::string logits_name(const ModelParts& parts) {
  return parts.package.names.logits.empty() ? "logits" : parts.package.names.logits;
}

// The generator's load-time rewrites of the decoder graph, in this order: paged attention, logit
// rows, device outputs. Tensor-parallel ranks select rows before sharding and run the other two
// after (the paged rewrite sizes its pools from the rank's own kv_num_heads).
Status select_rows(Graph& graph, const ModelParts& parts, const ModelOptions& options) {
  if (!options.select_logit_rows) return Status::ok();
  return select_logit_rows(graph, logits_name(parts)).status().with_context(parts.package.model_file.string());
}

Status rewrite_paged(Graph& graph, ModelParts& parts, const ModelOptions& options) {
  if (options.kv_block_size <= 0) return Status::ok();
  OG_ASSIGN_OR_RETURN(parts.paged, rewrite_to_paged_attention(graph, options.kv_block_size));
  parts.kv_block_size = options.kv_block_size;
  return Status::ok();
}

// Only a device session gets the greedy and sampled tokens outputs: a CPU session would compute
// them for nothing. The paged decoder (the serving engine) samples each packed logit row.
Status add_device_outputs(Graph& graph, const ModelParts& parts, const Device& device) {
  if (device.type == DeviceType::kCpu) return Status::ok();
  const std::string file = parts.package.model_file.string();
  OG_RETURN_IF_ERROR(add_greedy_tokens_output(graph, logits_name(parts)).status().with_context(file));
  return add_sampled_tokens_output(graph, logits_name(parts), parts.paged.rewritten).status().with_context(file);
}

// The package as each of `ranks` tensor-parallel ranks sees it: its graph caches kv_heads / N
// heads, which is no contradiction of the config to warn about.
Package rank_package(const Package& package, int ranks) {
  Package view = package;
  if (view.num_kv_heads && *view.num_kv_heads % ranks == 0) *view.num_kv_heads /= ranks;
  return view;
}

// ModelOptions::tensor_parallel > 1: N sharded sessions; rank 0's becomes parts.session. The
// sharding pass refuses a graph it cannot split (KV heads not divisible by N, ...) naming why.
Status load_ranks(ModelParts& parts, const ModelOptions& options, const SessionOptions& session_options,
                  GraphFacts& facts) {
  const std::string file = parts.package.model_file.string();
  const int n = options.tensor_parallel;
  if (session_options.device.type != DeviceType::kCpu) {
    return OG_ERROR(file, ": tensor parallelism (", n,
                    " ranks) runs on the CPU only (no NCCL communicator in this build)");
  }
  bool first = true;
  const auto prepare = [&](Graph& graph) -> Status {
    if (first) facts = read_graph_facts(graph, parts.package);  // sharding renames no input
    first = false;
    return select_rows(graph, parts, options);
  };
  const auto after_shard = [&](Graph& graph) -> Status {
    OG_RETURN_IF_ERROR(rewrite_paged(graph, parts, options));
    return add_device_outputs(graph, parts, session_options.device);
  };
  Result<std::unique_ptr<TensorParallelSessions>> ranks =
      TensorParallelSessions::load(file, logits_name(parts), n, session_options, prepare, after_shard);
  if (!ranks.is_ok()) {
    return OG_ERROR("cannot split the model into ", n, " tensor-parallel ranks: ", ranks.status().message());
  }
  parts.ranks = std::move(*ranks);
  parts.session = &parts.ranks->rank(0);
  if (parts.paged.rewritten) facts.paged = &parts.paged;  // every rank's rewrite gave the same layers
  const Package view = rank_package(parts.package, n);
  for (int r = 1; r < n; ++r) {
    const Session& rank = parts.ranks->rank(r);
    OG_ASSIGN_OR_RETURN(DecoderIo io, in_context(derive_decoder_io(rank.inputs(), rank.outputs(), view, facts), file));
    parts.rank_io.push_back(std::move(io));
  }
  return Status::ok();
}

Status load_session(ModelParts& parts, const ModelOptions& options, const SessionOptions& session_options,
                    GraphFacts& facts) {
  if (options.tensor_parallel < 1 || options.tensor_parallel > 64) {
    return OG_ERROR("tensor_parallel must be in [1, 64], got ", options.tensor_parallel);
  }
  if (options.tensor_parallel > 1) return load_ranks(parts, options, session_options, facts);
  OG_ASSIGN_OR_RETURN(std::shared_ptr<::onnx_genai::Model> graph_model,
                      load_onnx_model(parts.package.model_file.string()));
  facts = read_graph_facts(*graph_model->graph, parts.package);
  OG_RETURN_IF_ERROR(rewrite_paged(*graph_model->graph, parts, options));
  OG_RETURN_IF_ERROR(select_rows(*graph_model->graph, parts, options));
  OG_RETURN_IF_ERROR(add_device_outputs(*graph_model->graph, parts, session_options.device));
  OG_ASSIGN_OR_RETURN(parts.single, Session::create(std::move(graph_model), session_options));
  parts.session = parts.single.get();
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelOptions& options) {
  auto impl = std::make_unique<Impl>();
  OG_ASSIGN_OR_RETURN(impl->package, load_package(path, options.onnx_file));
  const std::string file = impl->package.model_file.string();
  SessionOptions session_options;
  session_options.num_threads = options.num_threads;
  session_options.device =
      options.cpu_fallback ? device_or_cpu_fallback(options.device, impl->device_fallback) : options.device;
  session_options.capture_device_graphs = options.capture_device_graphs;
  session_options.max_cached_plans = options.max_cached_plans;
  GraphFacts facts;
  OG_RETURN_IF_ERROR(load_session(*impl, options, session_options, facts));
  if (impl->paged.rewritten) facts.paged = &impl->paged;
  const Package rank_view = rank_package(impl->package, options.tensor_parallel);
  OG_ASSIGN_OR_RETURN(impl->io, in_context(derive_decoder_io(impl->session->inputs(), impl->session->outputs(),
                                                             rank_view, facts),
                                           file));
  OG_RETURN_IF_ERROR(check_special_ids(impl->package, impl->io.vocab_size));
  if (impl->io.kv.empty()) {
    return OG_ERROR(file, ": the decoder has no past key/value inputs; generation needs a KV cache");
  }
  if (impl->package.has_tokenizer) {
    OG_ASSIGN_OR_RETURN(impl->tokenizer, Tokenizer::load(impl->package.dir.string()));
  }
  impl->info = describe(*impl);
  impl->info.tensor_parallel = options.tensor_parallel;
  impl->info.kv_heads *= options.tensor_parallel;  // every rank caches kv_heads / N
  impl->info.paged_kv = impl->io.paged;
  if (options.kv_block_size > 0 && !impl->io.paged) impl->info.paged_kv_unavailable = impl->paged.reason;
  impl->kv_options.preallocate = options.preallocate_kv;
  impl->kv_options.initial_capacity = options.initial_kv_capacity;
  impl->decode_mask_at_capacity =
      impl->io.shared_buffer && options.decode_mask_at_capacity.value_or(facts.mask_only_sets_lengths);
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

const ModelInfo& Model::info() const { return impl_->info; }
const Tokenizer* Model::tokenizer() const { return impl_->tokenizer.get(); }
SessionStats Model::session_stats() const { return impl_->session->stats(); }
Device Model::device() const { return impl_->session->device(); }
const std::string& Model::device_fallback() const { return impl_->device_fallback; }

GeneratorParams Model::default_params() const {
  const SearchDefaults& search = impl_->package.search;
  GeneratorParams params;
  SamplingParams& s = params.sampling;
  s.greedy = !search.do_sample.value_or(false);
  const auto set_float = [](float& slot, const std::optional<double>& value) {
    if (value) slot = static_cast<float>(*value);
  };
  set_float(s.temperature, search.temperature);
  set_float(s.top_p, search.top_p);
  set_float(s.min_p, search.min_p);
  set_float(s.typical_p, search.typical_p);
  set_float(s.repetition_penalty, search.repetition_penalty);
  if (search.top_k) s.top_k = static_cast<int32_t>(std::clamp<int64_t>(*search.top_k, 0, INT32_MAX));
  if (search.no_repeat_ngram_size) {
    s.no_repeat_ngram_size = static_cast<int32_t>(std::clamp<int64_t>(*search.no_repeat_ngram_size, 0, INT32_MAX));
  }
  params.max_new_tokens = search.max_new_tokens.value_or(0);
  params.min_new_tokens = search.min_new_tokens.value_or(0);
  params.max_length = search.max_length.value_or(0);
  const auto to_int32 = [](int64_t value) { return static_cast<int32_t>(std::clamp<int64_t>(value, 1, INT32_MAX)); };
  if (search.num_beams) params.beam.num_beams = to_int32(*search.num_beams);
  if (search.num_return_sequences) params.beam.num_return_sequences = to_int32(*search.num_return_sequences);
  if (search.length_penalty) params.beam.length_penalty = static_cast<float>(*search.length_penalty);
  if (search.early_stopping) params.beam.early_stopping = *search.early_stopping;
  return params;
}

Result<std::vector<int32_t>> Model::encode(std::string_view text) const {
  if (!impl_->tokenizer) return OG_ERROR(impl_->package.dir.string(), ": the model has no tokenizer.json");
  return impl_->tokenizer->encode(text);
}

Result<std::vector<int32_t>> Model::encode_chat(const ChatRequest& request) const {
  if (!impl_->tokenizer) return OG_ERROR(impl_->package.dir.string(), ": the model has no tokenizer.json");
  // Once, whichever thread asks first: the server encodes chats from many threads.
  std::call_once(impl_->chat_templates_once,
                 [&] { impl_->chat_templates.emplace(ChatTemplates::load(impl_->package.dir.string())); });
  const Result<ChatTemplates>& templates = *impl_->chat_templates;
  if (!templates.is_ok()) return templates.status();
  OG_ASSIGN_OR_RETURN(std::string prompt, templates->apply(request));
  EncodeOptions options;
  options.add_special_tokens = false;  // the template writes them (transformers' apply_chat_template)
  return impl_->tokenizer->encode(prompt, options);
}

}  // namespace onnx_genai::genai
