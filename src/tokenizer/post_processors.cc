// Post-processors: add the model's special tokens around an encoded sequence.
#include "tokenizer/components.h"

namespace onnx_genai::tokenizer {
namespace {

// Single-sequence template: ids before the sequence, then the sequence, then ids after it.
class TemplatePostProcessor : public PostProcessor {
 public:
  TemplatePostProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}

  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_;
  std::vector<int32_t> after_;
};

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& step : steps_) step->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

class NoOpPostProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

// Special-token ids come from the file; an id outside the vocabulary would reach the model.
Result<int32_t> checked_id(const Json& id, const Vocabulary& vocab, const std::string& what) {
  if (!id.is_number_integer()) return OG_ERROR(what, ": id must be an integer, got ", id.dump());
  const int64_t value = id.get<int64_t>();
  if (value < 0 || value >= vocab.size()) {
    return OG_ERROR(what, ": id ", value, " is outside the vocabulary (size ", vocab.size(), ")");
  }
  return static_cast<int32_t>(value);
}

// Ids of a TemplateProcessing special token: its "ids" entry in special_tokens when present,
// else the vocabulary's id for the token string.
Result<std::vector<int32_t>> special_token_ids(const Json& config, const std::string& name, const Vocabulary& vocab) {
  if (auto table = config.find("special_tokens"); table != config.end() && table->is_object()) {
    if (auto entry = table->find(name); entry != table->end()) {
      auto ids = entry->find("ids");
      if (ids != entry->end() && ids->is_array()) {
        std::vector<int32_t> out;
        for (const Json& id : *ids) {
          const std::string what = "TemplateProcessing special token \"" + name + "\"";
          OG_ASSIGN_OR_RETURN(const int32_t checked, checked_id(id, vocab, what));
          out.push_back(checked);
        }
        return out;
      }
    }
  }
  const int32_t id = vocab.find(name);
  if (id < 0) return OG_ERROR("TemplateProcessing: special token \"", name, "\" is not in the vocabulary");
  return std::vector<int32_t>{id};
}

Result<std::unique_ptr<PostProcessor>> create_template(const Json& config, const Vocabulary& vocab) {
  auto single = config.find("single");
  if (single == config.end() || !single->is_array()) return OG_ERROR("TemplateProcessing: missing \"single\" array");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const Json& item : *single) {
    if (auto special = item.find("SpecialToken"); special != item.end()) {
      OG_ASSIGN_OR_RETURN(const std::string name, json_string(*special, "id", "TemplateProcessing SpecialToken"));
      OG_ASSIGN_OR_RETURN(auto ids, special_token_ids(config, name, vocab));
      (seen_sequence ? after : before).insert((seen_sequence ? after : before).end(), ids.begin(), ids.end());
    } else if (item.contains("Sequence")) {
      if (seen_sequence) return OG_ERROR("TemplateProcessing: \"single\" has more than one Sequence");
      seen_sequence = true;
    } else {
      return OG_ERROR("TemplateProcessing: unknown template piece ", item.dump());
    }
  }
  return std::unique_ptr<PostProcessor>(std::make_unique<TemplatePostProcessor>(std::move(before), std::move(after)));
}

// BertProcessing / RobertaProcessing: [cls] A [sep], with cls and sep given as [token, id].
Result<std::unique_ptr<PostProcessor>> create_cls_sep(const Json& config, const std::string& type,
                                                      const Vocabulary& vocab) {
  auto id_of = [&](const char* key) -> Result<int32_t> {
    auto it = config.find(key);
    if (it == config.end() || !it->is_array() || it->size() != 2) {
      return OG_ERROR(type, ": \"", key, "\" must be [token, id]");
    }
    return checked_id((*it)[1], vocab, type + " " + key);
  };
  OG_ASSIGN_OR_RETURN(const int32_t cls, id_of("cls"));
  OG_ASSIGN_OR_RETURN(const int32_t sep, id_of("sep"));
  return std::unique_ptr<PostProcessor>(
      std::make_unique<TemplatePostProcessor>(std::vector<int32_t>{cls}, std::vector<int32_t>{sep}));
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> create_post_processor(const Json& config, const Vocabulary& vocab) {
  if (config.is_null()) return std::unique_ptr<PostProcessor>();
  if (!config.is_object()) return OG_ERROR("post_processor: expected an object, got ", config.dump());
  OG_ASSIGN_OR_RETURN(const std::string type, json_string(config, "type", "post_processor"));
  if (type == "TemplateProcessing") return create_template(config, vocab);
  if (type == "BertProcessing" || type == "RobertaProcessing") return create_cls_sep(config, type, vocab);
  // ByteLevel only adjusts offsets, which this tokenizer does not report.
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(std::make_unique<NoOpPostProcessor>());
  if (type == "Sequence") {
    auto list = config.find("processors");
    if (list == config.end() || !list->is_array()) return OG_ERROR("Sequence post_processor: missing \"processors\" array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const Json& item : *list) {
      OG_ASSIGN_OR_RETURN(auto step, create_post_processor(item, vocab));
      if (step) steps.push_back(std::move(step));
    }
    return std::unique_ptr<PostProcessor>(std::make_unique<SequencePostProcessor>(std::move(steps)));
  }
  return OG_ERROR("unknown post_processor type \"", type, "\"");
}

}  // namespace onnx_genai::tokenizer
