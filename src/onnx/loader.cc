#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <set>

#include "onnx/mapped_file.h"
#include "onnx/model.h"
#include "onnx/tensor_proto.h"
#include "onnx/wire_split.h"

namespace onnx_genai {

namespace {

// Input counts that changed after opset 17, the newest Debian 12's libonnx (ONNX 1.12) knows:
// asked about a newer opset, the library answers with the op's last schema it has, which would
// turn down, say, the axes input every Reduce* op takes from opset 18 (torch.onnx's dynamo
// exporter writes opset 18+). Only ops whose inputs changed are listed; the rest kept theirs.
struct NewerArity {
  const char* op_type;
  int since;  // first opset with these counts
  int min_inputs, max_inputs;
};
constexpr NewerArity kNewerArities[] = {
    {"ReduceMax", 18, 1, 2},    {"ReduceMin", 18, 1, 2},       {"ReduceMean", 18, 1, 2},
    {"ReduceProd", 18, 1, 2},   {"ReduceL1", 18, 1, 2},        {"ReduceL2", 18, 1, 2},
    {"ReduceLogSum", 18, 1, 2}, {"ReduceLogSumExp", 18, 1, 2}, {"ReduceSumSquare", 18, 1, 2},
    {"Pad", 18, 2, 4},          {"DFT", 20, 1, 3},
};

const NewerArity* newer_arity(const std::string& op_type, int opset) {
  for (const NewerArity& a : kNewerArities) {
    if (op_type == a.op_type && opset >= a.since) return &a;
  }
  return nullptr;
}

// Standard ONNX ops are checked against ONNX's own operator schemas (libonnx) for input and
// output counts and omitted required inputs, so no kernel ever sees a malformed arity.
// Ops ONNX does not know at this opset (contrib ops, newer opsets) are left to our registry.
Status check_arity(const onnx::NodeProto& n, const std::string& domain, int opset, const std::string& what) {
  if (!domain.empty()) return Status::ok();
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, "");
  if (schema == nullptr) return Status::ok();
  // Ops listed in kNewerArities: the library's schema is of an older version, so only its output
  // count and the first input (required in every version listed) are taken from it.
  const NewerArity* newer = newer_arity(n.op_type(), opset);
  const int min_inputs = newer != nullptr ? newer->min_inputs : schema->min_input();
  const int max_inputs = newer != nullptr ? newer->max_inputs : schema->max_input();
  if (n.input_size() < min_inputs || n.input_size() > max_inputs) {
    return OG_ERROR(what, " has ", n.input_size(), " inputs; opset ", opset, " allows ", min_inputs, " to ", max_inputs);
  }
  if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output()) {
    return OG_ERROR(what, " has ", n.output_size(), " outputs; opset ", opset, " allows ", schema->min_output(), " to ",
                    schema->max_output());
  }
  const auto& formals = schema->inputs();
  const int checked = newer != nullptr ? std::min(n.input_size(), 1) : n.input_size();
  for (int i = 0; i < checked && !formals.empty(); ++i) {
    const auto& formal = formals[std::min(static_cast<size_t>(i), formals.size() - 1)];
    if (n.input(i).empty() && formal.GetOption() != onnx::OpSchema::Optional) {
      return OG_ERROR(what, " omits required input ", i, " ('", formal.GetName(), "')");
    }
  }
  return Status::ok();
}

void read_type(const onnx::TypeProto& type, Value* v) {
  if (!type.has_tensor_type()) return;
  const auto& tt = type.tensor_type();
  if (dtype_is_known(tt.elem_type())) v->dtype = static_cast<DType>(tt.elem_type());
  if (!tt.has_shape()) return;
  std::vector<Dim> dims;
  for (const auto& d : tt.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    else if (d.has_dim_param()) dim.symbol = d.dim_param();
    dims.push_back(std::move(dim));
  }
  v->dims = std::move(dims);
}

class GraphConverter {
 public:
  GraphConverter(TensorSource& source, const std::map<std::string, int>& opsets) : source_(source), opsets_(opsets) {}

