#include "genai/decoder_io.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "genai/device_sampling.h"
#include "genai/greedy_output.h"
#include "runtime/generation_passes.h"

namespace onnx_genai::genai {

namespace {

// Which cache entry a past input or present output holds.
struct KvSlot {
  int64_t layer = 0;
  bool is_value = false;
  auto operator<=>(const KvSlot&) const = default;
};

constexpr int64_t kMaxLayers = 1 << 16;

std::optional<int64_t> parse_layer(const std::string& digits) {
  if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  const int64_t layer = std::stoll(digits);
  return layer < kMaxLayers ? std::optional<int64_t>(layer) : std::nullopt;
}

// `name` against a template with one %d ("past_key_values.%d.key").
std::optional<int64_t> match_template(const std::string& name, const std::string& pattern) {
  const size_t hole = pattern.find("%d");
  if (hole == std::string::npos) return std::nullopt;
  const std::string before = pattern.substr(0, hole), after = pattern.substr(hole + 2);
  if (name.size() <= before.size() + after.size() || !name.starts_with(before) || !name.ends_with(after)) {
    return std::nullopt;
  }
  return parse_layer(name.substr(before.size(), name.size() - before.size() - after.size()));
}

// Names holding `marker` ("past" / "present"), exactly one run of digits (the layer) and "key"
// or "value": the text after the number decides ("past_key_values.0.key"), else the last of the
// two words before it ("past_value_3").
std::optional<KvSlot> match_generic(const std::string& name, const std::string& marker) {
  if (name.find(marker) == std::string::npos) return std::nullopt;
  const size_t first = name.find_first_of("0123456789");
  if (first == std::string::npos) return std::nullopt;
  const size_t end = name.find_first_not_of("0123456789", first);
  const std::string suffix = end == std::string::npos ? "" : name.substr(end);
  if (suffix.find_first_of("0123456789") != std::string::npos) return std::nullopt;
  const std::optional<int64_t> layer = parse_layer(name.substr(first, end - first));
  if (!layer) return std::nullopt;
  const bool key_after = suffix.find("key") != std::string::npos, value_after = suffix.find("value") != std::string::npos;
  if (key_after != value_after) return KvSlot{*layer, value_after};
  const std::string prefix = name.substr(0, first);
  const size_t key_at = prefix.rfind("key"), value_at = prefix.rfind("value");
  if (key_at == std::string::npos && value_at == std::string::npos) return std::nullopt;
  const bool is_value = value_at != std::string::npos && (key_at == std::string::npos || value_at > key_at);
  return KvSlot{*layer, is_value};
}

// A past or present name's slot, by the config's templates when given, else generically.
std::optional<KvSlot> match_kv(const std::string& name, const std::string& key_template,
                               const std::string& value_template, const std::string& marker) {
  if (key_template.empty() && value_template.empty()) return match_generic(name, marker);
  if (auto layer = match_template(name, key_template)) return KvSlot{*layer, false};
  if (auto layer = match_template(name, value_template)) return KvSlot{*layer, true};
  return std::nullopt;
}

std::string or_default(const std::string& name, const char* fallback) { return name.empty() ? fallback : name; }

std::string dims_text(const IoInfo& io) {
  if (!io.rank_known) return "[?]";
  std::string text = "[";
  for (size_t i = 0; i < io.dims.size(); ++i) {
    text += (i ? ", " : "") + (io.dims[i] >= 0 ? std::to_string(io.dims[i]) : io.symbols[i].empty() ? "?" : io.symbols[i]);
  }
  return text + "]";
}

bool is_integer_input(DType dtype) { return dtype == DType::kI64 || dtype == DType::kI32; }

// The paged graph's cache input `name`, as a layer's key or value.
std::optional<KvSlot> paged_cache_slot(const PagedRewrite* paged, const std::string& name) {
  if (paged == nullptr) return std::nullopt;
  for (size_t layer = 0; layer < paged->layers.size(); ++layer) {
    const PagedLayer& l = paged->layers[layer];
    if (name == l.key_cache || name == l.value_cache) return KvSlot{static_cast<int64_t>(layer), name == l.value_cache};
  }
  return std::nullopt;
}

Status assign_input_roles(const std::vector<IoInfo>& inputs, const DecoderNames& names, const GraphFacts& facts,
                          DecoderIo& io, std::map<KvSlot, size_t>& pasts) {
  const std::string ids_name = or_default(names.input_ids, "input_ids");
  const std::string mask_name = or_default(names.attention_mask, "attention_mask");
  const std::string positions_name = or_default(names.position_ids, "position_ids");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& in = inputs[i];
    const auto integer_role = [&](InputRole role) -> Status {
      if (!is_integer_input(in.dtype)) {
        return OG_ERROR("decoder input '", in.name, "' must be int64 or int32, got ", dtype_name(in.dtype));
      }
      io.roles.push_back(role);
      return Status::ok();
    };
    if (in.name == ids_name) {
      OG_RETURN_IF_ERROR(integer_role(InputRole::kInputIds));
    } else if (in.name == mask_name) {
      OG_RETURN_IF_ERROR(integer_role(InputRole::kAttentionMask));
    } else if (in.name == positions_name) {
      OG_RETURN_IF_ERROR(integer_role(InputRole::kPositionIds));
    } else if (in.name == kLogitRowsInput) {
      io.roles.push_back(InputRole::kLogitRows);
      io.logit_rows_width = in.dims.size() == 3 ? in.dims[2] : 0;
    } else if (in.name == kSamplingParamsInput || in.name == kSamplingUniformsInput || in.name == kSamplingMaskInput) {
      io.roles.push_back(in.name == kSamplingParamsInput     ? InputRole::kSamplingParams
                         : in.name == kSamplingUniformsInput ? InputRole::kSamplingUniforms
                                                             : InputRole::kSamplingMask);
    } else if (in.name == kBlockTablesInput || in.name == kQueryStartsInput || in.name == kSeqLensInput) {
      io.roles.push_back(in.name == kBlockTablesInput ? InputRole::kBlockTables
                         : in.name == kQueryStartsInput ? InputRole::kQueryStarts
                                                        : InputRole::kSeqLens);
    } else if (auto paged_slot = paged_cache_slot(facts.paged, in.name)) {
      pasts.emplace(*paged_slot, i);
      io.roles.push_back(InputRole::kPagedCache);
    } else if (in.name == "use_cache_branch") {
      if (in.dtype != DType::kBool) {
        return OG_ERROR("decoder input 'use_cache_branch' must be bool, got ", dtype_name(in.dtype));
      }
      io.roles.push_back(InputRole::kUseCacheBranch);
    } else if (auto slot = match_kv(in.name, names.past_key, names.past_value, "past")) {
      if (!pasts.emplace(*slot, i).second) {
        return OG_ERROR("decoder inputs '", inputs[pasts[*slot]].name, "' and '", in.name, "' are both layer ",
                        slot->layer, "'s past ", slot->is_value ? "value" : "key");
      }
      io.roles.push_back(InputRole::kPastKv);
    } else {
      return OG_ERROR("decoder input '", in.name, "' ", dims_text(in), " cannot be mapped: the generator feeds ", ids_name,
                      ", ", mask_name, ", ", positions_name, ", use_cache_branch and past key/value caches");
    }
  }
  if (!io.has(InputRole::kInputIds)) return OG_ERROR("the decoder has no input named '", ids_name, "'");
  return Status::ok();
}

Result<size_t> find_present(const std::vector<IoInfo>& outputs, const DecoderNames& names, const KvSlot& slot,
                            const std::string& past_name) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (match_kv(outputs[o].name, names.present_key, names.present_value, "present") == slot) return o;
  }
  return OG_ERROR("decoder input '", past_name, "' has no matching present output (layer ", slot.layer, " ",
                  slot.is_value ? "value" : "key", ")");
}

