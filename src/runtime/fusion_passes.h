// Load-time fusions that cut the kernels a decoder layer launches on an accelerator, where a
// decode step is a chain of few-microsecond kernels and every launch saved counts.
//
// When they run: only in sessions whose device runs its own kernels (ExecutionDevice::
// kernel_device() is not the CPU), and each pattern only where that device has a kernel for the
// fused node. CPU sessions, and stand-in devices that run the CPU kernels, keep the graph as the
// model wrote it, so their numbers never change: a fused node rounds fewer times than the nodes
// it replaces.
//
// The passes themselves take the device whose kernels decide, so tests run them for the CPU
// (which has every fused kernel as the reference) on a graph without a GPU.
#pragma once

#include "graph/graph.h"
#include "onnx_genai/device.h"
#include "onnx_genai/status.h"

namespace onnx_genai {

// MatMulNBits (no bias) -> Add(constant [N]) (either operand order), the product read by nothing
// else: the constant becomes the MatMulNBits bias (input 5) and the Add goes. Returns the number
// of Adds removed.
int fuse_matmul_nbits_bias(Graph& graph, DeviceType kernels);

// g = MatMulNBits(A, Wg), u = MatMulNBits(A, Wu) with equal attributes (4 or 8 bits), constant
// weights and the same zero-point form, and Y = Mul(Mul(g, Sigmoid(g)), u) (any operand order),
// the intermediates read by nothing else: one onnx_genai MatMulNBitsSwiGLU node
// (ops/schema/fused_matmul.h) whose weights are new initializers interleaving Wg's and Wu's rows.
// Returns the number of MLPs fused; an error only when the new weights cannot be allocated.
Result<int> fuse_matmul_nbits_swiglu(Graph& graph, DeviceType kernels);

// Two or more projections of one activation A by constant weights that differ only in their
// output width N_i: MatMulNBits(A, W_i) quantised alike (K, bits, block_size, accuracy_level,
// the same optional inputs in the same form, bias included), or MatMul(A, W_i) with W_i [K, N_i]
// of one dtype. They become one node of their op over new initializers joining the weights along
// N (the N-major rows of B, scales, zero points and bias; the columns of W), and a Split (axis
// -1) of its product into the original output values, whose readers stay as they were: a decode
// step streams the q/k/v (or a gate/up pair without SwiGLU) weights in one GEMV. Re-sorts the
// graph when it fuses. Returns the number of groups joined; an error only when the new weights
// cannot be allocated.
Result<int> fuse_sibling_projections(Graph& graph, DeviceType kernels);

// An RMS norm whose normalised output y only one MatMulNBits or MatMulNBitsSwiGLU (4 or 8 bits,
// no g_idx) reads, as A: SkipSimplifiedLayerNormalization(x, skip, gamma) with its mean and
// inv_std_var unread, or SimplifiedLayerNormalization / RMSNormalization(x, gamma) over the last
// axis with inv_std_var unread; no norm bias; gamma [K]; the product's other inputs computed by
// no node. The norm node becomes one onnx_genai RmsNormMatMulNBits (ops/schema/fused_matmul.h)
// where it stands, producing the product's output and the Skip norm's sum where that is read or
// a graph output (y never is one: it is read only by the product). Returns the number fused.
int fuse_norm_matmul(Graph& graph, DeviceType kernels);

// All four in that order (fusion_passes.cc says why), then removes the nodes they replaced.
// Returns the number of patterns fused.
Result<int> fuse_for_device(Graph& graph, DeviceType kernels);

}  // namespace onnx_genai
