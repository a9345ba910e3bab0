#include "ops/op.h"

namespace onnx_genai {

void register_control_flow_schemas(OpRegistry& registry) {
  // If: the condition must be known when planning (a graph input, which then keys the plan,
  // or a constant); the planner splices the taken branch's nodes into the plan, so there is no
  // kernel and no shape function here. Output dtypes follow the then-branch.
  registry.add_schema(OpSchema{
      .domain = "",
      .op_type = "If",
      .infer_types =
          [](TypeContext& ctx) {
            const Attribute* then_branch = ctx.node.attrs.find("then_branch");
            const Attribute* else_branch = ctx.node.attrs.find("else_branch");
            if (!then_branch || !then_branch->g || !else_branch || !else_branch->g) {
              return OG_ERROR(ctx.node.describe(), ": needs then_branch and else_branch subgraphs");
            }
            for (size_t i = 0; i < ctx.outputs.size() && i < then_branch->g->outputs.size(); ++i) {
              ctx.outputs[i] = then_branch->g->outputs[i]->dtype;
            }
            return Status::ok();
          },
      .infer_shapes = [](InferContext& ctx) { return ctx.fail("If is inlined by the planner, never shape-inferred"); },
      .value_inputs = {0},
  });
}

}  // namespace onnx_genai
