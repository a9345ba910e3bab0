#include "onnx/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <limits>

namespace onnx_genai {

namespace {

// Raw bytes that are not aligned for vector loads are copied: kernels may read them as typed
// arrays, and an unaligned float* is undefined behaviour (UBSan flags it).
constexpr uintptr_t kInPlaceAlignment = 16;

Result<Shape> shape_of(const onnx::TensorProto& proto, const std::string& what) {
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) return OG_ERROR(what, ": negative dimension ", d);
    if (d != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / d) return OG_ERROR(what, ": shape too large");
    numel *= d;
  }
  return Shape(std::move(dims));
}

template <typename Dst, typename Field>
Result<Tensor> decode_typed(const std::string& what, DType dtype, Shape shape, const Field& field) {
  if (static_cast<int64_t>(field.size()) != shape.numel()) {
    return OG_ERROR(what, ": has ", field.size(), " values, shape ", shape.to_string(), " needs ", shape.numel());
  }
  OG_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, std::move(shape)));
  Dst* out = t.data<Dst>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
  return t;
}

}  // namespace

Result<Tensor> TensorSource::from_bytes(const std::string& what, DType dtype, Shape shape, const uint8_t* bytes,
                                        size_t length, std::shared_ptr<const void> owner) {
  const int64_t expected = dtype_storage_bytes(dtype, shape.numel());
  if (static_cast<int64_t>(length) != expected) {
    return OG_ERROR(what, ": has ", length, " bytes of data, shape ", shape.to_string(), " of ", dtype_name(dtype),
                    " needs ", expected);
  }
  if (reinterpret_cast<uintptr_t>(bytes) % kInPlaceAlignment == 0 && owner != nullptr) {
    if (stats_) stats_->initializer_bytes_mapped += expected;
    return Tensor::view(dtype, std::move(shape), const_cast<uint8_t*>(bytes), std::move(owner));
  }
  OG_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, std::move(shape)));
  if (length > 0) std::memcpy(t.raw(), bytes, length);
  if (stats_) stats_->initializer_bytes_copied += expected;
  return t;
}

Result<Tensor> TensorSource::from_external(const std::string& what, const onnx::TensorProto& proto, DType dtype,
                                           Shape shape) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    const std::string& key = entry.key();
    try {
      if (key == "location") location = entry.value();
      else if (key == "offset") offset = std::stoll(entry.value());
      else if (key == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      return OG_ERROR(what, ": external data ", key, " '", entry.value(), "' is not a number");
    }
  }
  if (location.empty()) return OG_ERROR(what, ": external data has no location");
  const std::filesystem::path rel(location);
  if (rel.is_absolute()) return OG_ERROR(what, ": external data path '", location, "' must be relative");
  for (const auto& part : rel) {
    if (part == "..") return OG_ERROR(what, ": external data path '", location, "' leaves the model folder");
  }
  const std::string full = (std::filesystem::path(base_dir_) / rel).string();
  auto it = external_files_.find(full);
  if (it == external_files_.end()) {
    auto mapped = MappedFile::open(full);
    if (!mapped.is_ok()) return OG_ERROR(what, ": missing external data: ", mapped.status().message());
    it = external_files_.emplace(full, std::move(mapped).value()).first;
  }
  const MappedFile& file = *it->second;
  const int64_t expected = dtype_storage_bytes(dtype, shape.numel());
  if (length < 0) length = expected;
  if (offset < 0 || length < 0 || static_cast<uint64_t>(offset) > file.size() ||
      static_cast<uint64_t>(length) > file.size() - static_cast<uint64_t>(offset)) {
    return OG_ERROR(what, ": external data [", offset, ", +", length, ") lies outside '", location, "' (",
                    file.size(), " bytes)");
  }
  return from_bytes(what, dtype, std::move(shape), file.data() + offset, static_cast<size_t>(length), it->second);
}

Result<Tensor> TensorSource::to_tensor(const onnx::TensorProto& proto, std::optional<ByteSpan> raw) {
  const std::string what = "tensor '" + proto.name() + "'";
  if (!dtype_is_known(proto.data_type())) {
    return OG_ERROR(what, ": unsupported data type ", proto.data_type());
  }
  const auto dtype = static_cast<DType>(proto.data_type());
  OG_ASSIGN_OR_RETURN(Shape shape, shape_of(proto, what));

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) return from_external(what, proto, dtype, std::move(shape));
  if (raw) return from_bytes(what, dtype, std::move(shape), file_ + raw->offset, raw->length, owner_);
  if (proto.has_raw_data()) {
    const std::string& bytes = proto.raw_data();
    // The proto owns these bytes and may die before the tensor: copy (no owner given).
    return from_bytes(what, dtype, std::move(shape), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                      nullptr);
  }
  switch (dtype) {
    case DType::kF32: return decode_typed<float>(what, dtype, std::move(shape), proto.float_data());
    case DType::kF64: return decode_typed<double>(what, dtype, std::move(shape), proto.double_data());
    case DType::kI64: return decode_typed<int64_t>(what, dtype, std::move(shape), proto.int64_data());
    case DType::kU32:
    case DType::kU64:
      return dtype == DType::kU32 ? decode_typed<uint32_t>(what, dtype, std::move(shape), proto.uint64_data())
                                  : decode_typed<uint64_t>(what, dtype, std::move(shape), proto.uint64_data());
    case DType::kI32: return decode_typed<int32_t>(what, dtype, std::move(shape), proto.int32_data());
    case DType::kI16: return decode_typed<int16_t>(what, dtype, std::move(shape), proto.int32_data());
    case DType::kI8: return decode_typed<int8_t>(what, dtype, std::move(shape), proto.int32_data());
    case DType::kU8:
    case DType::kF8E8M0:
    case DType::kBool: return decode_typed<uint8_t>(what, dtype, std::move(shape), proto.int32_data());
    // 16-bit floats travel as their bit patterns in int32_data.
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16: return decode_typed<uint16_t>(what, dtype, std::move(shape), proto.int32_data());
    case DType::kU4:
    case DType::kI4: {
      // Packed two per byte in int32_data entries.
      const int64_t bytes = dtype_storage_bytes(dtype, shape.numel());
      if (proto.int32_data_size() != bytes) return OG_ERROR(what, ": packed int4 data has wrong length");
      OG_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, std::move(shape)));
      for (int i = 0; i < proto.int32_data_size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(proto.int32_data(i));
      return t;
    }
    default: return OG_ERROR(what, ": cannot decode data type ", dtype_name(dtype));
  }
}

}  // namespace onnx_genai
