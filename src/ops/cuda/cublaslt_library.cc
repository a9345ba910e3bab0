#include "ops/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace onnx_genai::cuda {
namespace {

// The soname of the toolkit we compiled against, then the toolkit's own folder (for a process
// whose library path does not name it).
const std::string kSoname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
const std::string kToolkitPath = std::string(OG_CUDA_LIBRARY_DIR) + "/" + kSoname;

template <typename Fn>
Status resolve(void* library, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (out == nullptr) return OG_ERROR(kSoname, " has no symbol ", symbol);
  return Status::ok();
}

Result<CublasLtLibrary> open_library() {
  void* library = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = dlopen(kToolkitPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return OG_ERROR("cannot open ", kSoname, " (cuBLASLt, for MatMul on CUDA): ", reason ? reason : "not found");
  }
  // Kept open for the life of the process: handles and plans may be destroyed at exit.
  CublasLtLibrary lt;
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtCreate", lt.create));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtDestroy", lt.destroy));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtGetStatusName", lt.status_name));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtGetStatusString", lt.status_string));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmul", lt.matmul));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulDescInit_internal", lt.matmul_desc_init));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulDescSetAttribute", lt.matmul_desc_set_attribute));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatrixLayoutInit_internal", lt.matrix_layout_init));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatrixLayoutSetAttribute", lt.matrix_layout_set_attribute));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulPreferenceInit_internal", lt.preference_init));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulPreferenceSetAttribute", lt.preference_set_attribute));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulAlgoGetHeuristic", lt.algo_get_heuristic));
  OG_RETURN_IF_ERROR(resolve(library, "cublasLtMatmulAlgoConfigGetAttribute", lt.algo_config_get_attribute));
  return lt;
}

}  // namespace

Result<const CublasLtLibrary*> cublas_lt_library() {
  static std::once_flag once;
  static Result<CublasLtLibrary> loaded = OG_ERROR("cuBLASLt not opened");
  std::call_once(once, [] { loaded = open_library(); });
  if (!loaded.is_ok()) return loaded.status();
  return &loaded.value();
}

}  // namespace onnx_genai::cuda