// A config value the graph contradicts: the graph runs, so its value wins, and one warning says so.
void note_contradiction(const Package& package, const std::string& key, int64_t configured, const std::string& graph_what,
                        int64_t declared, std::vector<std::string>& warnings) {
  warnings.push_back(package.config_name + ": " + key + " is " + std::to_string(configured) + " but " + graph_what +
                     " has " + std::to_string(declared) + "; using the graph's value");
}

// One declared cache dim: fixed in the graph, else the config's value.
Result<int64_t> cache_dim(const IoInfo& past, size_t axis, const std::optional<int64_t>& configured, const char* what,
                          const Package& package, const std::string& key, std::vector<std::string>& warnings) {
  const int64_t declared = past.dims[axis];
  if (declared > 0) {
    if (configured && *configured != declared) {
      note_contradiction(package, key, *configured, "the decoder input '" + past.name + "' " + dims_text(past) + " (" +
                                                        what + ")",
                         declared, warnings);
    }
    return declared;
  }
  if (configured && *configured > 0) return *configured;
  return OG_ERROR("decoder input '", past.name, "' ", dims_text(past), ": ", what,
                  " is symbolic and the config does not give it");
}

Status check_cache_shapes(const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs, const Package& package,
                          DecoderIo& io) {
  for (const KvBinding& binding : io.kv) {
    const IoInfo& past = inputs[binding.past_input];
    const IoInfo& present = outputs[binding.present_output];
    if (!past.rank_known || past.dims.size() != 4) {
      return OG_ERROR("decoder input '", past.name, "' ", dims_text(past),
                      " must be [batch, kv_heads, past_sequence, head_size]");
    }
    if (past.dtype != DType::kF32 && past.dtype != DType::kF16 && past.dtype != DType::kBF16) {
      return OG_ERROR("decoder input '", past.name, "' has dtype ", dtype_name(past.dtype),
                      "; caches must be float32, float16 or bfloat16");
    }
    if (present.dtype != past.dtype) {
      return OG_ERROR("decoder output '", present.name, "' has dtype ", dtype_name(present.dtype), " but '", past.name,
                      "' has ", dtype_name(past.dtype));
    }
    // The config's values are compared with the first layer's only: one warning per key.
    std::vector<std::string> ignored;
    std::vector<std::string>& warnings = &binding == &io.kv.front() ? io.warnings : ignored;
    OG_ASSIGN_OR_RETURN(const int64_t heads, cache_dim(past, 1, package.num_kv_heads, "the head count (dim 1)", package,
                                                       package.keys.num_kv_heads, warnings));
    OG_ASSIGN_OR_RETURN(const int64_t head_size, cache_dim(past, 3, package.head_size, "the head size (dim 3)", package,
                                                           package.keys.head_size, warnings));
    if (&binding == &io.kv.front()) {
      io.kv_dtype = past.dtype;
      io.kv_heads = heads;
      io.head_size = head_size;
    } else if (past.dtype != io.kv_dtype || heads != io.kv_heads || head_size != io.head_size) {
      return OG_ERROR("decoder input '", past.name, "' ", dtype_name(past.dtype), " ", dims_text(past), " differs from '",
                      inputs[io.kv.front().past_input].name, "' ", dtype_name(io.kv_dtype), " ",
                      dims_text(inputs[io.kv.front().past_input]));
    }
  }
  return Status::ok();
}

