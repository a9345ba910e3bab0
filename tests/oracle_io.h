// Runs models in ONNX Runtime (tests/oracle/ort_run.mjs on onnxruntime-node) from C++ tests, so
// our Session's outputs can be compared with an independent implementation.
//
//   auto ort = run_onnx_runtime("model.onnx", {{"input_ids", ids}});
//   ASSERT_TRUE(ort.is_ok()) << ort.status().message();   // fails, never skips, without Node/ORT
//
// Many models at once, in one Node process (inputs already written with write_tensor_dir):
//   auto ort = run_onnx_runtime_batch({{"a.onnx", "a_in", "a_out"}, ...}, scratch);
//   // (*ort)[i] holds case i's outputs, or why ORT rejected it
//
// Tensors cross the process boundary as a folder: manifest.json = [{name, dtype, dims, file}] plus
// raw little-endian files (the format ort_run.mjs documents). Targets including this header
// define OG_SOURCE_DIR (the repository root) and link nlohmann_json.
#pragma once

#ifndef OG_SOURCE_DIR
#error "define OG_SOURCE_DIR as the repository root to use oracle_io.h"
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "onnx_genai/status.h"
#include "onnx_genai/tensor.h"

namespace onnx_genai::testing {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// A fresh directory under the system temp folder, removed with everything in it on destruction.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "og_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  bool valid() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The repository root: $OG_SOURCE_DIR where the test binaries were built elsewhere (a GPU
// machine running binaries staged by scripts/gpu-check), else the build's OG_SOURCE_DIR.
inline std::string source_dir() {
  const char* chosen = std::getenv("OG_SOURCE_DIR");
  return chosen != nullptr && *chosen != '\0' ? chosen : OG_SOURCE_DIR;
}

// The Python that runs the model builders: Debian's (python3-onnx, -numpy, -torch), or $OG_PYTHON
// where those packages live elsewhere (e.g. a GPU machine's virtual environment).
inline std::string python() {
  const char* chosen = std::getenv("OG_PYTHON");
  return chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3";
}

// Quotes `text` for /bin/sh as one word.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return OG_ERROR("cannot open ", path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CommandResult {
  int exit_code = -1;  // the process's exit status; -1 when it did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs `command` through /bin/sh with stdout and stderr captured in files under `scratch`.
inline Result<CommandResult> run_command(const std::string& command, const std::filesystem::path& scratch) {
  const auto out_path = scratch / "command_stdout.txt";
  const auto err_path = scratch / "command_stderr.txt";
  const int status = std::system((command + " >" + shell_quote(out_path.string()) + " 2>" +
                                  shell_quote(err_path.string())).c_str());
  if (status == -1) return OG_ERROR("cannot start a shell for: ", command);
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  OG_ASSIGN_OR_RETURN(result.out, read_text_file(out_path));
  OG_ASSIGN_OR_RETURN(result.err, read_text_file(err_path));
  return result;
}

// onnxruntime-node's dtype names; bfloat16 is absent because onnxruntime-node 1.30 lacks it.
inline const std::vector<std::pair<DType, std::string>>& ort_dtype_names() {
  static const std::vector<std::pair<DType, std::string>> names = {
      {DType::kF32, "float32"}, {DType::kF16, "float16"}, {DType::kI64, "int64"}, {DType::kI32, "int32"},
      {DType::kBool, "bool"},   {DType::kU8, "uint8"},    {DType::kI8, "int8"}};
  return names;
}

inline Status write_tensor_dir(const std::filesystem::path& dir, const std::vector<NamedTensor>& tensors) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return OG_ERROR("cannot create ", dir.string(), ": ", ec.message());
  nlohmann::json manifest = nlohmann::json::array();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    std::string dtype;
    for (const auto& [d, ort_name] : ort_dtype_names()) {
      if (d == tensor.dtype()) dtype = ort_name;
    }
    if (dtype.empty()) return OG_ERROR("tensor '", name, "': ONNX Runtime oracle has no ", dtype_name(tensor.dtype()));
    const std::string file = "input_" + std::to_string(i) + ".bin";
    std::ofstream out(dir / file, std::ios::binary);
    out.write(static_cast<const char*>(tensor.raw()), static_cast<std::streamsize>(tensor.nbytes()));
    if (!out) return OG_ERROR("cannot write ", (dir / file).string());
    manifest.push_back({{"name", name}, {"dtype", dtype}, {"dims", tensor.shape().dims()}, {"file", file}});
  }
  std::ofstream out(dir / "manifest.json");
  out << manifest.dump(1);
  return out ? Status::ok() : OG_ERROR("cannot write ", (dir / "manifest.json").string());
}

