#include "cli/tokenize_command.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "cli/run_support.h"
#include "onnx_genai/tokenizer.h"

namespace onnx_genai::cli {

namespace {

struct TokenizeOptions {
  std::string model_path;
  std::optional<std::string> text;
  std::optional<std::string> decode;  // comma-separated ids
  bool ids_only = false;
  bool no_special = false;
  int64_t max_input_bytes = kDefaultMaxInputBytes;  // of the text on stdin
};

Result<TokenizeOptions> parse_tokenize_options(std::span<const std::string> args) {
  TokenizeOptions o;
  OptionTable table;
  table.valued["--text"] = [&](const std::string&, const std::string& value) {
    o.text = value;
    return Status::ok();
  };
  table.valued["--decode"] = [&](const std::string&, const std::string& value) {
    o.decode = value;
    return Status::ok();
  };
  table.flags = {{"--ids", &o.ids_only}, {"--no-special", &o.no_special}};
  add_input_limit_option(table, o.max_input_bytes);
  OG_RETURN_IF_ERROR(parse_options(args, table, o.model_path));
  if (o.text && o.decode) return OG_ERROR("--text and --decode exclude each other");
  return o;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    OG_ASSIGN_OR_RETURN(int64_t id, parse_integer(item, "--decode", 0, INT32_MAX));
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) return OG_ERROR("--decode wants comma-separated token ids, got '", list, "'");
  return ids;
}

Status print_tokens(const Tokenizer& tokenizer, const TokenizeOptions& options) {
  OG_ASSIGN_OR_RETURN(std::string text, read_text_or_stdin(options.text, "text", options.max_input_bytes));
  EncodeOptions encode_options;
  encode_options.add_special_tokens = !options.no_special;
  OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(text, encode_options));
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (options.ids_only) {
      out += (i ? " " : "") + std::to_string(ids[i]);
    } else {
      out += std::to_string(ids[i]) + "\t" + std::string(tokenizer.id_to_token(ids[i])) + "\n";
    }
  }
  if (options.ids_only) out += "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return Status::ok();
}

Status print_text(const Tokenizer& tokenizer, const TokenizeOptions& options) {
  OG_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_id_list(*options.decode));
  DecodeOptions decode_options;
  decode_options.skip_special_tokens = options.no_special;
  OG_ASSIGN_OR_RETURN(std::string text, tokenizer.decode(ids, decode_options));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return Status::ok();
}

}  // namespace

int run_tokenize(std::span<const std::string> args) {
  auto options = parse_tokenize_options(args);
  if (!options.is_ok()) return report(kExitBadInput, options.status().message());
  auto dir = resolve_model_dir(options->model_path, "tokenize");
  if (!dir.is_ok()) return report(kExitBadInput, dir.status().message());
  auto tokenizer = Tokenizer::load(*dir);
  if (!tokenizer.is_ok()) return report(kExitBadInput, tokenizer.status().message());
  const Status status = options->decode ? print_text(**tokenizer, *options) : print_tokens(**tokenizer, *options);
  if (!status.is_ok()) return report(kExitBadInput, status.message());
  std::fflush(stdout);
  return 0;
}

}  // namespace onnx_genai::cli