  // `raw_spans` (top-level graph only) says where each initializer's raw_data was cut out.
  // `outer_refs` collects values of enclosing graphs that this graph (or its subgraphs) reads.
  Result<std::shared_ptr<Graph>> convert(const onnx::GraphProto& proto, const Graph* outer,
                                         const std::vector<std::optional<ByteSpan>>* raw_spans,
                                         std::set<Value*>& outer_refs) {
    auto graph = std::make_shared<Graph>();
    graph->name = proto.name();
    graph->opset_imports = opsets_;
    std::set<std::string> local;
    for (int i = 0; i < proto.initializer_size(); ++i) {
      const auto& init = proto.initializer(i);
      std::optional<ByteSpan> span;
      if (raw_spans && static_cast<size_t>(i) < raw_spans->size()) span = (*raw_spans)[static_cast<size_t>(i)];
      OG_ASSIGN_OR_RETURN(Tensor t, source_.to_tensor(init, span));
      Value* v = graph->add_value(init.name());
      v->dtype = t.dtype();
      v->initializer = std::move(t);
      local.insert(init.name());
    }
    for (const auto& in : proto.input()) {
      Value* v = graph->add_value(in.name());
      local.insert(in.name());
      if (v->is_constant()) continue;  // IR < 4 lists initializers as inputs too
      v->is_graph_input = true;
      read_type(in.type(), v);
      graph->inputs.push_back(v);
    }
    for (const auto& n : proto.node()) {
      for (const auto& out : n.output()) local.insert(out);
    }
    for (const auto& vi : proto.value_info()) {
      if (local.count(vi.name())) read_type(vi.type(), graph->add_value(vi.name()));
    }
    for (const auto& n : proto.node()) {
      OG_RETURN_IF_ERROR(convert_node(n, *graph, outer, local, outer_refs));
    }
    for (const auto& out : proto.output()) {
      Value* v = local.count(out.name()) || outer == nullptr ? graph->add_value(out.name()) : outer->resolve(out.name());
      if (v == nullptr) return OG_ERROR("graph output '", out.name(), "' is not produced by any node");
      if (!local.count(out.name())) outer_refs.insert(v);
      if (local.count(out.name())) read_type(out.type(), v);
      graph->outputs.push_back(v);
    }
    OG_RETURN_IF_ERROR(graph->finalize(outer));
    return graph;
  }

 private:
  Status convert_node(const onnx::NodeProto& n, Graph& graph, const Graph* outer, const std::set<std::string>& local,
                      std::set<Value*>& outer_refs) {
    auto node = std::make_unique<Node>();
    node->name = n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name();
    node->op_type = n.op_type();
    node->domain = canonical_domain(n.domain());
    auto opset = opsets_.find(node->domain);
    if (opset == opsets_.end()) {
      return OG_ERROR(node->describe(), " uses domain '", n.domain(), "', which the model does not import");
    }
    node->opset = opset->second;
    OG_RETURN_IF_ERROR(check_arity(n, node->domain, node->opset, node->describe()));
    for (const auto& name : n.input()) {
      node->inputs.push_back(resolve_input(name, graph, outer, local, outer_refs));
      if (!name.empty() && node->inputs.back() == nullptr) {
        return OG_ERROR(node->describe(), " reads '", name, "', which no node, input or initializer provides");
      }
    }
    for (const auto& name : n.output()) node->outputs.push_back(name.empty() ? nullptr : graph.add_value(name));
    std::set<Value*> sub_refs;
    for (const auto& a : n.attribute()) {
      OG_ASSIGN_OR_RETURN(Attribute attr, convert_attribute(a, *node, graph, sub_refs));
      node->attrs.set(a.name(), std::move(attr));
    }
    for (Value* ref : sub_refs) {
      node->implicit_inputs.push_back(ref);
      if (!local.count(ref->name)) outer_refs.insert(ref);  // from further out: pass it up
    }
    graph.add_node(std::move(node));
    return Status::ok();
  }

  static Value* resolve_input(const std::string& name, Graph& graph, const Graph* outer,
                              const std::set<std::string>& local, std::set<Value*>& outer_refs) {
    if (name.empty()) return nullptr;
    if (local.count(name)) return graph.add_value(name);
    Value* v = outer ? outer->resolve(name) : nullptr;
    if (v) outer_refs.insert(v);
    return v;
  }