Status bind_caches(const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs, const Package& package,
                   const std::map<KvSlot, size_t>& pasts, DecoderIo& io) {
  for (const auto& [slot, input] : pasts) {
    const int64_t expected_layer = static_cast<int64_t>(io.kv.size() / 2);
    const KvSlot expected{expected_layer, io.kv.size() % 2 == 1};
    if (slot != expected) {
      return OG_ERROR("decoder input '", inputs[input].name, "': the past caches must be layers 0..N-1 each with a key ",
                      "and a value, but layer ", expected.layer, "'s ", expected.is_value ? "value" : "key", " is missing");
    }
    OG_ASSIGN_OR_RETURN(const size_t present, find_present(outputs, package.names, slot, inputs[input].name));
    io.kv.push_back(KvBinding{slot.layer, slot.is_value, input, present});
  }
  if (io.kv.size() % 2 == 1) {
    return OG_ERROR("decoder input '", inputs[io.kv.back().past_input].name, "': layer ", io.kv.back().layer,
                    " has no past value");
  }
  io.num_layers = static_cast<int64_t>(io.kv.size() / 2);
  if (package.num_layers && io.num_layers != *package.num_layers && io.num_layers > 0) {
    return OG_ERROR("the decoder has past caches for ", io.num_layers, " layers but ", package.config_name, " says ",
                    *package.num_layers);
  }
  return check_cache_shapes(inputs, outputs, package, io);
}

// The paged graph's pools pair with their outputs by the rewrite's names; their dims are the
// rewrite's.
Status bind_paged_caches(const std::vector<IoInfo>& outputs, const PagedRewrite& paged,
                         const std::map<KvSlot, size_t>& pools, DecoderIo& io) {
  for (const auto& [slot, input] : pools) {
    const PagedLayer& layer = paged.layers[static_cast<size_t>(slot.layer)];
    const std::string& out_name = slot.is_value ? layer.value_cache_out : layer.key_cache_out;
    const auto out = std::find_if(outputs.begin(), outputs.end(), [&](const IoInfo& o) { return o.name == out_name; });
    if (out == outputs.end()) return OG_ERROR("the paged decoder has no output named '", out_name, "'");
    io.kv.push_back(KvBinding{slot.layer, slot.is_value, input, static_cast<size_t>(out - outputs.begin())});
  }
  io.num_layers = static_cast<int64_t>(paged.layers.size());
  if (io.kv.size() != 2 * paged.layers.size()) return OG_ERROR("the paged decoder lacks some of its cache inputs");
  io.kv_dtype = paged.kv_dtype;
  io.kv_heads = paged.kv_heads;
  io.head_size = paged.head_size;
  io.paged = true;
  io.shared_buffer = io.right_padding = true;
  return Status::ok();
}

