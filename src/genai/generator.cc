// genai::Generator: prefill (chunked), then one decoder run and one sample per step.
#include "genai/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "genai/beam_search.h"
#include "genai/decoder_ranks.h"
#include "genai/constraint_processor.h"
#include "genai/device_sampling.h"
#include "genai/greedy_output.h"
#include "genai/kv_cache.h"
#include "genai/model_parts.h"
#include "genai/speculative.h"

namespace onnx_genai::genai {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Status check_token_ids(std::span<const int32_t> tokens, int64_t vocab, const std::string& what) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return OG_ERROR(what, " token ", i, " is ", tokens[i], ", outside the vocabulary [0, ", vocab, ")");
    }
  }
  return Status::ok();
}

Status check_params(const GeneratorParams& p, const ModelParts& model) {
  if (p.prompts.empty()) return OG_ERROR("generator: no prompts (one token list per sequence)");
  for (size_t b = 0; b < p.prompts.size(); ++b) {
    if (p.prompts[b].empty()) return OG_ERROR("generator: prompt ", b, " is empty");
    OG_RETURN_IF_ERROR(check_token_ids(p.prompts[b], model.io.vocab_size, "generator: prompt " + std::to_string(b)));
  }
  for (const auto& [name, value] :
       {std::pair{"max_new_tokens", p.max_new_tokens}, std::pair{"min_new_tokens", p.min_new_tokens},
        std::pair{"max_length", p.max_length}, std::pair{"prefill_chunk", p.prefill_chunk}}) {
    if (value < 0) return OG_ERROR("generator: ", name, " must be >= 0, got ", value);
  }
  if (p.max_new_tokens > 0 && p.min_new_tokens > p.max_new_tokens) {
    return OG_ERROR("generator: min_new_tokens ", p.min_new_tokens, " exceeds max_new_tokens ", p.max_new_tokens);
  }
  for (const std::string& stop : p.stop_strings) {
    if (stop.empty()) return OG_ERROR("generator: stop strings must not be empty");
  }
  if (!p.stop_strings.empty() && !model.tokenizer) {
    return OG_ERROR("generator: stop strings need the model's tokenizer.json, which the package lacks");
  }
  OG_RETURN_IF_ERROR(check_beam_params(p));
  if (speculates(p.speculative)) {
    OG_RETURN_IF_ERROR(check_speculative_params(p.speculative, model.info, p.constraint.has_value()));
    if (p.prompts.size() != 1 || p.beam.num_beams > 1) {
      return OG_ERROR("generator: speculative decoding takes one prompt, without beam search (fast-forward too)");
    }
  }
  if (p.beam.num_beams > 1 && p.beam.early_stopping == EarlyStopping::kNever && p.beam.length_penalty > 0 &&
      p.max_new_tokens == 0 && p.max_length == 0 && model.info.context_length == 0) {
    return OG_ERROR("generator: early_stopping never with length_penalty > 0 scores running beams at the longest "
                    "length allowed; set max_new_tokens or max_length (the model's config gives no context length)");
  }
  return Status::ok();
}

// A prompt that does not fit the context: cut from the left when allowed, else an error.
Status fit_context(std::vector<int32_t>& prompt, size_t index, const GeneratorParams& p, int64_t context) {
  const auto length = static_cast<int64_t>(prompt.size());
  if (context <= 0 || length < context) return Status::ok();
  if (!p.truncate_prompt_left) {
    return OG_ERROR("prompt ", index, " has ", length, " tokens; the model's context holds ", context,
                    " including at least one new token (shorten the prompt or allow truncation from the left)");
  }
  const int64_t keep = context - std::max<int64_t>(1, p.max_new_tokens);
  // Keeping a token or two of the prompt answers a different question; say so instead.
  if (keep < 1) {
    return OG_ERROR("prompt ", index, " has ", length, " tokens and is truncated from the left, but max_new_tokens ",
                    p.max_new_tokens, " leaves none of the model's context of ", context,
                    " for it (ask for fewer than ", context, " new tokens)");
  }
  prompt.erase(prompt.begin(), prompt.end() - keep);
  return Status::ok();
}

