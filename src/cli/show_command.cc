#include "cli/show_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_support.h"
#include "genai/json_fields.h"
#include "genai/package.h"
#include "onnx/model.h"

namespace onnx_genai::cli {

namespace {

namespace fs = std::filesystem;

constexpr size_t kTopOps = 12;

// What only the config text holds: the architecture's name and the hidden size.
struct ConfigFacts {
  std::string model_type = "unknown";
  std::string hidden_size = "unknown";
};

// `object[key]` when `object` is an object holding it, else null.
const nlohmann::json* member(const nlohmann::json* object, const char* key) {
  return object && object->is_object() && object->contains(key) ? &(*object)[key] : nullptr;
}

ConfigFacts read_config_facts(const genai::Package& package) {
  ConfigFacts facts;
  // The package loaded, so its config reads; an error here leaves the facts empty.
  const Result<nlohmann::json> read = genai::read_json_object(package.dir / package.config_name);
  const nlohmann::json config = read.is_ok() ? *read : nlohmann::json();
  // genai_config.json: model.type, model.decoder.hidden_size; config.json: model_type, hidden_size.
  const bool genai_layout = package.config_name == "genai_config.json";
  const nlohmann::json* model = genai_layout ? member(&config, "model") : &config;
  const nlohmann::json* type = member(model, genai_layout ? "type" : "model_type");
  if (type && type->is_string()) facts.model_type = type->get<std::string>();
  const nlohmann::json* hidden = member(genai_layout ? member(model, "decoder") : model, "hidden_size");
  if (hidden && hidden->is_number_integer()) facts.hidden_size = std::to_string(hidden->get<int64_t>());
  return facts;
}

// How many weights one stored element of each packed initializer holds (8 / bits for the
// MatMulNBits weight and uint8 GatherBlockQuantized data).
std::map<const Value*, int64_t> packed_weights(const Graph& graph) {
  std::map<const Value*, int64_t> per_element;
  for (const auto& node : graph.nodes()) {
    const int64_t bits = node->attrs.get_int("bits", 4);
    if (bits <= 0 || bits > 8 || 8 % bits != 0) continue;
    const Value* packed = nullptr;
    if (node->op_type == "MatMulNBits") packed = node->input(1);
    if (node->op_type == "GatherBlockQuantized" && node->input(0) && node->input(0)->dtype == DType::kU8) {
      packed = node->input(0);
    }
    if (packed && packed->is_constant()) per_element[packed] = 8 / bits;
  }
  return per_element;
}

int64_t parameter_count(const Graph& graph) {
  const auto packed = packed_weights(graph);
  int64_t total = 0;
  for (const auto& value : graph.values()) {
    if (!value->is_constant()) continue;
    const auto it = packed.find(value.get());
    total += value->initializer.numel() * (it == packed.end() ? 1 : it->second);
  }
  return total;
}

// "MatMulNBits bits=4 block=32 accuracy_level=0 (14 nodes)" per distinct setting, or "none".
std::string quantization(const Graph& graph) {
  std::map<std::string, int> settings;
  for (const auto& node : graph.nodes()) {
    if (node->op_type != "MatMulNBits") continue;
    ++settings["MatMulNBits bits=" + std::to_string(node->attrs.get_int("bits", 4)) +
               " block=" + std::to_string(node->attrs.get_int("block_size", 0)) +
               " accuracy_level=" + std::to_string(node->attrs.get_int("accuracy_level", 0))];
  }
  if (settings.empty()) return "none";
  std::string text;
  for (const auto& [setting, count] : settings) {
    text += (text.empty() ? "" : "; ") + setting + " (" + std::to_string(count) + " nodes)";
  }
  return text;
}

std::string op_histogram(const Graph& graph) {
  std::map<std::string, int> counts;
  for (const auto& node : graph.nodes()) ++counts[node->op_type];
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  sorted.resize(std::min(sorted.size(), kTopOps));
  std::string text = std::to_string(graph.nodes().size()) + " nodes:";
  for (size_t i = 0; i < sorted.size(); ++i) {
    text += " " + sorted[i].first + " " + std::to_string(sorted[i].second) + (i + 1 < sorted.size() ? "," : "");
  }
  return text;
}

std::string kv_dtype(const Graph& graph) {
  for (const Value* input : graph.inputs) {
    if (input->name.starts_with("past")) return std::string(dtype_name(input->dtype));
  }
  return "none";
}

// The decoder file plus its external data files (model.onnx.data, model.onnx_data...).
int64_t file_bytes(const fs::path& model_file) {
  std::error_code ec;
  int64_t total = 0;
  const std::string stem = model_file.filename().string();
  for (const auto& entry : fs::directory_iterator(model_file.parent_path(), ec)) {
    if (entry.is_regular_file(ec) && entry.path().filename().string().starts_with(stem)) {
      total += static_cast<int64_t>(entry.file_size(ec));
    }
  }
  return total;
}

std::string known(const std::optional<int64_t>& value) { return value ? std::to_string(*value) : "unknown"; }

void print_facts(const genai::Package& package, const onnx_genai::Model& onnx) {
  const ConfigFacts config = read_config_facts(package);
  const Graph& graph = *onnx.graph;
  const int64_t params = parameter_count(graph);
  const std::vector<std::pair<std::string, std::string>> lines = {
      {"model", package.model_file.string()},
      {"config", package.config_name},
      {"model type", config.model_type},
      {"layers", known(package.num_layers)},
      {"hidden size", config.hidden_size},
      {"heads", known(package.num_heads)},
      {"kv heads", known(package.num_kv_heads)},
      {"head dim", known(package.head_size)},
      {"vocab", known(package.vocab_size)},
      {"context length", package.context_length ? std::to_string(package.context_length) : "unknown"},
      {"parameters", std::to_string(params)},
      {"quantization", quantization(graph)},
      {"kv dtype", kv_dtype(graph)},
      {"ops", op_histogram(graph)},
      {"file bytes", std::to_string(file_bytes(package.model_file))},
  };
  for (const auto& [key, value] : lines) std::printf("%s: %s\n", key.c_str(), value.c_str());
  std::fflush(stdout);
}

}  // namespace

int run_show(std::span<const std::string> args) {
  std::string given;
  const Status parsed = parse_options(args, OptionTable{}, given);
  if (!parsed.is_ok()) return report(kExitBadInput, parsed.message());
  auto dir = resolve_model_dir(given, "show");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  auto package = genai::load_package(*dir);
  if (!package.is_ok()) return report(kExitBadInput, package.status().message());
  auto onnx = load_onnx_model(package->model_file.string());
  if (!onnx.is_ok()) return report(kExitBadInput, onnx.status().message());
  print_facts(*package, **onnx);
  return 0;
}

}  // namespace onnx_genai::cli
