// Projection weights cut by output columns or input rows (tensor_parallel_weights.h).
#include "runtime/tensor_parallel_weights.h"

#include <cstring>
#include <string>

#include "ops/schema/quantized_matmul.h"
#include "runtime/graph_edit.h"

namespace onnx_genai {

namespace {

using P = MatMulNBitsParams;

bool is_matmul_nbits(const Node& node) { return node.op_type == "MatMulNBits" && node.domain == "com.microsoft"; }

Attribute int_attribute(int64_t value) { return Attribute{.kind = Attribute::Kind::kInt, .i = value}; }

// Input `slot` of `node` becomes a new constant holding `value` (the old one is released when
// nothing else reads it).
void replace_weight(Graph& graph, Node& node, size_t slot, Tensor value) {
  Value* old = node.inputs[slot];
  set_input(&node, slot, add_constant(graph, old->name + "/shard", std::move(value)));
  release_unread(graph, {old});
}

// The constant in `slot` seen as [rows, numel / rows] (scales and zero points may be flat).
Result<Tensor> as_rows(const Node& node, size_t slot, int64_t rows) {
  const Tensor& t = node.inputs[slot]->initializer;
  if (rows <= 0 || t.numel() % rows != 0) {
    return OG_ERROR(node.describe(), ": input ", slot, " of shape ", t.shape().to_string(), " does not hold ", rows,
                    " rows");
  }
  return t.reshaped(Shape{rows, t.numel() / rows});
}

// Packed 4-bit zero points [N, ceil(blocks / 2)] (low nibble first) cut to blocks [b0, b1).
Result<Tensor> keep_packed_nibbles(const Tensor& packed, int64_t rows, int64_t b0, int64_t b1) {
  const int64_t in_row = packed.numel() / rows;
  const int64_t kept = b1 - b0;
  OG_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DType::kU8, Shape{rows, (kept + 1) / 2}));
  std::memset(out.raw(), 0, static_cast<size_t>(out.nbytes()));
  const auto* src = packed.data<uint8_t>();
  auto* dst = out.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t code = (src[r * in_row + b / 2] >> (4 * (b % 2))) & 0xF;
      const int64_t j = b - b0;
      dst[r * ((kept + 1) / 2) + j / 2] |= static_cast<uint8_t>(code << (4 * (j % 2)));
    }
  }
  return out;
}

Status keep_nbits_columns(Graph& graph, Node& node, const IndexRanges& ranges, int64_t kept) {
  const int64_t n = projection_outputs(node);
  for (size_t slot : {size_t{P::kB}, size_t{P::kScales}, size_t{P::kZeroPoints}, size_t{P::kBias}}) {
    if (node.input(slot) == nullptr) continue;
    OG_ASSIGN_OR_RETURN(Tensor rows, as_rows(node, slot, n));
    OG_ASSIGN_OR_RETURN(Tensor cut, keep_along_axis(rows, 0, ranges));
    if (slot == P::kB) {
      const Shape& b = node.inputs[slot]->initializer.shape();
      OG_ASSIGN_OR_RETURN(cut, cut.reshaped(Shape{kept, b[1], b[2]}));
    }
    replace_weight(graph, node, slot, std::move(cut));
  }
  node.attrs.set("N", int_attribute(kept));
  return Status::ok();
}