size_t longest(const std::vector<std::vector<int32_t>>& prompts) {
  size_t most = 0;
  for (const auto& prompt : prompts) most = std::max(most, prompt.size());
  return most;
}

}  // namespace

Status MinNewTokensProcessor::apply(const TokenHistory& history, Candidates& candidates) {
  if (static_cast<int64_t>(history.generated().size()) >= min_new_tokens_) return Status::ok();
  for (const int32_t id : eos_ids_) candidates.set_logit(id, -std::numeric_limits<float>::infinity());
  return Status::ok();
}

Result<LogitProcessorChain> make_generation_chain(const SamplingParams& params, int64_t min_new_tokens,
                                                  const std::vector<int32_t>& eos_ids) {
  OG_ASSIGN_OR_RETURN(LogitProcessorChain chain, make_logit_processors(params));
  if (min_new_tokens <= 0 || eos_ids.empty()) return chain;
  const auto shaping = [](const std::unique_ptr<LogitProcessor>& p) {
    const std::string_view name = p->name();
    return name == "temperature" || name == "top_k" || name == "top_p" || name == "min_p" || name == "typical_p";
  };
  auto at = std::find_if(chain.begin(), chain.end(), shaping);
  if (at == chain.end() && params.last_processor) --at;  // the caller's last step stays last
  chain.insert(at, std::make_unique<MinNewTokensProcessor>(min_new_tokens, eos_ids));
  return chain;
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopString: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "abort";
    case FinishReason::kNone: break;
  }
  return "none";
}

struct Generator::Impl {
  Impl(const ModelParts& parts, GeneratorParams p, DecoderRanks ranks)
      : model(parts), params(std::move(p)), decoder(std::move(ranks)) {}

  Status init_sequences();
  Status init_beam_search();
  Status feed_pending();
  Status feed_rows(std::span<Sequence> rows, size_t first, int64_t chunk);
  Status sample_all();
  Result<bool> speculative_step();
  Status verify_draft(Sequence& row, int64_t drafted);
  int64_t tokens_left(const Sequence& row) const;
  Status beam_step();
  int64_t beam_token_limit(size_t group) const;
  Status finish_beam_group(size_t group);
  Status after_token(Sequence& row, int32_t token);
  Status finish(Sequence& row, FinishReason reason);
  bool is_eos(int32_t token) const;
  Status check_fits(int64_t added) const;

  size_t beams_per_prompt() const { return static_cast<size_t>(params.beam.num_beams); }
  size_t returned_per_prompt() const { return static_cast<size_t>(params.beam.num_return_sequences); }
  size_t sequence_count() const { return beams ? beam_outputs.size() : rows.size(); }
  // Out-of-range sequence numbers read as an empty, unfinished sequence. With beam search a
  // returned sequence shows its running beam until its prompt's search is done.
  const Sequence& at(size_t sequence) const {
    static const Sequence kNoSequence;
    if (sequence >= sequence_count()) return kNoSequence;
    if (!beams) return rows[sequence];
    const size_t group = sequence / returned_per_prompt();
    return beams->done(group) ? beam_outputs[sequence]
                              : rows[group * beams_per_prompt() + sequence % returned_per_prompt()];
  }

  const ModelParts& model;
  GeneratorParams params;
  DecoderRanks decoder;  // the runner and KV cache of each tensor-parallel rank
  std::vector<Sequence> rows;
  LastPositions last;  // each row's logits, or the graph's token for it
  GenerationStats stats;
  // Beam search (params.beam.num_beams > 1): rows are the running beams, num_beams per prompt.
  std::optional<BeamSearch> beams;
  std::optional<BeamLogProbs> beam_log_probs;
  std::vector<Sequence> beam_outputs;  // the returned hypotheses, once their prompt is done
  std::vector<float> beam_rows;        // one group's processed log-probs
  // The graph draws each row's token among those of its constraint's mask (computed here).
  bool device_masked = false;
  // Speculative decoding (params.speculative): one prompt.
  std::unique_ptr<Drafter> drafter;
  Draft draft;
};

