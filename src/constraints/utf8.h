// UTF-8 validity of a byte sequence, one byte at a time (RFC 3629's table of well-formed
// sequences): what the token trie knows of its paths and what the automaton checks a string
// state against.
#pragma once

#include <cstdint>

namespace onnx_genai::constraints::utf8 {

// Between characters, invalid, or what the next byte must be: 1-3 continuations (80..BF), or
// the restricted second byte after E0 (A0..BF), ED (80..9F), F0 (90..BF), F4 (80..8F).
enum State : int8_t { kInvalid = -1, kBoundary, kCont1, kCont2, kCont3, kAfterE0, kAfterED, kAfterF0, kAfterF4 };

inline int8_t step(int8_t at, uint8_t b) {
  const bool cont = b >= 0x80 && b <= 0xBF;
  switch (at) {
    case kBoundary:
      if (b < 0x80) return kBoundary;
      if (b >= 0xC2 && b <= 0xDF) return kCont1;
      if (b == 0xE0) return kAfterE0;
      if (b == 0xED) return kAfterED;
      if (b >= 0xE1 && b <= 0xEF) return kCont2;
      if (b == 0xF0) return kAfterF0;
      if (b >= 0xF1 && b <= 0xF3) return kCont3;
      if (b == 0xF4) return kAfterF4;
      return kInvalid;
    case kCont1: return cont ? kBoundary : kInvalid;
    case kCont2: return cont ? kCont1 : kInvalid;
    case kCont3: return cont ? kCont2 : kInvalid;
    case kAfterE0: return b >= 0xA0 && b <= 0xBF ? kCont1 : kInvalid;
    case kAfterED: return b >= 0x80 && b <= 0x9F ? kCont1 : kInvalid;
    case kAfterF0: return b >= 0x90 && b <= 0xBF ? kCont2 : kInvalid;
    case kAfterF4: return b >= 0x80 && b <= 0x8F ? kCont2 : kInvalid;
    default: return kInvalid;
  }
}

}  // namespace onnx_genai::constraints::utf8