Status keep_nbits_rows(Graph& graph, Node& node, int64_t begin, int64_t end) {
  const int64_t n = projection_outputs(node), k = projection_inputs(node);
  const int64_t block = node.attrs.get_int("block_size", 0), bits = node.attrs.get_int("bits", 4);
  if (block <= 0 || k % block != 0 || begin % block != 0 || end % block != 0) {
    return OG_ERROR(node.describe(), ": rows [", begin, ", ", end, ") of K = ", k,
                    " do not fall on its quantization blocks of ", block, " (each rank must keep whole blocks)");
  }
  if (node.input(P::kBias) != nullptr) {
    return OG_ERROR(node.describe(), ": has a bias; split by K, every rank would add it before the sum");
  }
  if (node.input(P::kGIdx) != nullptr) return OG_ERROR(node.describe(), ": has g_idx, which a K split cannot keep");
  const IndexRanges blocks{{begin / block, end / block}};
  OG_ASSIGN_OR_RETURN(Tensor b, keep_along_axis(node.inputs[P::kB]->initializer, 1, blocks));
  replace_weight(graph, node, P::kB, std::move(b));
  OG_ASSIGN_OR_RETURN(Tensor scales, as_rows(node, P::kScales, n));
  OG_ASSIGN_OR_RETURN(scales, keep_along_axis(scales, 1, blocks));
  replace_weight(graph, node, P::kScales, std::move(scales));
  if (node.input(P::kZeroPoints) != nullptr) {
    OG_ASSIGN_OR_RETURN(Tensor zp, as_rows(node, P::kZeroPoints, n));
    const bool nibbles = zp.dtype() == DType::kU8 && bits == 4;
    if (nibbles) {
      OG_ASSIGN_OR_RETURN(zp, keep_packed_nibbles(zp, n, blocks[0].first, blocks[0].second));
    } else if (zp.dtype() == DType::kU8 && bits != 8) {
      return OG_ERROR(node.describe(), ": packed ", bits, "-bit zero points cannot be cut by K");
    } else {
      OG_ASSIGN_OR_RETURN(zp, keep_along_axis(zp, 1, blocks));
    }
    replace_weight(graph, node, P::kZeroPoints, std::move(zp));
  }
  node.attrs.set("K", int_attribute(end - begin));
  return Status::ok();
}

}  // namespace

bool is_projection(const Node* node) {
  if (node == nullptr || node->inputs.empty() || node->outputs.empty() || node->outputs[0] == nullptr) return false;
  if (is_matmul_nbits(*node)) {
    const Value* b = node->input(P::kB);
    return b != nullptr && b->is_constant() && b->initializer.rank() == 3 && node->input(P::kScales) != nullptr &&
           node->input(P::kScales)->is_constant();
  }
  if (node->op_type != "MatMul" || !node->domain.empty() || node->inputs.size() != 2) return false;
  const Value* w = node->inputs[1];
  return w != nullptr && w->is_constant() && w->initializer.rank() == 2;
}

int64_t projection_outputs(const Node& node) {
  return is_matmul_nbits(node) ? node.attrs.get_int("N", 0) : node.inputs[1]->initializer.shape()[1];
}

int64_t projection_inputs(const Node& node) {
  return is_matmul_nbits(node) ? node.attrs.get_int("K", 0) : node.inputs[1]->initializer.shape()[0];
}

Result<Tensor> keep_along_axis(const Tensor& t, int axis, const IndexRanges& ranges) {
  if (dtype_bits(t.dtype()) % 8 != 0 || axis < 0 || axis >= t.rank()) {
    return OG_ERROR("cannot cut a ", dtype_name(t.dtype()), " tensor of shape ", t.shape().to_string(), " along axis ", axis);
  }
  const int64_t dim = t.shape()[axis];
  int64_t kept = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < 0 || end > dim || begin > end) {
      return OG_ERROR("range [", begin, ", ", end, ") is outside dim ", axis, " of ", t.shape().to_string());
    }
    kept += end - begin;
  }
  std::vector<int64_t> dims = t.shape().dims();
  dims[static_cast<size_t>(axis)] = kept;
  OG_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(t.dtype(), Shape(std::move(dims))));
  const int64_t outer = t.shape().numel(0, axis);
  const auto item = static_cast<size_t>(dtype_storage_bytes(t.dtype(), t.shape().numel(axis + 1, t.rank())));
  const auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto& [begin, end] : ranges) {
      const size_t run = item * static_cast<size_t>(end - begin);
      std::memcpy(dst, src + (static_cast<size_t>(o * dim + begin)) * item, run);
      dst += run;
    }
  }
  return out;
}

Status keep_output_columns(Graph& graph, Node& node, const IndexRanges& ranges) {
  int64_t kept = 0;
  for (const auto& [begin, end] : ranges) kept += end - begin;
  if (is_matmul_nbits(node)) return keep_nbits_columns(graph, node, ranges, kept);
  OG_ASSIGN_OR_RETURN(Tensor w, keep_along_axis(node.inputs[1]->initializer, 1, ranges));
  replace_weight(graph, node, 1, std::move(w));
  return Status::ok();
}

Status keep_input_rows(Graph& graph, Node& node, int64_t begin, int64_t end) {
  if (is_matmul_nbits(node)) return keep_nbits_rows(graph, node, begin, end);
  OG_ASSIGN_OR_RETURN(Tensor w, keep_along_axis(node.inputs[1]->initializer, 0, {{begin, end}}));
  replace_weight(graph, node, 1, std::move(w));
  return Status::ok();
}

}  // namespace onnx_genai