Result<std::unique_ptr<Generator>> Generator::create(const Model& model, const GeneratorParams& params) {
  const ModelParts& parts = *model.impl_;
  if (parts.io.paged) {
    return OG_ERROR("generator: the model was loaded with a paged KV cache (kv_block_size) for the serving Engine; "
                    "load it without one, or use genai::Engine");
  }
  OG_RETURN_IF_ERROR(check_params(params, parts));
  GeneratorParams fitted = params;
  for (size_t b = 0; b < fitted.prompts.size(); ++b) {
    OG_RETURN_IF_ERROR(fit_context(fitted.prompts[b], b, fitted, parts.info.context_length));
  }
  const size_t widest = longest(fitted.prompts);
  KvCacheLayout layout;
  layout.entries = parts.io.kv.size();
  layout.dtype = parts.io.kv_dtype;
  layout.batch = static_cast<int64_t>(fitted.prompts.size()) * fitted.beam.num_beams;
  layout.head_size = parts.io.head_size;
  layout.shared = parts.io.shared_buffer;
  // Left padding takes cache positions too.
  const int64_t context = parts.info.context_length;
  layout.max_length = context > 0 ? context + (parts.io.right_padding ? 0 : static_cast<int64_t>(widest)) : 0;
  OG_ASSIGN_OR_RETURN(DecoderRanks decoder, DecoderRanks::create(parts, layout));
  auto impl = std::make_unique<Impl>(parts, std::move(fitted), std::move(decoder));
  OG_RETURN_IF_ERROR(impl->init_sequences());
  return std::unique_ptr<Generator>(new Generator(std::move(impl)));
}

Status Generator::Impl::init_sequences() {
  const std::vector<std::vector<int32_t>>& prompts = params.prompts;
  const size_t widest = longest(prompts);
  // Beam search runs num_beams rows per prompt, each starting from the whole prompt.
  const size_t per_prompt = beams_per_prompt();
  rows.resize(prompts.size() * per_prompt);
  last.logits.resize(rows.size());
  last.tokens.resize(rows.size());
  last.position_tokens.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    Sequence& row = rows[r];
    const std::vector<int32_t>& prompt = prompts[r / per_prompt];
    const size_t pads = model.io.right_padding ? 0 : widest - prompt.size();
    row.slots.assign(pads, kPadSlot);
    row.slots.insert(row.slots.end(), prompt.begin(), prompt.end());
    row.lead_pads = static_cast<int64_t>(pads);
    row.prompt_end = row.size();
    // Beam rows trade places every step; a returned hypothesis's text is decoded when it is done.
    if (model.tokenizer && per_prompt == 1) {
      row.text.emplace(*model.tokenizer, params.stop_strings, params.skip_special_tokens);
    }
  }
  if (per_prompt > 1) return init_beam_search();
  OG_ASSIGN_OR_RETURN(std::shared_ptr<CompiledConstraint> constraint, compile_constraint(model, params.constraint));
  if (speculates(params.speculative)) {
    if (!decoder.keeps_several_positions()) {
      return OG_ERROR("generator: speculative decoding needs the logits of several positions, but the decoder's output '",
                      model.session->outputs()[model.io.logits_output].name, "' keeps only the last one");
    }
    OG_ASSIGN_OR_RETURN(drafter, Drafter::create(params.speculative, params.sampling, constraint, model.tokenizer.get()));
  }
  bool plain_argmax = true, device_sampling = true;
  device_masked = constraint != nullptr;
  for (size_t b = 0; b < rows.size(); ++b) {
    Sequence& row = rows[b];
    SamplingParams sampling = params.sampling;
    if (sampling.seed) *sampling.seed += b;  // rows draw differently; row 0 matches a batch of one
    const int64_t min_new_tokens = params.ignore_eos ? 0 : params.min_new_tokens;
    OG_ASSIGN_OR_RETURN(LogitProcessorChain chain,
                        make_generation_chain(sampling, min_new_tokens, model.info.eos_token_ids));
    if (constraint) row.masker = add_constraint_processor(constraint, chain);
    plain_argmax = plain_argmax && takes_plain_argmax(sampling, chain);
    device_sampling = device_sampling && takes_device_sampling(sampling, chain);
    device_masked = device_masked && takes_masked_device_sampling(sampling, chain);
    OG_ASSIGN_OR_RETURN(Sampler sampler,
                        Sampler::create(sampling, static_cast<int32_t>(model.io.vocab_size), std::move(chain)));
    row.sampler.emplace(std::move(sampler));
  }
  // When every row's token is the plain argmax, or a draw the graph can make (given the row's
  // constraint mask, if any), a device session keeps the logits on the device and hands over the
  // argmax (greedy_output.h) or the draw (device_sampling.h) computed in the graph.
  decoder.take_greedy_tokens(plain_argmax);
  // A verify step samples several positions on the host (the graph draws from the last only).
  device_masked = decoder.take_sampled_tokens((device_sampling || device_masked) && !drafter, params.sampling) &&
                  device_masked;
  return Status::ok();
}

