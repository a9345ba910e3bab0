// C API: config (overlays, providers) and model.
//
// The config is genai_config.json as JSON with the caller's changes merged in. Only what this
// runtime applies may change: the search defaults, the thread count, the providers (CPU or
// CUDA) and model.tensor_parallel (an onnx-genai key: onnxruntime-genai has none; N ranks as
// ModelOptions::tensor_parallel, for the Generator and the engine alike). A change to anything
// else fails when it is made, naming the key, instead of being accepted and ignored.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "capi/api_objects.h"

using onnx_genai::Result;
using onnx_genai::Status;
using onnx_genai::capi::guard;
using onnx_genai::capi::require;
using Json = nlohmann::json;

namespace {

constexpr const char* kSessionOptions = "/model/decoder/session_options";
constexpr const char* kTensorParallel = "/model/tensor_parallel";
constexpr size_t kMaxConfigBytes = size_t{1} << 30;  // as the package loader's limit on configs

Result<Json> parse_json(const std::string& text, const std::string& what) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return OG_ERROR(what, " is not valid JSON");
  return json;
}

Result<Json> read_genai_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "genai_config.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) return Json::object();  // a Hugging Face package
  if (std::filesystem::file_size(file, error) > kMaxConfigBytes) return OG_ERROR(file.string(), " is over 1 GiB");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return OG_ERROR("cannot read ", file.string());
  OG_ASSIGN_OR_RETURN(Json json, parse_json(text.str(), file.string()));
  if (!json.is_object()) return OG_ERROR(file.string(), " is not a JSON object");
  return json;
}

// "cuda" / "cpu" for the names onnxruntime-genai accepts for them; empty for anything else.
std::string provider_key(std::string_view name) {
  if (name == "cuda" || name == "CUDAExecutionProvider" || name == "CUDA") return "cuda";
  if (name == "cpu" || name == "CPUExecutionProvider" || name == "CPU") return "cpu";
  return {};
}

Status unknown_provider(std::string_view name) {
  return OG_ERROR("execution provider '", name,
                  "' is not available: onnx-genai runs its own kernels on the CPU (\"cpu\") and on CUDA GPUs (\"cuda\")");
}

// session_options.provider_options: [{"cuda": {"device_id": "0"}}, ...] as onnxruntime-genai keeps it.
Json& provider_list(Json& config) {
  Json& list = config[Json::json_pointer(std::string(kSessionOptions) + "/provider_options")];
  if (!list.is_array()) list = Json::array();
  return list;
}

