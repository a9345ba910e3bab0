// Shapes of MatMul (numpy matmul semantics) and Gemm (2-D, optional transposes and bias).
#include "ops/broadcast.h"
#include "ops/op.h"

namespace onnx_genai {

namespace {

// numpy matmul: a 1-D A is a row [1, K], a 1-D B a column [K, 1], and the promoted dims are
// dropped again from the output; leading (batch) dims broadcast.
Status infer_matmul(InferContext& ctx) {
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  if (a.rank() < 1 || b.rank() < 1) return ctx.fail("inputs must have rank >= 1, got ", a.to_string(), " and ", b.to_string());
  const int64_t ka = a[a.rank() - 1];
  const int64_t kb = b.rank() == 1 ? b[0] : b[b.rank() - 2];
  if (ka != kb) return ctx.fail("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  const Shape batch_a(std::vector<int64_t>(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2)));
  const Shape batch_b(std::vector<int64_t>(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2)));
  const Shape batches[] = {batch_a, batch_b};
  Result<Shape> batch = broadcast_shapes(batches);
  if (!batch.is_ok()) return ctx.fail("batch dimensions do not broadcast: ", a.to_string(), " x ", b.to_string());
  std::vector<int64_t> out = batch.value().dims();
  if (a.rank() >= 2) out.push_back(a[a.rank() - 2]);
  if (b.rank() >= 2) out.push_back(b[b.rank() - 1]);
  ctx.set_output(0, ctx.input(0).dtype, Shape(std::move(out)));
  return Status::ok();
}

// Y[M, N] = alpha * op(A) op(B) + beta * C, with C unidirectionally broadcast to [M, N].
Status infer_gemm(InferContext& ctx) {
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.fail("A and B must be 2-D, got ", a.to_string(), " and ", b.to_string());
  const bool trans_a = ctx.attrs().get_int("transA", 0) != 0;
  const bool trans_b = ctx.attrs().get_int("transB", 0) != 0;
  const int64_t m = trans_a ? a[1] : a[0];
  const int64_t k = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  const int64_t n = trans_b ? b[0] : b[1];
  if (k != kb) return ctx.fail("inner dimensions differ: op(A) is [", m, ",", k, "], op(B) is [", kb, ",", n, "]");
  if (ctx.has_input(2)) {
    const Shape& c = ctx.shape(2);
    const bool fits = c.rank() <= 2 && (c.rank() < 1 || c[c.rank() - 1] == 1 || c[c.rank() - 1] == n) &&
                      (c.rank() < 2 || c[0] == 1 || c[0] == m);
    if (!fits) return ctx.fail("C ", c.to_string(), " does not broadcast to [", m, ",", n, "]");
  } else if (ctx.opset() < 11) {
    return ctx.fail("input C is required before opset 11");
  }
  ctx.set_output(0, ctx.input(0).dtype, Shape{m, n});
  return Status::ok();
}

}  // namespace

void register_matmul_schemas(OpRegistry& registry) {
  registry.add_schema(OpSchema{.domain = "", .op_type = "MatMul", .infer_shapes = infer_matmul});
  registry.add_schema(OpSchema{.domain = "", .op_type = "Gemm", .infer_shapes = infer_gemm});
}

}  // namespace onnx_genai