// Feeds every slot the cache lacks. Batched when the graph allows it; GroupQueryAttention only
// takes several new tokens per row in a batch when every row starts from an empty cache, so
// longer (chunked) or continued prompts of a batch are fed row by row into each row's part of
// the shared cache.
Status Generator::Impl::feed_pending() {
  int64_t most = 0;
  bool any_cached = false;
  for (const Sequence& row : rows) {
    most = std::max(most, row.size() - row.cached);
    any_cached = any_cached || row.cached > 0;
  }
  if (most == 0) return OG_ERROR("generator: no tokens to continue from (append_tokens after rewind(0))");
  const int64_t chunk = params.prefill_chunk > 0 ? params.prefill_chunk : most;
  const bool row_by_row = model.io.right_padding && rows.size() > 1 && (most > chunk || (any_cached && most > 1));
  if (!row_by_row) return feed_rows(rows, 0, chunk);
  if (!model.io.shared_buffer) {
    return OG_ERROR("generator: this GroupQueryAttention model without a shared KV buffer cannot feed several tokens per "
                    "sequence to a batch that already has a cache or a prompt longer than prefill_chunk; use batch 1");
  }
  for (size_t b = 0; b < rows.size(); ++b) OG_RETURN_IF_ERROR(feed_rows(std::span(rows).subspan(b, 1), b, chunk));
  return Status::ok();
}

Status Generator::Impl::feed_rows(std::span<Sequence> batch, size_t first, int64_t chunk) {
  std::vector<RunRow> run(batch.size());
  for (;;) {
    int64_t width = 0, real = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Sequence& row = batch[i];
      const int64_t fresh = std::min(row.size() - row.cached, chunk);
      // A token is sampled after the run that feeds a running row's last pending slot.
      Sampler* sampler = row.sampler && !row.finished() && row.cached + fresh == row.size() ? &*row.sampler : nullptr;
      run[i] = RunRow{row.slots, row.lead_pads, row.cached, fresh, sampler};
      if (sampler != nullptr && device_masked) {
        OG_ASSIGN_OR_RETURN(run[i].mask, row.masker->mask_for(row.history()));
      }
      width = std::max(width, run[i].fresh);
      for (int64_t j = row.cached; j < row.cached + run[i].fresh; ++j) real += row.slots[static_cast<size_t>(j)] != kPadSlot;
    }
    if (width == 0) return Status::ok();
    const Clock::time_point start = Clock::now();
    OG_RETURN_IF_ERROR(decoder.run(run, first, last));
    if (width > 1) {
      stats.prefill_tokens += real;
      stats.prefill_seconds += seconds_since(start);
    } else {
      ++stats.decode_steps;
      ++stats.decode_tokens;
      stats.decode_seconds += seconds_since(start);
    }
    for (size_t i = 0; i < batch.size(); ++i) batch[i].cached += run[i].fresh;
  }
}

bool Generator::Impl::is_eos(int32_t token) const {
  const std::vector<int32_t>& eos = model.info.eos_token_ids;
  return !params.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
}

