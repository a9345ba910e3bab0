// Builds small ONNX models in tests with the protobuf API, so bad-input and runtime tests can
// make exactly the model they need (and corrupt it on purpose).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace onnx_genai::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17) {
    model_.set_ir_version(8);
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

  // dims: >= 0 fixed, -1 symbolic named by `symbols[i]`.
  ModelBuilder& input(const std::string& name, int elem_type, std::vector<int64_t> dims,
                      std::vector<std::string> symbols = {}) {
    fill_value_info(graph().add_input(), name, elem_type, dims, symbols);
    return *this;
  }
  ModelBuilder& output(const std::string& name, int elem_type) {
    auto* vi = graph().add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(graph().node_size()) : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }
  onnx::TensorProto& initializer_f32(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    return *t;
  }
  onnx::TensorProto& initializer_i64(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *t;
  }
  std::string bytes() const { return model_.SerializeAsString(); }

  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

 private:
  static void fill_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                              const std::vector<int64_t>& dims, const std::vector<std::string>& symbols) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->add_dim();
      if (dims[i] >= 0) d->set_dim_value(dims[i]);
      else if (i < symbols.size()) d->set_dim_param(symbols[i]);
    }
  }
  onnx::ModelProto model_;
};

}  // namespace onnx_genai::testing