// Paths under which a difference from the package is applied; anything else must stay as it was.
bool applied_path(const std::string& path) {
  for (const char* prefix : {"/search/", "/model/decoder/session_options/provider_options",
                             "/model/decoder/session_options/intra_op_num_threads", kTensorParallel}) {
    if (path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Compared leaf by leaf: an overlay may add a whole subtree ({"search": {...}} to a package
// without one), and only the leaves say whether each change is one this runtime applies.
Status check_unapplied(const Json& before, const Json& after) {
  const Json old_leaves = before.flatten(), new_leaves = after.flatten();
  const auto refuse = [](const std::string& path) {
    return OG_ERROR("changing '", path, "' is not supported: onnx-genai applies only search.*, ", kSessionOptions + 1,
                    ".intra_op_num_threads, its provider_options and model.tensor_parallel (the rest is derived from "
                    "the model's graph)");
  };
  for (const auto& [path, value] : new_leaves.items()) {
    const bool changed = !old_leaves.contains(path) || old_leaves.at(path) != value;
    if (changed && !applied_path(path)) return refuse(path);
  }
  for (const auto& [path, value] : old_leaves.items()) {
    if (!new_leaves.contains(path) && !applied_path(path)) return refuse(path);
  }
  return Status::ok();
}

Status check_search(const Json& config, nlohmann::json& changed, const Json& file) {
  const Json::json_pointer pointer("/search");
  if (!config.contains(pointer)) return Status::ok();
  const Json& search = config.at(pointer);
  if (!search.is_object()) return OG_ERROR("search must be a JSON object");
  onnx_genai::capi::SearchOptions scratch;
  for (const auto& [key, value] : search.items()) {
    const Json::json_pointer item("/search/" + key);
    if (file.contains(item) && file.at(item) == value) continue;
    OG_RETURN_IF_ERROR(onnx_genai::capi::set_search_value(scratch, key, value));
    changed[key] = value;
  }
  return Status::ok();
}

// A provider's options into `options`: cuda takes device_id and enable_cuda_graph, cpu nothing.
Status apply_provider_options(const std::string& provider, const Json& values, onnx_genai::genai::ModelOptions& options) {
  if (!values.is_object()) return OG_ERROR("options of provider '", provider, "' must be a JSON object");
  if (provider == "cpu" && !values.empty()) return OG_ERROR("the cpu provider takes no options");
  for (const auto& [option, value] : values.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (option == "device_id") {
      OG_ASSIGN_OR_RETURN(const onnx_genai::Device device, onnx_genai::Device::parse("cuda:" + text));
      options.device.index = device.index;
    } else if (option == "enable_cuda_graph") {
      options.capture_device_graphs = text != "0" && text != "false";
    } else {
      return OG_ERROR("cuda provider option '", option, "' is not supported (device_id, enable_cuda_graph are)");
    }
  }
  return Status::ok();
}

// Model options from the session options: the first provider picks the device.
Result<onnx_genai::genai::ModelOptions> model_options(const Json& config) {
  onnx_genai::genai::ModelOptions options;
  const Json::json_pointer threads(std::string(kSessionOptions) + "/intra_op_num_threads");
  if (config.contains(threads)) {
    const Json& value = config.at(threads);
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 4096) {
      return OG_ERROR("intra_op_num_threads must be a whole number in [0, 4096], got ", value.dump());
    }
    options.num_threads = value.get<int>();
  }
  if (config.contains(Json::json_pointer(kTensorParallel))) {
    const Json& value = config.at(Json::json_pointer(kTensorParallel));
    if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 64) {
      return OG_ERROR("model.tensor_parallel must be a whole number in [1, 64], got ", value.dump());
    }
    options.tensor_parallel = value.get<int>();
  }
  const Json::json_pointer providers(std::string(kSessionOptions) + "/provider_options");
  if (!config.contains(providers) || !config.at(providers).is_array() || config.at(providers).empty()) return options;
  const Json& first = config.at(providers).front();
  if (!first.is_object() || first.size() != 1) return OG_ERROR("provider_options entries must be {\"name\": {options}}");
  const std::string key = provider_key(first.begin().key());
  if (key.empty()) {
    return unknown_provider(first.begin().key()).with_context("genai_config.json (clear_providers() runs on the CPU)");
  }
  if (key == "cuda") options.device = onnx_genai::Device{onnx_genai::DeviceType::kCuda, 0};
  OG_RETURN_IF_ERROR(apply_provider_options(key, first.begin().value(), options));
  return options;
}

Status create_model(const OgaConfig& config, OgaModel** out) {
  OG_ASSIGN_OR_RETURN(const onnx_genai::genai::ModelOptions options, model_options(config.merged));
  auto model = std::make_unique<OgaModel>();
  OG_ASSIGN_OR_RETURN(model->model, onnx_genai::genai::Model::load(config.path, options));
  model->path = config.path;
  model->options = options;
  std::error_code error;
  model->dir = std::filesystem::is_directory(config.path, error)
                   ? config.path
                   : std::filesystem::path(config.path).parent_path().string();
  model->search_overlay = Json::object();
  OG_RETURN_IF_ERROR(check_search(config.merged, model->search_overlay, config.file));
  *out = model.release();
  return Status::ok();
}

Status create_config(const char* config_path, OgaConfig** out) {
  OG_RETURN_IF_ERROR(require(config_path, "config_path"));
  OG_RETURN_IF_ERROR(require(out, "out"));
  auto config = std::make_unique<OgaConfig>();
  config->path = config_path;
  std::error_code error;
  const std::filesystem::path path(config->path);
  if (!std::filesystem::exists(path, error)) return OG_ERROR(config->path, ": no such file or folder");
  OG_ASSIGN_OR_RETURN(config->file,
                      read_genai_config(std::filesystem::is_directory(path, error) ? path : path.parent_path()));
  config->merged = config->file;
  *out = config.release();
  return Status::ok();
}

}  // namespace

extern "C" {

OgaResult* OgaCreateConfig(const char* config_path, OgaConfig** out) {
  return guard("OgaCreateConfig", [&] { return create_config(config_path, out); });
}

void OgaDestroyConfig(OgaConfig* config) { delete config; }

OgaResult* OgaConfigClearProviders(OgaConfig* config) {
  return guard("OgaConfigClearProviders", [&] {
    OG_RETURN_IF_ERROR(require(config, "config"));
    provider_list(config->merged) = Json::array();
    return Status::ok();
  });
}

OgaResult* OgaConfigAppendProvider(OgaConfig* config, const char* provider) {
  return guard("OgaConfigAppendProvider", [&] {
    OG_RETURN_IF_ERROR(require(config, "config"));
    OG_RETURN_IF_ERROR(require(provider, "provider"));
    const std::string key = provider_key(provider);
    if (key.empty()) return unknown_provider(provider);
    Json& list = provider_list(config->merged);
    for (const Json& entry : list) {
      if (entry.is_object() && entry.contains(key)) return Status::ok();  // already there, as onnxruntime-genai
    }
    list.push_back(Json{{key, Json::object()}});
    return Status::ok();
  });
}

OgaResult* OgaConfigSetProviderOption(OgaConfig* config, const char* provider, const char* key, const char* value) {
  return guard("OgaConfigSetProviderOption", [&] {
    OG_RETURN_IF_ERROR(require(config, "config"));
    OG_RETURN_IF_ERROR(require(provider, "provider"));
    OG_RETURN_IF_ERROR(require(key, "key"));
    OG_RETURN_IF_ERROR(require(value, "value"));
    const std::string name = provider_key(provider);
    if (name.empty()) return unknown_provider(provider);
    Json candidate = config->merged;
    Json& list = provider_list(candidate);
    Json* entry = nullptr;
    for (Json& item : list) {
      if (item.is_object() && item.contains(name)) entry = &item;
    }
    if (entry == nullptr) entry = &list.emplace_back(Json{{name, Json::object()}});
    (*entry)[name][key] = value;
    // Checked now, so that a bad option fails at the call that set it.
    onnx_genai::genai::ModelOptions scratch;
    OG_RETURN_IF_ERROR(apply_provider_options(name, (*entry)[name], scratch));
    config->merged = std::move(candidate);
    return Status::ok();
  });
}

OgaResult* OgaConfigOverlay(OgaConfig* config, const char* json) {
  return guard("OgaConfigOverlay", [&] {
    OG_RETURN_IF_ERROR(require(config, "config"));
    OG_RETURN_IF_ERROR(require(json, "json"));
    OG_ASSIGN_OR_RETURN(const Json patch, parse_json(json, "the overlay"));
    if (!patch.is_object()) return OG_ERROR("the overlay must be a JSON object");
    Json merged = config->merged;
    merged.merge_patch(patch);
    OG_RETURN_IF_ERROR(check_unapplied(config->file, merged));
    Json scratch = Json::object();
    OG_RETURN_IF_ERROR(check_search(merged, scratch, config->file));
    OG_RETURN_IF_ERROR(model_options(merged).status());
    config->merged = std::move(merged);
    return Status::ok();
  });
}

OgaResult* OgaCreateModel(const char* config_path, OgaModel** out) {
  return guard("OgaCreateModel", [&] {
    OG_RETURN_IF_ERROR(require(out, "out"));
    OgaConfig* config = nullptr;
    OG_RETURN_IF_ERROR(create_config(config_path, &config));
    const std::unique_ptr<OgaConfig> owned(config);
    return create_model(*config, out);
  });
}

OgaResult* OgaCreateModelFromConfig(const OgaConfig* config, OgaModel** out) {
  return guard("OgaCreateModelFromConfig", [&] {
    OG_RETURN_IF_ERROR(require(config, "config"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    return create_model(*config, out);
  });
}

void OgaDestroyModel(OgaModel* model) { delete model; }

OgaResult* OgaModelGetType(const OgaModel* model, const char** out) {
  return guard("OgaModelGetType", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = onnx_genai::capi::copy_string("decoder");
    return Status::ok();
  });
}

OgaResult* OgaModelGetDeviceType(const OgaModel* model, const char** out) {
  return guard("OgaModelGetDeviceType", [&] {
    OG_RETURN_IF_ERROR(require(model, "model"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    const bool cuda = model->model->device().type == onnx_genai::DeviceType::kCuda;
    *out = onnx_genai::capi::copy_string(cuda ? "CUDA" : "CPU");
    return Status::ok();
  });
}

}  // extern "C"
