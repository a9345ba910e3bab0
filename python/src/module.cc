// onnx_genai._onnx_genai: onnxruntime_genai's Python classes over the C API. This file: the
// module, Config, Model, Tensor, Tokenizer and TokenizerStream.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"

namespace onnx_genai::python {

namespace {

Config make_config(const std::string& path) {
  OgaConfig* config = nullptr;
  check(OgaCreateConfig(path.c_str(), &config));
  return Config{ConfigHandle(config)};
}

Model make_model(const std::string& path) {
  OgaModel* model = nullptr;
  {
    py::gil_scoped_release unlocked;  // loading reads and plans the whole model
    check(OgaCreateModel(path.c_str(), &model));
  }
  return Model{ModelHandle(model)};
}

Model make_model_from_config(const Config& config) {
  OgaModel* model = nullptr;
  {
    py::gil_scoped_release unlocked;
    check(OgaCreateModelFromConfig(config.handle.get(), &model));
  }
  return Model{ModelHandle(model)};
}

std::string model_string(const Model& model, OgaResult* (*get)(const OgaModel*, const char**)) {
  const char* text = nullptr;
  check(get(model.handle.get(), &text));
  return take_string(text);
}

Tokenizer make_tokenizer(const Model& model) {
  OgaTokenizer* tokenizer = nullptr;
  check(OgaCreateTokenizer(model.handle.get(), &tokenizer));
  return Tokenizer{TokenizerHandle(tokenizer)};
}

py::array_t<int32_t> encode(const Tokenizer& tokenizer, const std::string& text) {
  OgaSequences* raw = nullptr;
  check(OgaCreateSequences(&raw));
  const SequencesHandle sequences(raw);
  check(OgaTokenizerEncode(tokenizer.handle.get(), text.c_str(), raw));
  const size_t count = OgaSequencesGetSequenceCount(raw, 0);
  py::array_t<int32_t> ids(static_cast<py::ssize_t>(count));
  std::copy_n(OgaSequencesGetSequenceData(raw, 0), count, ids.mutable_data());
  return ids;
}

std::string decode(const Tokenizer& tokenizer, const TokenArray& tokens) {
  const char* text = nullptr;
  check(OgaTokenizerDecode(tokenizer.handle.get(), tokens.data(), static_cast<size_t>(tokens.size()), &text));
  return take_string(text);
}

Tensor encode_batch(const Tokenizer& tokenizer, const std::vector<std::string>& texts) {
  std::vector<const char*> pointers;
  for (const std::string& text : texts) pointers.push_back(text.c_str());
  OgaTensor* tensor = nullptr;
  check(OgaTokenizerEncodeBatch(tokenizer.handle.get(), pointers.data(), pointers.size(), &tensor));
  return Tensor{TensorHandle(tensor)};
}

std::vector<std::string> decode_batch(const Tokenizer& tokenizer, const Tensor& tokens) {
  OgaStringArray* raw = nullptr;
  check(OgaTokenizerDecodeBatch(tokenizer.handle.get(), tokens.handle.get(), &raw));
  const StringArrayHandle strings(raw);
  size_t count = 0;
  check(OgaStringArrayGetCount(raw, &count));
  std::vector<std::string> result;
  for (size_t i = 0; i < count; ++i) {
    const char* text = nullptr;
    check(OgaStringArrayGetString(raw, i, &text));
    result.emplace_back(text);
  }
  return result;
}

std::string apply_chat_template(const Tokenizer& tokenizer, const std::string& messages,
                                const std::optional<std::string>& template_str, const std::optional<std::string>& tools,
                                bool add_generation_prompt) {
  const char* text = nullptr;
  check(OgaTokenizerApplyChatTemplate(tokenizer.handle.get(), template_str ? template_str->c_str() : nullptr,
                                      messages.c_str(), tools ? tools->c_str() : nullptr, add_generation_prompt, &text));
  return take_string(text);
}

TokenizerStream create_stream(const Tokenizer& tokenizer) {
  OgaTokenizerStream* stream = nullptr;
  check(OgaCreateTokenizerStream(tokenizer.handle.get(), &stream));
  return TokenizerStream{StreamHandle(stream)};
}

int32_t token_id(const Tokenizer& tokenizer, OgaResult* (*get)(const OgaTokenizer*, int32_t*)) {
  int32_t id = 0;
  check(get(tokenizer.handle.get(), &id));
  return id;
}

void bind_tokenizer(py::module_& m) {
  py::class_<TokenizerStream>(m, "TokenizerStream").def("decode", [](TokenizerStream& stream, int32_t token) {
    const char* text = nullptr;
    check(OgaTokenizerStreamDecode(stream.handle.get(), token, &text));
    return py::str(text);  // a copy: the stream reuses its buffer
  });
  py::class_<Tokenizer>(m, "Tokenizer")
      .def(py::init(&make_tokenizer), py::arg("model"), py::keep_alive<1, 2>())
      .def("encode", &encode, py::arg("text"))
      .def("decode", &decode, py::arg("tokens"))
      .def("encode_batch", &encode_batch, py::arg("texts"))
      .def("decode_batch", &decode_batch, py::arg("tokens"))
      .def("decode_batch", [](const Tokenizer& t, const py::array& a) { return decode_batch(t, tensor_from_numpy(a)); })
      .def("to_token_id", [](const Tokenizer& t, const std::string& text) {
        int32_t id = 0;
        check(OgaTokenizerToTokenId(t.handle.get(), text.c_str(), &id));
        return id;
      })
      .def("apply_chat_template", &apply_chat_template, py::arg("messages"), py::kw_only(),
           py::arg("template_str") = py::none(), py::arg("tools") = py::none(), py::arg("add_generation_prompt") = true)
      .def("create_stream", &create_stream, py::keep_alive<0, 1>())
      .def_property_readonly("bos_token_id", [](const Tokenizer& t) { return token_id(t, OgaTokenizerGetBosTokenId); })
      .def_property_readonly("pad_token_id", [](const Tokenizer& t) { return token_id(t, OgaTokenizerGetPadTokenId); })
      .def_property_readonly("eos_token_ids", [](const Tokenizer& t) {
        const int32_t* ids = nullptr;
        size_t count = 0;
        check(OgaTokenizerGetEosTokenIds(t.handle.get(), &ids, &count));
        py::array_t<int32_t> result(static_cast<py::ssize_t>(count));
        std::copy_n(ids, count, result.mutable_data());
        return result;
      });
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<Config>(m, "Config")
      .def(py::init(&make_config), py::arg("config_path"))
      .def("clear_providers", [](Config& c) { check(OgaConfigClearProviders(c.handle.get())); })
      .def("append_provider", [](Config& c, const std::string& provider) {
        check(OgaConfigAppendProvider(c.handle.get(), provider.c_str()));
      })
      .def("set_provider_option", [](Config& c, const std::string& provider, const std::string& key,
                                     const std::string& value) {
        check(OgaConfigSetProviderOption(c.handle.get(), provider.c_str(), key.c_str(), value.c_str()));
      })
      .def("overlay", [](Config& c, const std::string& json) { check(OgaConfigOverlay(c.handle.get(), json.c_str())); });
  py::class_<Model>(m, "Model")
      .def(py::init(&make_model), py::arg("config_path"))
      .def(py::init(&make_model_from_config), py::arg("config"))
      .def_property_readonly("type", [](const Model& model) { return model_string(model, OgaModelGetType); })
      .def_property_readonly("device_type", [](const Model& model) { return model_string(model, OgaModelGetDeviceType); });
  py::class_<Tensor>(m, "Tensor")
      .def(py::init(&tensor_from_numpy), py::arg("array"))
      .def("shape", [](const Tensor& t) {
        size_t rank = 0;
        check(OgaTensorGetShapeRank(t.handle.get(), &rank));
        std::vector<int64_t> shape(rank);
        check(OgaTensorGetShape(t.handle.get(), shape.data(), rank));
        return shape;
      })
      .def("type", [](const Tensor& t) {
        OgaElementType type = OgaElementType_undefined;
        check(OgaTensorGetType(t.handle.get(), &type));
        return static_cast<int>(type);
      })
      .def("as_numpy", [](const Tensor& t) { return tensor_to_numpy(t.handle.get()); });
  bind_tokenizer(m);
}

}  // namespace onnx_genai::python

PYBIND11_MODULE(_onnx_genai, m) {
  m.doc() = "onnx-genai: onnxruntime_genai's Python API over onnx-genai's own runtime";
  onnx_genai::python::bind_model(m);
  onnx_genai::python::bind_generator(m);
  onnx_genai::python::bind_engine(m);
}