Status Generator::Impl::finish(Sequence& row, FinishReason reason) {
  row.end = row.size();
  row.reason = reason;
  if (reason == FinishReason::kStopString || !row.text) return Status::ok();
  OG_ASSIGN_OR_RETURN(const bool stopped, row.text->finish(row.generated() >= params.min_new_tokens, row.new_text));
  if (stopped) row.reason = FinishReason::kStopString;
  return Status::ok();
}

Status Generator::Impl::after_token(Sequence& row, int32_t token) {
  if (is_eos(token)) return finish(row, FinishReason::kEos);
  if (row.text) {
    OG_ASSIGN_OR_RETURN(const bool stopped, row.text->put(token, row.generated() >= params.min_new_tokens, row.new_text));
    if (stopped) return finish(row, FinishReason::kStopString);
  }
  const int64_t context = model.info.context_length;
  const bool at_limit = (params.max_new_tokens > 0 && row.generated() >= params.max_new_tokens) ||
                        (params.max_length > 0 && row.token_count() >= params.max_length) ||
                        (context > 0 && row.token_count() >= context);
  return at_limit ? finish(row, FinishReason::kLength) : Status::ok();
}

Status Generator::Impl::sample_all() {
  if (beams) return beam_step();
  const Clock::time_point start = Clock::now();
  for (size_t b = 0; b < rows.size(); ++b) {
    Sequence& row = rows[b];
    row.new_text.clear();
    if (row.finished()) {
      row.slots.push_back(model.info.pad_token_id);  // filler: the batch stays in lockstep
      continue;
    }
    if (last.tokens[b]) {
      row.slots.push_back(*last.tokens[b]);  // what the sampler would pick from these logits
    } else {
      OG_ASSIGN_OR_RETURN(SampledToken sampled, row.sampler->sample(last.logits[b], row.history()));
      row.slots.push_back(sampled.token);
      if (params.sampling.logprobs) row.logprobs.push_back(std::move(sampled));
    }
    OG_RETURN_IF_ERROR(after_token(row, row.slots.back()).with_context("sequence " + std::to_string(b)));
  }
  stats.sampling_seconds += seconds_since(start);
  return Status::ok();
}

// The beams' tokens come from logits on the host; the search runs there, and the KV rows follow
// it on the cache's own device (KvCache::gather_rows).
Status Generator::Impl::init_beam_search() {
  const std::vector<int32_t> no_eos;
  const std::vector<int32_t>& eos = params.ignore_eos ? no_eos : model.info.eos_token_ids;
  OG_ASSIGN_OR_RETURN(LogitProcessorChain chain,
                      make_generation_chain(params.sampling, params.ignore_eos ? 0 : params.min_new_tokens, eos));
  beam_log_probs.emplace(std::move(chain));
  beams.emplace(params.beam, params.prompts.size(), eos, static_cast<int32_t>(model.io.vocab_size));
  beam_outputs.resize(params.prompts.size() * returned_per_prompt());
  decoder.take_greedy_tokens(false);
  decoder.take_sampled_tokens(false, params.sampling);
  return Status::ok();
}

// Tokens a prompt's beams may generate in all (0: no limit), the limits after_token applies.
int64_t Generator::Impl::beam_token_limit(size_t group) const {
  const Sequence& row = rows[group * beams_per_prompt()];
  const int64_t prompt = row.prompt_end - row.lead_pads;
  int64_t limit = params.max_new_tokens;
  for (const int64_t total : {params.max_length, model.info.context_length}) {
    if (total > 0) limit = std::min(limit > 0 ? limit : total, std::max<int64_t>(1, total - prompt));
  }
  return limit;
}

