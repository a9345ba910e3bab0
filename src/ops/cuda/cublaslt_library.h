// cuBLASLt, opened at the first product planned on a GPU rather than linked. Linked, the loader
// maps and relocates its 540 MB at every process start (0.4 s on the CI machine) whether or not
// a GPU product ever runs: each CLI command and each test process paid it.
#pragma once

#include <cublasLt.h>

#include "onnx_genai/status.h"

namespace onnx_genai::cuda {

// The cuBLASLt entry points MatMul / Gemm use, resolved from the shared library.
struct CublasLtLibrary {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetStatusName) status_name = nullptr;
  decltype(&::cublasLtGetStatusString) status_string = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulDescInit_internal) matmul_desc_init = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutInit_internal) matrix_layout_init = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceInit_internal) preference_init = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulAlgoConfigGetAttribute) algo_config_get_attribute = nullptr;
};

// Opens the library on the first call; later calls return the same table, or the same error
// (naming the library and dlopen's reason).
Result<const CublasLtLibrary*> cublas_lt_library();

}  // namespace onnx_genai::cuda