Status find_logits(const std::vector<IoInfo>& outputs, const Package& package, DecoderIo& io) {
  const std::string name = or_default(package.names.logits, "logits");
  const auto it = std::find_if(outputs.begin(), outputs.end(), [&](const IoInfo& o) { return o.name == name; });
  if (it == outputs.end()) return OG_ERROR("the decoder has no output named '", name, "'");
  if (it->dtype != DType::kF32 && it->dtype != DType::kF16 && it->dtype != DType::kBF16) {
    return OG_ERROR("decoder output '", name, "' has dtype ", dtype_name(it->dtype), "; logits must be float");
  }
  if (it->rank_known && it->dims.size() != 3) {
    return OG_ERROR("decoder output '", name, "' ", dims_text(*it), " must be [batch, sequence, vocab]");
  }
  io.logits_output = static_cast<size_t>(it - outputs.begin());
  io.logits_dtype = it->dtype;
  io.vocab_size = it->rank_known && it->dims[2] > 0 ? it->dims[2] : package.vocab_size.value_or(0);
  if (package.vocab_size && *package.vocab_size != io.vocab_size) {
    note_contradiction(package, package.keys.vocab_size, *package.vocab_size,
                       "the decoder output '" + name + "' " + dims_text(*it) + " (the vocabulary, dim 2)", io.vocab_size,
                       io.warnings);
  }
  const auto greedy =
      std::find_if(outputs.begin(), outputs.end(), [](const IoInfo& o) { return o.name == kGreedyTokensOutput; });
  if (greedy != outputs.end() && greedy->dtype == DType::kI64) {
    io.greedy_tokens_output = static_cast<size_t>(greedy - outputs.begin());
  }
  const auto sampled =
      std::find_if(outputs.begin(), outputs.end(), [](const IoInfo& o) { return o.name == kSampledTokensOutput; });
  if (sampled != outputs.end() && sampled->dtype == DType::kI64) {
    io.sampled_tokens_output = static_cast<size_t>(sampled - outputs.begin());
  }
  return Status::ok();
}

// Shared storage needs the graph to write present at past's size: GroupQueryAttention does, and so
// does any graph declaring present's sequence dim with past's own symbol.
void choose_cache_discipline(const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs, const Package& package,
                             const GraphFacts& facts, DecoderIo& io) {
  if (io.kv.empty()) return;
  bool all_gqa = true, same_symbols = true;
  for (const KvBinding& binding : io.kv) {
    const IoInfo& past = inputs[binding.past_input];
    const IoInfo& present = outputs[binding.present_output];
    all_gqa = all_gqa && facts.inputs_read_by_gqa.count(past.name) > 0;
    same_symbols = same_symbols && present.rank_known && present.dims.size() == 4 && !past.symbols[2].empty() &&
                   past.symbols[2] == present.symbols[2];
  }
  io.shared_buffer = (all_gqa || same_symbols) && package.past_present_share_buffer.value_or(true);
  io.right_padding = all_gqa || io.shared_buffer;
}

}  // namespace

bool DecoderIo::has(InputRole role) const { return std::find(roles.begin(), roles.end(), role) != roles.end(); }

Result<DecoderIo> derive_decoder_io(const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs,
                                    const Package& package, const GraphFacts& facts) {
  DecoderIo io;
  std::map<KvSlot, size_t> pasts;
  OG_RETURN_IF_ERROR(assign_input_roles(inputs, package.names, facts, io, pasts));
  if (facts.paged != nullptr) {
    OG_RETURN_IF_ERROR(bind_paged_caches(outputs, *facts.paged, pasts, io));
  } else {
    OG_RETURN_IF_ERROR(bind_caches(inputs, outputs, package, pasts, io));
  }
  OG_RETURN_IF_ERROR(find_logits(outputs, package, io));
  if (io.vocab_size <= 0) {
    return OG_ERROR("the vocabulary size is neither in the logits' declared shape nor in ", package.config_name);
  }
  if (!io.paged) choose_cache_discipline(inputs, outputs, package, facts, io);
  return io;
}

}  // namespace onnx_genai::genai