Status Generator::Impl::beam_step() {
  const Clock::time_point start = Clock::now();
  const size_t per_prompt = beams_per_prompt();
  const auto vocab = static_cast<size_t>(model.io.vocab_size);
  for (Sequence& output : beam_outputs) output.new_text.clear();
  std::vector<int64_t> sources(rows.size());
  std::iota(sources.begin(), sources.end(), 0);
  beam_rows.resize(per_prompt * vocab);
  for (size_t group = 0; group < params.prompts.size(); ++group) {
    const size_t first = group * per_prompt;
    if (beams->done(group)) {
      for (size_t i = first; i < first + per_prompt; ++i) rows[i].slots.push_back(model.info.pad_token_id);  // filler
      continue;
    }
    for (size_t i = 0; i < per_prompt; ++i) {
      OG_RETURN_IF_ERROR(beam_log_probs->compute(last.logits[first + i], rows[first + i].history(),
                                                 std::span(beam_rows).subspan(i * vocab, vocab)));
    }
    beams->step(group, beam_rows, beam_token_limit(group));
    std::vector<std::vector<int32_t>> slots(per_prompt);
    for (size_t i = 0; i < per_prompt; ++i) {
      const auto parent = static_cast<size_t>(beams->parents(group)[i]);
      slots[i] = rows[first + parent].slots;
      slots[i].push_back(beams->running(group, i).back());
      sources[first + i] = static_cast<int64_t>(first + parent);
    }
    for (size_t i = 0; i < per_prompt; ++i) rows[first + i].slots = std::move(slots[i]);
    if (beams->done(group)) OG_RETURN_IF_ERROR(finish_beam_group(group));
  }
  OG_RETURN_IF_ERROR(decoder.gather_rows(sources));
  stats.sampling_seconds += seconds_since(start);
  return Status::ok();
}

// The group's rows turn into filler; its best hypotheses become its returned sequences.
Status Generator::Impl::finish_beam_group(size_t group) {
  const size_t per_prompt = beams_per_prompt();
  for (size_t i = group * per_prompt; i < (group + 1) * per_prompt; ++i) {
    rows[i].end = rows[i].size();
    rows[i].reason = FinishReason::kLength;
  }
  const std::vector<int32_t>& prompt = params.prompts[group];
  const std::span<const BeamHypothesis> hypotheses = beams->hypotheses(group);
  for (size_t k = 0; k < returned_per_prompt(); ++k) {
    Sequence& output = beam_outputs[group * returned_per_prompt() + k];
    output.slots = prompt;
    output.prompt_end = static_cast<int64_t>(prompt.size());
    output.end = output.size();
    output.reason = FinishReason::kLength;
    // Fewer hypotheses than asked for only when every continuation was -inf (all tokens banned).
    if (k >= hypotheses.size()) continue;
    const BeamHypothesis& hypothesis = hypotheses[k];
    output.slots.insert(output.slots.end(), hypothesis.tokens.begin(), hypothesis.tokens.end());
    output.end = output.size();
    output.reason = hypothesis.eos ? FinishReason::kEos : FinishReason::kLength;
    output.beam_score = hypothesis.score;
    if (!model.tokenizer) continue;
    // As the streamed text: without the eos that ended it.
    const std::span<const int32_t> text_tokens =
        std::span(hypothesis.tokens).first(hypothesis.tokens.size() - (hypothesis.eos ? 1 : 0));
    OG_ASSIGN_OR_RETURN(output.new_text,
                        model.tokenizer->decode(text_tokens, DecodeOptions{params.skip_special_tokens, {}}));
  }
  return Status::ok();
}

// Tokens the row may still generate before a limit ends it.
int64_t Generator::Impl::tokens_left(const Sequence& row) const {
  int64_t left = std::numeric_limits<int64_t>::max();
  if (params.max_new_tokens > 0) left = std::min(left, params.max_new_tokens - row.generated());
  for (const int64_t total : {params.max_length, model.info.context_length}) {
    if (total > 0) left = std::min(left, total - row.token_count());
  }
  return left;
}

