// C API: results, strings, token sequences, tensors and string arrays.
#include <cstring>
#include <limits>

#include "capi/api_objects.h"

using onnx_genai::Status;
using onnx_genai::capi::guard;
using onnx_genai::capi::require;

namespace onnx_genai::capi {

namespace {
OgaResult out_of_memory{"out of memory"};  // short enough to need no allocation
}  // namespace

OgaResult* out_of_memory_result() { return &out_of_memory; }

const char* copy_string(const std::string& text) {
  char* copy = new char[text.size() + 1];
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

}  // namespace onnx_genai::capi

namespace {

size_t element_size(OgaElementType type) {
  switch (type) {
    case OgaElementType_float32: return sizeof(float);
    case OgaElementType_int32: return sizeof(int32_t);
    case OgaElementType_int64: return sizeof(int64_t);
    default: return 0;
  }
}

}  // namespace

size_t OgaTensor::elements() const {
  size_t count = 1;
  for (const int64_t dim : shape) count *= static_cast<size_t>(dim);
  return count;
}

extern "C" {

const char* OgaResultGetError(const OgaResult* result) { return result != nullptr ? result->message.c_str() : ""; }
void OgaDestroyResult(OgaResult* result) {
  if (result != onnx_genai::capi::out_of_memory_result()) delete result;
}
void OgaDestroyString(const char* string) { delete[] string; }
void OgaShutdown(void) {}

OgaResult* OgaCreateSequences(OgaSequences** out) {
  return guard("OgaCreateSequences", [&] {
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = new OgaSequences();
    return Status::ok();
  });
}

void OgaDestroySequences(OgaSequences* sequences) { delete sequences; }

size_t OgaSequencesCount(const OgaSequences* sequences) { return sequences != nullptr ? sequences->rows.size() : 0; }

OgaResult* OgaAppendTokenSequence(const int32_t* token_ptr, size_t token_cnt, OgaSequences* sequences) {
  return guard("OgaAppendTokenSequence", [&] {
    OG_RETURN_IF_ERROR(require(sequences, "sequences"));
    if (token_cnt > 0) OG_RETURN_IF_ERROR(require(token_ptr, "token_ptr"));
    sequences->rows.emplace_back(token_ptr, token_ptr + token_cnt);
    return Status::ok();
  });
}

OgaResult* OgaAppendTokenToSequence(int32_t token, OgaSequences* sequences, size_t sequence_index) {
  return guard("OgaAppendTokenToSequence", [&] {
    OG_RETURN_IF_ERROR(require(sequences, "sequences"));
    if (sequence_index > sequences->rows.size()) {
      return OG_ERROR("sequence_index ", sequence_index, " is past the ", sequences->rows.size(), " sequences");
    }
    if (sequence_index == sequences->rows.size()) sequences->rows.emplace_back();
    sequences->rows[sequence_index].push_back(token);
    return Status::ok();
  });
}

size_t OgaSequencesGetSequenceCount(const OgaSequences* sequences, size_t sequence_index) {
  if (sequences == nullptr || sequence_index >= sequences->rows.size()) return 0;
  return sequences->rows[sequence_index].size();
}

const int32_t* OgaSequencesGetSequenceData(const OgaSequences* sequences, size_t sequence_index) {
  if (sequences == nullptr || sequence_index >= sequences->rows.size()) return nullptr;
  return sequences->rows[sequence_index].data();
}

OgaResult* OgaCreateTensorFromBuffer(void* data, const int64_t* shape_dims, size_t shape_dims_count,
                                     OgaElementType element_type, OgaTensor** out) {
  return guard("OgaCreateTensorFromBuffer", [&] {
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (shape_dims_count > 0) OG_RETURN_IF_ERROR(require(shape_dims, "shape_dims"));
    const size_t size = element_size(element_type);
    if (size == 0) return OG_ERROR("element type ", static_cast<int>(element_type), " is not float32, int32 or int64");
    auto tensor = std::make_unique<OgaTensor>();
    tensor->type = element_type;
    size_t elements = 1;
    for (size_t i = 0; i < shape_dims_count; ++i) {
      const int64_t dim = shape_dims[i];
      // Bounded so that the byte count cannot overflow.
      if (dim < 0 || (dim > 0 && elements > (std::numeric_limits<size_t>::max() / 16) / static_cast<size_t>(dim))) {
        return OG_ERROR("shape dimension ", i, " is ", dim, " (negative, or too large a tensor)");
      }
      elements *= static_cast<size_t>(dim);
      tensor->shape.push_back(dim);
    }
    if (data != nullptr) {
      tensor->data = data;
    } else {
      tensor->owned.assign(elements * size, 0);
      tensor->data = tensor->owned.data();
    }
    *out = tensor.release();
    return Status::ok();
  });
}

void OgaDestroyTensor(OgaTensor* tensor) { delete tensor; }

OgaResult* OgaTensorGetType(OgaTensor* tensor, OgaElementType* out) {
  return guard("OgaTensorGetType", [&] {
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = tensor->type;
    return Status::ok();
  });
}

OgaResult* OgaTensorGetShapeRank(OgaTensor* tensor, size_t* out) {
  return guard("OgaTensorGetShapeRank", [&] {
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = tensor->shape.size();
    return Status::ok();
  });
}

OgaResult* OgaTensorGetShape(OgaTensor* tensor, int64_t* shape_dims, size_t shape_dims_count) {
  return guard("OgaTensorGetShape", [&] {
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    if (shape_dims_count != tensor->shape.size()) {
      return OG_ERROR("shape_dims_count is ", shape_dims_count, "; the tensor's rank is ", tensor->shape.size());
    }
    if (shape_dims_count > 0) OG_RETURN_IF_ERROR(require(shape_dims, "shape_dims"));
    std::copy(tensor->shape.begin(), tensor->shape.end(), shape_dims);
    return Status::ok();
  });
}

OgaResult* OgaTensorGetData(OgaTensor* tensor, void** out) {
  return guard("OgaTensorGetData", [&] {
    OG_RETURN_IF_ERROR(require(tensor, "tensor"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = tensor->data;
    return Status::ok();
  });
}

OgaResult* OgaCreateStringArray(OgaStringArray** out) {
  return guard("OgaCreateStringArray", [&] {
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = new OgaStringArray();
    return Status::ok();
  });
}

void OgaDestroyStringArray(OgaStringArray* string_array) { delete string_array; }

OgaResult* OgaStringArrayAddString(OgaStringArray* string_array, const char* str) {
  return guard("OgaStringArrayAddString", [&] {
    OG_RETURN_IF_ERROR(require(string_array, "string_array"));
    OG_RETURN_IF_ERROR(require(str, "str"));
    string_array->strings.emplace_back(str);
    return Status::ok();
  });
}

OgaResult* OgaStringArrayGetCount(const OgaStringArray* string_array, size_t* out) {
  return guard("OgaStringArrayGetCount", [&] {
    OG_RETURN_IF_ERROR(require(string_array, "string_array"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    *out = string_array->strings.size();
    return Status::ok();
  });
}

OgaResult* OgaStringArrayGetString(const OgaStringArray* string_array, size_t index, const char** out) {
  return guard("OgaStringArrayGetString", [&] {
    OG_RETURN_IF_ERROR(require(string_array, "string_array"));
    OG_RETURN_IF_ERROR(require(out, "out"));
    if (index >= string_array->strings.size()) {
      return OG_ERROR("index ", index, " is past the ", string_array->strings.size(), " strings");
    }
    *out = string_array->strings[index].c_str();
    return Status::ok();
  });
}

}  // extern "C"
