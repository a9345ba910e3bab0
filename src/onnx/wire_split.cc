#include "onnx/wire_split.h"

namespace onnx_genai {

namespace {

// Field numbers from onnx.proto.
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kLengthDelimited = 2;

class Reader {
 public:
  Reader(const uint8_t* base, size_t begin, size_t end) : base_(base), pos_(begin), end_(end) {}
  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  Result<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return OG_ERROR("protobuf truncated in a varint at byte ", pos_);
      const uint8_t b = base_[pos_++];
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return OG_ERROR("protobuf varint too long at byte ", pos_);
  }

  // Skips the payload of a field with wire type `wt`; returns the payload's [begin, end).
  Result<ByteSpan> payload(uint32_t wt) {
    const size_t start = pos_;
    size_t len = 0;
    switch (wt) {
      case 0: {
        OG_ASSIGN_OR_RETURN(uint64_t ignored, varint());
        (void)ignored;
        return ByteSpan{start, pos_ - start};
      }
      case 1: len = 8; break;
      case 5: len = 4; break;
      case kLengthDelimited: {
        OG_ASSIGN_OR_RETURN(uint64_t n, varint());
        if (n > end_ - pos_) return OG_ERROR("protobuf field of ", n, " bytes overruns its message at byte ", pos_);
        ByteSpan span{pos_, static_cast<size_t>(n)};
        pos_ += span.length;
        return span;
      }
      default: return OG_ERROR("unsupported protobuf wire type ", wt, " at byte ", start);
    }
    if (len > end_ - pos_) return OG_ERROR("protobuf truncated at byte ", pos_);
    pos_ += len;
    return ByteSpan{start, len};
  }

 private:
  const uint8_t* base_;
  size_t pos_;
  size_t end_;
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Calls fn(tag, payload, whole_field) for each field of the message in [begin, end), where
// whole_field spans the tag, any length prefix and the payload.
template <typename Fn>
Status for_each_field(const uint8_t* base, size_t begin, size_t end, Fn&& fn) {
  Reader r(base, begin, end);
  while (!r.done()) {
    const size_t field_start = r.pos();
    OG_ASSIGN_OR_RETURN(uint64_t tag, r.varint());
    OG_ASSIGN_OR_RETURN(ByteSpan payload, r.payload(static_cast<uint32_t>(tag & 7)));
    OG_RETURN_IF_ERROR(fn(tag, payload, ByteSpan{field_start, r.pos() - field_start}));
  }
  return Status::ok();
}

bool is_field(uint64_t tag, uint32_t field) { return (tag >> 3) == field && (tag & 7) == kLengthDelimited; }

void append(std::string& out, const uint8_t* base, ByteSpan span) {
  out.append(reinterpret_cast<const char*>(base + span.offset), span.length);
}

// Copies the message in [begin, end) to `out`; a length-delimited field `field` is passed
// through `rewrite` (which appends the new payload) instead of copied.
template <typename Rewrite>
Status copy_message(const uint8_t* base, size_t begin, size_t end, uint32_t field, std::string& out,
                    Rewrite&& rewrite) {
  return for_each_field(base, begin, end, [&](uint64_t tag, ByteSpan payload, ByteSpan whole) -> Status {
    if (!is_field(tag, field)) {
      append(out, base, whole);
      return Status::ok();
    }
    std::string inner;
    OG_RETURN_IF_ERROR(rewrite(payload, inner));
    put_varint(out, tag);
    put_varint(out, inner.size());
    out += inner;
    return Status::ok();
  });
}

}  // namespace

Result<SplitModel> split_initializer_payloads(const uint8_t* data, size_t size) {
  SplitModel split;
  split.stripped.reserve(size < (1u << 20) ? size : (1u << 20));
  auto strip_tensor = [&](ByteSpan tensor, std::string& out) -> Status {
    split.raw_data.emplace_back();
    return for_each_field(data, tensor.offset, tensor.offset + tensor.length,
                          [&](uint64_t tag, ByteSpan payload, ByteSpan whole) -> Status {
                            if (is_field(tag, kTensorRawData)) {
                              split.raw_data.back() = payload;
                            } else {
                              append(out, data, whole);
                            }
                            return Status::ok();
                          });
  };
  auto strip_graph = [&](ByteSpan graph, std::string& out) -> Status {
    return copy_message(data, graph.offset, graph.offset + graph.length, kGraphInitializer, out, strip_tensor);
  };
  OG_RETURN_IF_ERROR(copy_message(data, 0, size, kModelGraph, split.stripped, strip_graph));
  return split;
}

}  // namespace onnx_genai
