// The attention family's CPU kernels, one file each; registered by ops/cpu/attention.cc.
#pragma once

#include <memory>

#include "ops/op.h"

namespace onnx_genai {

std::unique_ptr<OpKernel> make_group_query_attention_kernel(const Node& node);
std::unique_ptr<OpKernel> make_multi_head_attention_kernel(const Node& node);
std::unique_ptr<OpKernel> make_onnx_attention_kernel(const Node& node);

}  // namespace onnx_genai
