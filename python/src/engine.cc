// onnx_genai._onnx_genai: Engine and Request, onnxruntime_genai's engine for batched use. step()
// runs the model with the GIL released, so other threads may add requests meanwhile.
#include "bindings.h"

namespace onnx_genai::python {

namespace {

Request make_request(const GeneratorParams& params) {
  OgaRequest* request = nullptr;
  check(OgaCreateRequest(params.handle.get(), &request));
  return Request{RequestHandle(request)};
}

void add_tokens(Request& request, const TokenArray& tokens) {
  OgaSequences* raw = nullptr;
  check(OgaCreateSequences(&raw));
  const SequencesHandle sequences(raw);
  check(OgaAppendTokenSequence(tokens.data(), static_cast<size_t>(tokens.size()), raw));
  check(OgaRequestAddTokens(request.handle.get(), raw));
}

bool request_flag(const Request& request, OgaResult* (*get)(const OgaRequest*, bool*)) {
  bool value = false;
  check(get(request.handle.get(), &value));
  return value;
}

Engine make_engine(const Model& model) {
  OgaEngine* engine = nullptr;
  {
    py::gil_scoped_release unlocked;  // loads the model's package again (see OgaCreateEngine)
    check(OgaCreateEngine(model.handle.get(), &engine));
  }
  return Engine{{}, EngineHandle(engine)};
}

void add_request(Engine& engine, const py::object& request) {
  OgaRequest* handle = request.cast<Request&>().handle.get();
  check(OgaEngineAddRequest(engine.handle.get(), handle));
  engine.added[handle] = request;
}

void remove_request(Engine& engine, const Request& request) {
  check(OgaEngineRemoveRequest(engine.handle.get(), request.handle.get()));
  engine.added.erase(request.handle.get());
}

// The Request the caller added that got tokens, or None when all is done.
py::object step(Engine& engine) {
  OgaRequest* ready = nullptr;
  {
    py::gil_scoped_release unlocked;
    check(OgaEngineStep(engine.handle.get(), &ready));
  }
  if (ready == nullptr) return py::none();
  const RequestHandle step_handle(ready);  // the Python object holds a handle of its own
  const auto it = engine.added.find(ready);
  return it != engine.added.end() ? it->second : py::none();
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<Request>(m, "Request")
      .def(py::init(&make_request), py::arg("params"), py::keep_alive<1, 2>())
      .def("add_tokens", &add_tokens, py::arg("tokens"))
      .def("has_unseen_tokens", [](const Request& r) { return request_flag(r, OgaRequestHasUnseenTokens); })
      .def("get_unseen_token",
           [](Request& r) {
             int32_t token = 0;
             check(OgaRequestGetUnseenToken(r.handle.get(), &token));
             return token;
           })
      .def("is_done", [](const Request& r) { return request_flag(r, OgaRequestIsDone); })
      .def("is_turn_complete", [](const Request& r) { return request_flag(r, OgaRequestIsTurnComplete); })
      .def("set_opaque_data", [](Request& r, py::object data) { r.opaque = std::move(data); }, py::arg("opaque_data"))
      .def("get_opaque_data", [](const Request& r) { return r.opaque; });
  py::class_<Engine>(m, "Engine")
      .def(py::init(&make_engine), py::arg("model"), py::keep_alive<1, 2>())
      .def("add_request", &add_request, py::arg("request"))
      .def("remove_request", &remove_request, py::arg("request"))
      .def("step", &step)
      .def("has_pending_requests", [](Engine& e) {
        bool pending = false;
        check(OgaEngineHasPendingRequests(e.handle.get(), &pending));
        return pending;
      });
}

}  // namespace onnx_genai::python