// A draft for the one row, verified by one decoder run over its pending token and the draft.
// Returns false when it takes no draft this step (the caller then takes a plain one).
Result<bool> Generator::Impl::speculative_step() {
  Sequence& row = rows[0];
  if (row.finished() || row.size() - row.cached != 1) return false;  // prompt or appended tokens pending
  const Clock::time_point start = Clock::now();
  // Room for the draft and the token after it.
  OG_RETURN_IF_ERROR(drafter->propose(row.history(), tokens_left(row) - 1, false, draft));
  stats.drafting_seconds += seconds_since(start);
  if (draft.tokens.empty()) return false;
  const auto drafted = static_cast<int64_t>(draft.tokens.size());
  const int64_t size = row.size();
  row.slots.insert(row.slots.end(), draft.tokens.begin(), draft.tokens.end());
  const RunRow run{row.slots, row.lead_pads, row.cached, drafted + 1, &*row.sampler, drafted + 1};
  const Status ran = decoder.run(std::span(&run, 1), 0, last);
  row.slots.resize(static_cast<size_t>(size));
  OG_RETURN_IF_ERROR(ran);
  ++stats.decode_steps;
  ++stats.speculative_steps;
  stats.decode_seconds += seconds_since(start);
  OG_RETURN_IF_ERROR(verify_draft(row, drafted).with_context("sequence 0"));
  return true;
}

// Keeps the draft's tokens while the model's own pick at each position agrees (verify_draft),
// then the model's token after them; the KV cache forgets the positions of rejected tokens.
Status Generator::Impl::verify_draft(Sequence& row, int64_t drafted) {
  const Clock::time_point start = Clock::now();
  const int64_t fed_from = row.cached;
  // With the graph's tokens, the plain argmax at each position; else each position's logits.
  const std::span<const int32_t> argmax = last.tokens[0] ? std::span<const int32_t>(last.position_tokens[0])
                                                         : std::span<const int32_t>();
  const auto vocab = static_cast<size_t>(model.io.vocab_size);
  const auto logits_at = [&](int64_t i) {
    return std::span<const float>(last.logits[0]).subspan(static_cast<size_t>(i) * vocab, vocab);
  };
  row.new_text.clear();
  OG_ASSIGN_OR_RETURN(
      const int64_t accepted,
      genai::verify_draft(
          draft, argmax, logits_at, *row.sampler, [&row] { return row.history(); },
          [&](SampledToken pick) -> Result<bool> {
            const int32_t token = pick.token;
            if (params.sampling.logprobs) row.logprobs.push_back(std::move(pick));
            row.slots.push_back(token);
            ++stats.decode_tokens;
            OG_RETURN_IF_ERROR(after_token(row, token));
            return !row.finished();
          }));
  // The pending token and the accepted draft are in the cache; a token after them is not.
  row.cached = fed_from + 1 + accepted;
  OG_RETURN_IF_ERROR(decoder.rewind(row.cached));
  stats.drafted_tokens += drafted;
  stats.accepted_tokens += accepted;
  if (drafter->last_forced()) {
    stats.forced_drafted_tokens += drafted;
    stats.forced_accepted_tokens += accepted;
  }
  drafter->record(drafted, accepted);
  stats.sampling_seconds += seconds_since(start);
  return Status::ok();
}

Status Generator::Impl::check_fits(int64_t added) const {
  const int64_t context = model.info.context_length;
  for (size_t b = 0; b < rows.size(); ++b) {
    const int64_t total = rows[b].size() - rows[b].lead_pads + added;
    if (context > 0 && total >= context) {
      return OG_ERROR("sequence ", b, " would hold ", total, " tokens; the model's context holds ", context,
                      " including at least one new token");
    }
  }
  return Status::ok();
}

Generator::Generator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generator::~Generator() = default;

Status Generator::generate_next() {
  if (is_done()) return OG_ERROR("generator: every sequence has finished (rewind or append tokens to continue)");
  if (impl_->drafter) {
    OG_ASSIGN_OR_RETURN(const bool drafted, impl_->speculative_step());
    if (drafted) return Status::ok();
  }
  OG_RETURN_IF_ERROR(impl_->feed_pending());
  return impl_->sample_all();
}

Status Generator::generate(const TextCallback& on_text) {
  while (!is_done()) {
    OG_RETURN_IF_ERROR(generate_next());
    for (size_t b = 0; b < batch_size(); ++b) {
      if (on_text && !new_text(b).empty()) on_text(b, new_text(b));
    }
  }
  return Status::ok();
}

