// GET /'s chat page (src/server/chat_page.html, embedded at build time): plain HTML and
// JavaScript that streams replies through /v1/chat/completions like any client.
#pragma once

namespace onnx_genai::server {

extern const char kChatPage[];

}  // namespace onnx_genai::server