inline Result<NamedTensor> read_manifest_entry(const std::filesystem::path& dir, const nlohmann::json& entry) {
  NamedTensor result;
  result.name = entry.at("name").get<std::string>();
  const std::string dtype = entry.at("dtype").get<std::string>();
  DType type = DType::kUndefined;
  for (const auto& [d, ort_name] : ort_dtype_names()) {
    if (ort_name == dtype) type = d;
  }
  if (type == DType::kUndefined) return OG_ERROR("tensor '", result.name, "' has unknown dtype ", dtype);
  OG_ASSIGN_OR_RETURN(result.tensor, Tensor::allocate(type, Shape(entry.at("dims").get<std::vector<int64_t>>())));
  OG_ASSIGN_OR_RETURN(std::string bytes, read_text_file(dir / entry.at("file").get<std::string>()));
  if (static_cast<int64_t>(bytes.size()) != result.tensor.nbytes()) {
    return OG_ERROR("tensor '", result.name, "': file has ", bytes.size(), " bytes, expected ", result.tensor.nbytes());
  }
  std::copy(bytes.begin(), bytes.end(), static_cast<char*>(result.tensor.raw()));
  return result;
}

inline Result<std::vector<NamedTensor>> read_tensor_dir(const std::filesystem::path& dir) {
  OG_ASSIGN_OR_RETURN(std::string text, read_text_file(dir / "manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_array()) return OG_ERROR((dir / "manifest.json").string(), ": not a JSON array");
  std::vector<NamedTensor> tensors;
  for (const auto& entry : manifest) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("dtype") || !entry.contains("dims") ||
        !entry.contains("file")) {
      return OG_ERROR((dir / "manifest.json").string(), ": entry lacks name, dtype, dims or file");
    }
    OG_ASSIGN_OR_RETURN(NamedTensor tensor, read_manifest_entry(dir, entry));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

inline std::string ort_run_command(const std::string& arguments, int threads) {
  const std::string script = source_dir() + "/tests/oracle/ort_run.mjs";
  return "node " + shell_quote(script) + " " + arguments + " --threads " + std::to_string(threads);
}

// The reason from a failed ort_run.mjs: its last stderr (or stdout) line.
inline Status ort_run_failure(const CommandResult& run) {
  std::string why = run.err.empty() ? run.out : run.err;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  why = why.substr(why.rfind('\n') + 1);
  return OG_ERROR("ONNX Runtime oracle failed (exit ", run.exit_code, "): ", why,
                  run.exit_code == 127 ? " (is Node.js installed? run scripts/install-deps)" : "");
}

// Runs `model_path` in ONNX Runtime on `inputs`; returns every model output in the model's order.
inline Result<std::vector<NamedTensor>> run_onnx_runtime(const std::string& model_path,
                                                         const std::vector<NamedTensor>& inputs, int threads = 1) {
  ScopedTempDir scratch;
  if (!scratch.valid()) return OG_ERROR("cannot create a temporary directory for the ONNX Runtime oracle");
  OG_RETURN_IF_ERROR(write_tensor_dir(scratch.path() / "in", inputs));
  const std::string arguments = shell_quote(model_path) + " " + shell_quote((scratch.path() / "in").string()) + " " +
                                shell_quote((scratch.path() / "out").string());
  OG_ASSIGN_OR_RETURN(CommandResult run, run_command(ort_run_command(arguments, threads), scratch.path()));
  if (run.exit_code != 0) return ort_run_failure(run);
  return read_tensor_dir(scratch.path() / "out");
}

struct OrtBatchCase {
  std::string model;
  std::filesystem::path in_dir;   // inputs in write_tensor_dir's format
  std::filesystem::path out_dir;  // receives the outputs (or error.txt); created by the oracle
};

// Runs every case in one Node process (ort_run.mjs --batch): Node and ORT start once. Fails as a
// whole only when the oracle cannot run; a case ORT rejects carries ORT's reason in its slot.
// `scratch` receives the case list and the oracle's captured output.
inline Result<std::vector<Result<std::vector<NamedTensor>>>> run_onnx_runtime_batch(
    const std::vector<OrtBatchCase>& cases, const std::filesystem::path& scratch, int threads = 1) {
  const auto list_path = scratch / "ort_batch.tsv";
  {
    std::ofstream list(list_path);
    for (const OrtBatchCase& c : cases) {
      std::error_code ignored;
      std::filesystem::remove_all(c.out_dir, ignored);  // no stale outputs or error.txt from an earlier run
      list << c.model << '\t' << c.in_dir.string() << '\t' << c.out_dir.string() << '\n';
    }
    if (!list) return OG_ERROR("cannot write ", list_path.string());
  }
  OG_ASSIGN_OR_RETURN(CommandResult run,
                      run_command(ort_run_command("--batch " + shell_quote(list_path.string()), threads), scratch));
  if (run.exit_code != 0) return ort_run_failure(run);
  std::vector<Result<std::vector<NamedTensor>>> results;
  for (const OrtBatchCase& c : cases) {
    auto error = read_text_file(c.out_dir / "error.txt");
    if (error.is_ok()) {
      while (!error->empty() && error->back() == '\n') error->pop_back();
      results.push_back(OG_ERROR("ONNX Runtime rejected ", c.model, ": ", *error));
    } else {
      results.push_back(read_tensor_dir(c.out_dir));
    }
  }
  return results;
}

}  // namespace onnx_genai::testing
