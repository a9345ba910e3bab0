#include "ops/broadcast.h"

#include <algorithm>

namespace onnx_genai {

Result<Shape> broadcast_shapes(std::span<const Shape> shapes) {
  int rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.rank());
  std::vector<int64_t> out(static_cast<size_t>(rank), 1);
  for (const Shape& s : shapes) {
    const int offset = rank - s.rank();
    for (int d = 0; d < s.rank(); ++d) {
      int64_t& o = out[static_cast<size_t>(offset + d)];
      const int64_t v = s[d];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      return OG_ERROR("shapes ", shapes[0].to_string(), " and ", s.to_string(), " cannot be broadcast (dim ",
                      offset + d, ": ", o, " vs ", v, ")");
    }
  }
  return Shape(std::move(out));
}

BroadcastPlan BroadcastPlan::make(const Shape& output, std::span<const Shape> inputs) {
  BroadcastPlan plan;
  plan.num_inputs = static_cast<int>(inputs.size());
  const int rank = output.rank();
  // Full-rank strides per input, 0 where the input is broadcast.
  std::vector<std::vector<int64_t>> full(inputs.size(), std::vector<int64_t>(static_cast<size_t>(rank), 0));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int offset = rank - inputs[i].rank();
    int64_t stride = 1;
    for (int d = inputs[i].rank() - 1; d >= 0; --d) {
      if (inputs[i][d] != 1) full[i][static_cast<size_t>(offset + d)] = stride;
      stride *= inputs[i][d];
    }
  }
  // Merge adjacent output dims (d-1, d) when, for every input, stride[d-1] == stride[d] * dim[d].
  for (int d = 0; d < rank; ++d) {
    const int64_t n = output[d];
    if (n == 1) continue;  // size-1 dims never move any offset
    bool merge = !plan.dims.empty();
    for (size_t i = 0; merge && i < inputs.size(); ++i) {
      merge = plan.strides[i].back() == full[i][static_cast<size_t>(d)] * n;
    }
    if (merge) {
      plan.dims.back() *= n;
      for (size_t i = 0; i < inputs.size(); ++i) plan.strides[i].back() = full[i][static_cast<size_t>(d)];
    } else {
      plan.dims.push_back(n);
      for (size_t i = 0; i < inputs.size(); ++i) plan.strides[i].push_back(full[i][static_cast<size_t>(d)]);
    }
  }
  if (plan.dims.empty()) {  // scalar output
    plan.dims.push_back(1);
    for (size_t i = 0; i < inputs.size(); ++i) plan.strides[i].push_back(0);
  }
  return plan;
}

int64_t BroadcastPlan::rows() const {
  int64_t r = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) r *= dims[d];
  return r;
}

}  // namespace onnx_genai