Status Generator::append_tokens(std::span<const int32_t> tokens) {
  if (impl_->beams) return OG_ERROR("append_tokens: not available with beam search (create another Generator)");
  if (tokens.empty()) return OG_ERROR("append_tokens: no tokens");
  OG_RETURN_IF_ERROR(check_token_ids(tokens, impl_->model.io.vocab_size, "append_tokens:"));
  OG_RETURN_IF_ERROR(impl_->check_fits(static_cast<int64_t>(tokens.size())));
  for (Sequence& row : impl_->rows) {
    row.slots.insert(row.slots.end(), tokens.begin(), tokens.end());
    row.prompt_end = row.size();
    row.end = -1;
    row.reason = FinishReason::kNone;
    row.new_text.clear();
    row.logprobs.clear();
    if (row.text) OG_RETURN_IF_ERROR(row.text->replay({}));
  }
  return Status::ok();
}

Status Generator::rewind(size_t length) {
  if (impl_->beams) return OG_ERROR("rewind: not available with beam search (create another Generator)");
  std::vector<Sequence>& rows = impl_->rows;
  int64_t longest = 0;
  for (const Sequence& row : rows) longest = std::max(longest, row.size() - row.lead_pads);
  const auto keep = static_cast<int64_t>(length);
  if (keep > longest) return OG_ERROR("rewind: cannot rewind to ", keep, " tokens; the longest sequence has ", longest);
  const int64_t drop = longest - keep;
  for (size_t b = 0; b < rows.size() && keep > 0; ++b) {
    if (rows[b].size() - rows[b].lead_pads - drop < 1) {
      return OG_ERROR("rewind: rewinding to ", keep, " tokens would empty sequence ", b, " (use rewind(0) to clear all)");
    }
  }
  int64_t cached = 0;
  for (Sequence& row : rows) {
    const int64_t size = keep == 0 ? 0 : row.size() - drop;
    row.slots.resize(static_cast<size_t>(size));
    if (keep == 0) row.lead_pads = 0;
    // The last kept token is fed again so that its successor can be sampled.
    row.cached = std::max<int64_t>(0, std::min(row.cached, size - 1));
    row.prompt_end = std::min(row.prompt_end, size);
    if (row.end > size || keep == 0) {
      row.end = -1;
      row.reason = FinishReason::kNone;
    }
    row.logprobs.resize(std::min(row.logprobs.size(), static_cast<size_t>(std::max<int64_t>(0, row.generated()))));
    row.new_text.clear();
    if (row.text) {
      OG_RETURN_IF_ERROR(row.text->replay(std::span<const int32_t>(row.slots).subspan(static_cast<size_t>(row.prompt_end))));
    }
    cached = std::max(cached, row.cached);
  }
  return impl_->decoder.rewind(cached);
}

size_t Generator::batch_size() const { return impl_->sequence_count(); }
bool Generator::is_done() const {
  return std::all_of(impl_->rows.begin(), impl_->rows.end(), [](const Sequence& row) { return row.finished(); });
}
bool Generator::is_done(size_t sequence) const { return impl_->at(sequence).finished(); }
FinishReason Generator::finish_reason(size_t sequence) const { return impl_->at(sequence).reason; }
std::span<const int32_t> Generator::tokens(size_t sequence) const { return impl_->at(sequence).tokens(); }
size_t Generator::prompt_length(size_t sequence) const {
  const Sequence& row = impl_->at(sequence);
  return static_cast<size_t>(row.prompt_end - row.lead_pads);
}
size_t Generator::cached_length(size_t sequence) const {
  const Sequence& row = impl_->at(sequence);
  return static_cast<size_t>(std::max<int64_t>(0, row.cached - row.lead_pads));
}
const std::string& Generator::new_text(size_t sequence) const { return impl_->at(sequence).new_text; }
std::span<const SampledToken> Generator::logprobs(size_t sequence) const { return impl_->at(sequence).logprobs; }
double Generator::beam_score(size_t sequence) const { return impl_->at(sequence).beam_score; }
int64_t Generator::kv_capacity() const { return impl_->decoder.capacity(); }
int64_t Generator::kv_growths() const { return impl_->decoder.growths(); }
const GenerationStats& Generator::stats() const { return impl_->stats; }

}  // namespace onnx_genai::genai
