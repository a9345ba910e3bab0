// Parameters of data-movement ops that both shape inference (src/ops/schema/) and the kernels
// (src/ops/cpu/, later src/ops/cuda/) derive from attributes and plan-time input values, so the
// two can never disagree about them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace onnx_genai {

// Schema building blocks shared by the data-movement families.
OpSchema data_schema(std::string op_type, std::function<Status(InferContext&)> infer_shapes,
                     std::vector<int> value_inputs = {}, int alias_input = -1,
                     std::function<Status(TypeContext&)> infer_types = nullptr);
Status int64_output_types(TypeContext& ctx);  // every output is int64 (Shape, Size)
// The int64 values of value-input `input`, or an error naming `what` when it is unknown.
Result<std::vector<int64_t>> value_of(const InferContext& ctx, int input, const char* what);

// Shape (opset >= 15 start/end attributes): the output is dims[begin, end) of the input.
struct ShapeRange {
  int64_t begin = 0, end = 0;
};
ShapeRange resolve_shape_range(const Attributes& attrs, int opset, int rank);

// Slice along every dim of the input: element i of output dim d reads input index
// start[d] + i * step[d]. Dims not sliced get start 0, step 1, count = the input dim.
struct SliceParams {
  std::vector<int64_t> start, step, count;
};
// `starts`..`steps` are the opset >= 10 inputs 1..4 (null when omitted); before opset 10 the
// starts/ends/axes attributes are used instead.
Result<SliceParams> resolve_slice(const Shape& input, const Attributes& attrs, int opset, const Tensor* starts,
                                  const Tensor* ends, const Tensor* axes, const Tensor* steps);

// Transpose: the perm attribute, or the reversed dims when absent (validated by shape inference).
std::vector<int64_t> resolve_perm(const Attributes& attrs, int rank);

// Concat (`concat`) or Split as copies of 2-D pieces: part i (Concat's input i, Split's output
// i) is an [outer, part_row] matrix at column `column` of the joined tensor (Concat's output,
// Split's input) seen as [outer, whole_row]; element units.
struct AxisPiece {
  int64_t outer, part_row, whole_row, column;
};
Result<std::vector<AxisPiece>> axis_pieces(const PrepareContext& ctx, bool concat);

// Constant: the node's value as a tensor (value, value_float(s), value_int(s) attributes).
Result<Tensor> constant_value(const Attributes& attrs);

// Pad: elements added before and after each dim (negative values crop).
struct PadParams {
  std::vector<int64_t> begin, end;
};
// `pads` / `axes` are inputs 1 and 3 from opset 11 (null when omitted); before, the pads attribute.
Result<PadParams> resolve_pads(const Shape& input, const Attributes& attrs, int opset, const Tensor* pads,
                               const Tensor* axes);

}  // namespace onnx_genai