  Result<Attribute> convert_attribute(const onnx::AttributeProto& a, const Node& node, const Graph& graph,
                                      std::set<Value*>& sub_refs) {
    Attribute out;
    using A = onnx::AttributeProto;
    switch (a.type()) {
      case A::INT: out.kind = Attribute::Kind::kInt; out.i = a.i(); break;
      case A::FLOAT: out.kind = Attribute::Kind::kFloat; out.f = a.f(); break;
      case A::STRING: out.kind = Attribute::Kind::kString; out.s = a.s(); break;
      case A::INTS: out.kind = Attribute::Kind::kInts; out.ints.assign(a.ints().begin(), a.ints().end()); break;
      case A::FLOATS: out.kind = Attribute::Kind::kFloats; out.floats.assign(a.floats().begin(), a.floats().end()); break;
      case A::STRINGS: out.kind = Attribute::Kind::kStrings; out.strings.assign(a.strings().begin(), a.strings().end()); break;
      case A::TENSOR: {
        out.kind = Attribute::Kind::kTensor;
        auto t = source_.to_tensor(a.t());
        if (!t.is_ok()) return t.status().with_context(node.describe() + " attribute '" + a.name() + "'");
        out.t = std::move(t).value();
        break;
      }
      case A::GRAPH: {
        out.kind = Attribute::Kind::kGraph;
        auto g = convert(a.g(), &graph, nullptr, sub_refs);
        if (!g.is_ok()) return g.status().with_context(node.describe() + " subgraph '" + a.name() + "'");
        out.g = std::move(g).value();
        break;
      }
      default:
        return OG_ERROR(node.describe(), ": attribute '", a.name(), "' has unsupported type ", static_cast<int>(a.type()));
    }
    return out;
  }

  TensorSource& source_;
  const std::map<std::string, int>& opsets_;
};

Result<std::shared_ptr<Model>> load_model(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                                          const std::string& base_dir, const std::string& name) {
  OG_ASSIGN_OR_RETURN(SplitModel split, split_initializer_payloads(data, size));
  onnx::ModelProto proto;
  if (!proto.ParseFromString(split.stripped)) return OG_ERROR("not a valid ONNX protobuf");
  if (!proto.has_graph()) return OG_ERROR("the model has no graph");
  auto model = std::make_shared<Model>();
  model->path = name;
  model->ir_version = proto.ir_version();
  model->producer_name = proto.producer_name();
  model->producer_version = proto.producer_version();
  for (const auto& kv : proto.metadata_props()) model->metadata[kv.key()] = kv.value();
  std::map<std::string, int> opsets;
  for (const auto& imp : proto.opset_import()) opsets[canonical_domain(imp.domain())] = static_cast<int>(imp.version());
  if (opsets.empty()) opsets[""] = 1;  // IR v1-v2 models had no opset_import

  TensorSource source(base_dir, data, std::move(owner), &model->stats);
  GraphConverter converter(source, opsets);
  std::set<Value*> outer_refs;
  OG_ASSIGN_OR_RETURN(model->graph, converter.convert(proto.graph(), nullptr, &split.raw_data, outer_refs));
  return model;
}

}  // namespace

Result<std::shared_ptr<Model>> load_onnx_model_from_memory(const uint8_t* data, size_t size,
                                                           std::shared_ptr<const void> owner,
                                                           const std::string& base_dir, const std::string& name) {
  auto model = load_model(data, size, std::move(owner), base_dir, name);
  if (!model.is_ok()) return model.status().with_context("loading '" + name + "'");
  return model;
}

Result<std::shared_ptr<Model>> load_onnx_model(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file.is_ok()) return file.status().with_context("loading model");
  std::shared_ptr<MappedFile> mapped = std::move(file).value();
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  const uint8_t* bytes = mapped->data();
  const size_t size = mapped->size();
  return load_onnx_model_from_memory(bytes, size, std::move(mapped), base_dir.empty() ? "." : base_dir, path);
}

}  // namespace onnx_genai
