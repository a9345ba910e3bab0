// Gemm's attributes and the geometry they give A, B and C, shared by the CPU and CUDA kernels so
// both check the same things in the same order with the same messages.
#pragma once

#include "ops/op.h"

namespace onnx_genai {

struct GemmParams {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  int64_t m = 0, n = 0, k = 0;
  bool has_c = false;             // C given and beta != 0
  int64_t c_row_stride = 0, c_col_stride = 0;  // C's element strides over [M, N], 0 along broadcast dims

  explicit GemmParams(const Node& node)
      : trans_a(node.attrs.get_int("transA", 0) != 0),
        trans_b(node.attrs.get_int("transB", 0) != 0),
        alpha(node.attrs.get_float("alpha", 1.0f)),
        beta(node.attrs.get_float("beta", 1.0f)) {}

  // M, N, K from A and B (2-D, inner dimensions equal) and how C broadcasts to [M, N].
  Status resolve(const PrepareContext& ctx) {
    const Shape& a = ctx.input(0).shape;
    const Shape& b = ctx.input(1).shape;
    if (a.rank() != 2 || b.rank() != 2) return ctx.fail("A and B must be 2-D");
    m = trans_a ? a[1] : a[0];
    k = trans_a ? a[0] : a[1];
    n = trans_b ? b[0] : b[1];
    if ((trans_b ? b[1] : b[0]) != k) return ctx.fail("inner dimensions differ");
    has_c = ctx.has_input(2) && beta != 0.0f;
    if (!has_c) return Status::ok();
    const Shape& c = ctx.input(2).shape;
    const int64_t c_cols = c.rank() >= 1 ? c[c.rank() - 1] : 1;
    const int64_t c_rows = c.rank() == 2 ? c[0] : 1;
    if (c.rank() > 2 || (c_cols != 1 && c_cols != n) || (c_rows != 1 && c_rows != m)) {
      return ctx.fail("C ", c.to_string(), " does not broadcast to [", m, ",", n, "]");
    }
    c_row_stride = c_rows == 1 ? 0 : c_cols;
    c_col_stride = c_cols == 1 ? 0 : 1;
    return Status::ok();
  }
};

}  // namespace onnx_genai
