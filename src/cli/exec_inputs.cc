#include "cli/exec_inputs.h"

#include <fstream>
#include <random>
#include <set>

#include "ops/cpu/dispatch.h"

namespace onnx_genai::cli {

namespace {

constexpr uint32_t kSeed = 1234;
constexpr uint32_t kMaxGeneratedInteger = 100;

Status check_names(const std::vector<IoInfo>& inputs, const std::map<std::string, int64_t>& dims,
                   const std::map<std::string, std::string>& files) {
  std::set<std::string> symbols, names;
  for (const IoInfo& info : inputs) {
    names.insert(info.name);
    for (const std::string& symbol : info.symbols) {
      if (!symbol.empty()) symbols.insert(symbol);
    }
  }
  for (const auto& [name, value] : dims) {
    if (symbols.count(name) == 0) {
      std::string known;
      for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
      return OG_ERROR("unknown --dim '", name, "': the model's symbolic dims are ", known.empty() ? "(none)" : known);
    }
  }
  for (const auto& [name, file] : files) {
    if (names.count(name) == 0) return OG_ERROR("--input '", name, "': the model has no input of that name");
  }
  return Status::ok();
}

Result<Shape> resolve_shape(const IoInfo& info, const std::map<std::string, int64_t>& dims) {
  if (!info.rank_known) return OG_ERROR("input '", info.name, "' has no declared shape");
  Shape shape(info.dims);
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] >= 0) continue;
    const std::string& symbol = info.symbols[static_cast<size_t>(i)];
    const auto it = dims.find(symbol);
    shape[i] = it == dims.end() ? 1 : it->second;
  }
  return shape;
}

// Takes the input's bytes from `bytes_left` before anything is allocated: the inputs together stay
// under the limit (the element count of huge --dim values can pass int64 too).
Status take_bytes(const IoInfo& info, const Shape& shape, int64_t max_bytes, int64_t& bytes_left) {
  int64_t numel = 1;
  bool overflow = false;
  for (const int64_t d : shape.dims()) overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
  // Every dtype takes at least half a byte per element; the exact size follows once that is bounded.
  if (overflow || numel / 2 > bytes_left || dtype_storage_bytes(info.dtype, numel) > bytes_left) {
    return OG_ERROR("input '", info.name, "' ", dtype_name(info.dtype), " ", shape.to_string(),
                    " would take the inputs past the limit of ", max_bytes, " bytes (--max-input-bytes raises it)");
  }
  bytes_left -= dtype_storage_bytes(info.dtype, numel);
  return Status::ok();
}

Result<Tensor> read_input(const IoInfo& info, Shape shape, const std::string& path) {
  OG_ASSIGN_OR_RETURN(Tensor tensor, Tensor::allocate(info.dtype, std::move(shape)));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return OG_ERROR("--input '", info.name, "': cannot open '", path, "'");
  const auto size = static_cast<int64_t>(in.tellg());
  if (size != tensor.nbytes()) {
    return OG_ERROR("--input '", info.name, "': '", path, "' has ", size, " bytes, ", dtype_name(info.dtype), " ",
                    tensor.shape().to_string(), " needs ", tensor.nbytes());
  }
  in.seekg(0);
  in.read(static_cast<char*>(tensor.raw()), size);
  if (!in) return OG_ERROR("--input '", info.name, "': cannot read '", path, "'");
  return tensor;
}

Result<Tensor> generate_input(const IoInfo& info, Shape shape, uint32_t seed) {
  OG_ASSIGN_OR_RETURN(Tensor tensor, Tensor::allocate(info.dtype, std::move(shape)));
  std::mt19937 rng(seed);  // mt19937's sequence is fixed by the standard; distributions are not
  Status filled = dispatch_dtype<float, double, Float16, BFloat16, int8_t, uint8_t, int16_t, uint16_t, int32_t,
                                 uint32_t, int64_t, uint64_t, bool>(info.dtype, [&]<typename T>() {
    T* data = tensor.data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        data[i] = (rng() & 1u) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        data[i] = static_cast<T>(rng() % kMaxGeneratedInteger);
      } else {
        const float uniform = static_cast<float>(rng() >> 8) * 0x1p-24f * 2.0f - 1.0f;  // 24 random bits
        data[i] = store<T>(static_cast<compute_t<T>>(uniform));
      }
    }
    return Status::ok();
  });
  if (!filled.is_ok()) return OG_ERROR("input '", info.name, "': cannot generate values of dtype ", dtype_name(info.dtype));
  return tensor;
}

}  // namespace

Result<std::vector<Tensor>> build_exec_inputs(const std::vector<IoInfo>& inputs,
                                              const std::map<std::string, int64_t>& dims,
                                              const std::map<std::string, std::string>& files, int64_t max_bytes) {
  OG_RETURN_IF_ERROR(check_names(inputs, dims, files));
  std::vector<Tensor> tensors;
  int64_t bytes_left = max_bytes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& info = inputs[i];
    OG_ASSIGN_OR_RETURN(Shape shape, resolve_shape(info, dims));
    OG_RETURN_IF_ERROR(take_bytes(info, shape, max_bytes, bytes_left));
    const auto file = files.find(info.name);
    OG_ASSIGN_OR_RETURN(Tensor tensor, file == files.end()
                                           ? generate_input(info, std::move(shape), kSeed + static_cast<uint32_t>(i))
                                           : read_input(info, std::move(shape), file->second));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace onnx_genai::cli
