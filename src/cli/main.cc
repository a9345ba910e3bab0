// onnx-genai: command-line entry point. Subcommands:
//   exec MODEL.onnx [--threads N] [--repeat R] [--dim name=value ...] [--input name=file.bin ...]
//   generate [MODEL] --prompt TEXT ... (cli/generate_options.h)
//   tokenize [MODEL] [--text TEXT] [--ids] [--no-special] [--decode 1,2,3] (cli/tokenize_command.h)
//   show [MODEL] (cli/show_command.h)
//   bench [MODEL] --prompt-len P --gen-len G [--repeat R] [--threads N] [--json] (cli/bench_command.h)
//   bench-serve [MODEL] [--num-requests N] [--concurrency C | --request-rate R] ... (cli/bench_serve_command.h)
//   serve [MODEL] [--host H] [--port P] [--api-key KEY] ... (cli/serve_command.h)
//   run [MODEL] [--system TEXT] [--greedy] [--max-new-tokens N] [--threads N] (cli/run_command.h)
//   eval-ppl [MODEL] --text FILE [--window N] [--stride N] [--threads N] [--json] (cli/eval_ppl_command.h)
// Any error prints one line to stderr and exits with status 1 (generate: 2 for bad input); so does
// an exception that escapes a command, and output that could not be written (a full disk, a
// closed stdout).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_command.h"
#include "cli/bench_serve_command.h"
#include "cli/eval_ppl_command.h"
#include "cli/exec_command.h"
#include "cli/generate_command.h"
#include "cli/run_command.h"
#include "cli/run_support.h"
#include "cli/serve_command.h"
#include "cli/show_command.h"
#include "cli/tokenize_command.h"

namespace {

constexpr const char* kUsage =
    "usage: onnx-genai exec MODEL.onnx [--threads N] [--device cpu|cuda[:N]] [--repeat R] [--dim name=value ...] [--input name=file.bin ...]\n"
    "         [--max-memory BYTES] [--max-input-bytes N]\n"
    "  exec   load MODEL.onnx, run it R times (default 1) on the inputs given with --input (raw little-endian\n"
    "         files) or generated ones (integers in [0, 100), floats uniform in [-1, 1), fixed seed);\n"
    "         symbolic dims take --dim values, default 1; prints outputs, timing and session stats; --max-memory\n"
    "         (default: the physical memory) bounds the plan's activation arena, --max-input-bytes (default\n"
    "         1073741824, 1 GiB) the inputs together\n"
    "usage: onnx-genai generate [MODEL] [--prompt TEXT] [--chat] [--system TEXT] [--max-new-tokens N]\n"
    "         [--min-new-tokens N] [--temperature F] [--top-k N] [--top-p F] [--min-p F] [--seed N] [--greedy]\n"
    "         [--repetition-penalty F] [--no-repeat-ngram-size N]\n"
    "         [--stop TEXT ...] [--ignore-eos] [--prefill-chunk N] [--truncate] [--threads N] [--device cpu|cuda[:N]] [--mask-at-capacity on|off]\n"
    "         [--stream] [--stats] [--max-input-bytes N] [--tensor-parallel N]\n"
    "         [--num-beams N] [--length-penalty F] [--early-stopping true|false|never] [--num-return-sequences N]\n"
    "         [--speculative ngram|DRAFT_DIR] [--draft-tokens K] [--ngram-max N]\n"
    "         [--json-schema FILE | --json-object | --regex RE | --grammar FILE] [--fast-forward]\n"
    "  generate  load a model folder (genai_config.json or Hugging Face config.json + model.onnx; default\n"
    "         models/debian-prose-11m), encode the prompt (--prompt, else stdin; --chat applies the chat template),\n"
    "         generate and print the text; sampling defaults come from the package, --greedy takes the argmax,\n"
    "         any of --temperature/--top-k/--top-p/--min-p turns sampling on (a temperature below 1e-5 is greedy);\n"
    "         --truncate drops the prompt's oldest tokens to fit the context with --max-new-tokens (an error when\n"
    "         no prompt token would fit); --stats prints timing to stderr;\n"
    "         --mask-at-capacity: GroupQueryAttention decode steps share one plan (a mask as wide as the KV\n"
    "         cache; default: on when the graph uses the mask only for lengths);\n"
    "         --num-beams N > 1: beam search as Hugging Face transformers runs it (greedy only), printing the\n"
    "         --num-return-sequences best (default 1), best first, each ending in a newline, once the search ends;\n"
    "         --speculative: speculative decoding (one prompt; greedy gives plain decoding's tokens, sampling its\n"
    "         distribution): prompt lookup (ngram, n-grams up to --ngram-max, default 3) or a draft model folder\n"
    "         with the same vocabulary, up to --draft-tokens K (default 4, adapted to the acceptance) per step;\n"
    "         with --stats, the verify steps and the drafted and accepted tokens;\n"
    "         --json-schema/--json-object/--regex/--grammar: structured output (docs/constraints.md); --fast-forward\n"
    "         drafts the text the grammar forces and verifies it in one step (the same output, fewer steps)\n"
    "  --tensor-parallel N, -tp N (generate, bench, run, serve, bench-serve): shard the decoder into N ranks\n"
    "         at load (attention by whole KV-head groups, MLP by intermediate columns, LM head by vocabulary) run in\n"
    "         lockstep on N threads of --threads each, every rank with its own KV cache of KV heads / N (serving:\n"
    "         block pools under shared block ids, --kv-cache-memory counting all ranks); CPU only, the KV heads\n"
    "         must divide by N (docs/ARCHITECTURE.md, \"Tensor parallelism\")\n"
    "usage: onnx-genai tokenize [MODEL] [--text TEXT] [--ids] [--no-special] [--decode 1,2,3] [--max-input-bytes N]\n"
    "  tokenize  the model's tokenizer on --text (else stdin): ID<TAB>TOKEN lines, or the ids on one line\n"
    "         with --ids; --no-special adds no special tokens (BOS...); --decode prints the text of the ids\n"
    "usage: onnx-genai show [MODEL]\n"
    "  show   model type, layers, hidden size, heads, vocab, context, parameters, quantization, KV dtype,\n"
    "         op counts and file size, from the configs and the decoder graph\n"
    "usage: onnx-genai bench [MODEL] [--prompt-len P] [--gen-len G] [--repeat R] [--threads N] [--device cpu|cuda[:N]] [--json]\n"
    "         [--all-logits] [--step-tokens K] [--cuda-graphs on|off] [--speculative ngram|DRAFT_DIR] [--draft-tokens K]\n"
    "         [--tensor-parallel N]\n"
    "  bench  greedy generation of exactly G tokens (default 64) after a synthetic P-token prompt (default\n"
    "         128), one warm-up then R runs (default 3): prefill/decode tok/s, TTFT, inter-token latency\n"
    "         p50/p90/p99, peak RSS; --all-logits computes the prompt's logits at every position, as the\n"
    "         graph asks, instead of only at the last; --step-tokens K (1-16) feeds K tokens per decode step\n"
    "         (one sampled: a speculative verify's cost); on a GPU, the decode plan's steps and copies and\n"
    "         the CUDA graph counters\n"
    "  --cuda-graphs (generate, bench, run, eval-ppl): on a GPU, record repeated runs of device steps as\n"
    "         CUDA graphs and replay them (default on); off launches every kernel on its own\n"
    "usage: onnx-genai bench-serve [MODEL] [--num-requests N] [--concurrency C | --request-rate R] [--prompt-len P]\n"
    "         [--gen-len G] [--range F] [--shared-prefix-len S] [--seed N] [--slo-ttft-ms X] [--slo-tpot-ms Y]\n"
    "         [--block-size B] [--kv-cache-memory BYTES|FRACTION] [--max-num-batched-tokens N] [--max-num-seqs N]\n"
    "         [--no-prefix-caching] [--threads N] [--device cpu|cuda[:N]] [--url http://HOST:PORT [--api-key KEY]] [--json]\n"
    "         [--speculative ngram|DRAFT_DIR] [--draft-tokens K] [--speculative-disable-by-batch-size N] [--tensor-parallel N]\n"
    "         [--json-schema FILE]\n"
    "  bench-serve  N requests (default 64) on the serving engine (continuous batching, paged KV, prefix\n"
    "         caching): random prompt / output lengths within +-F (default 0.5) of P (128) and G (64), all\n"
    "         starting with S shared random tokens, kept C at a time (default 8) or arriving by a Poisson\n"
    "         process of R per second; greedy, eos ignored, after an unmeasured warm-up. Prints output and\n"
    "         total tok/s, req/s, goodput under the TTFT / TPOT objectives (default 1000 / 100 ms), TTFT,\n"
    "         TPOT, ITL and end-to-end latency (mean, p50, p90, p99), KV waste, preemptions, prefix hits;\n"
    "         --speculative: every request speculates (see generate), drafted and accepted tokens reported;\n"
    "         --speculative-disable-by-batch-size N: no drafts while N or more requests run (default 0: always);\n"
    "         --json-schema FILE: every request's output follows the schema (eos then allowed once it is complete);\n"
    "         --url: the same load through an OpenAI-compatible server's /v1/completions (streamed, C at a time;\n"
    "         MODEL only gives the tokenizer of the random prompts: the server's model)\n"
    "usage: onnx-genai serve [MODEL] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--served-model-name NAME]\n"
    "         [--threads N] [--device cpu|cuda[:N]] [--max-num-seqs N] [--max-num-batched-tokens N] [--block-size B]\n"
    "         [--kv-cache-memory BYTES|FRACTION] [--no-prefix-caching] [--max-queued-requests N] [--max-body-bytes N]\n"
    "         [--http-threads N] [--read-timeout S] [--drain-timeout S] [--speculative ngram|DRAFT_DIR] [--draft-tokens K]\n"
    "         [--speculative-disable-by-batch-size N] [--fast-forward] [--tensor-parallel N]\n"
    "  serve  an OpenAI-compatible HTTP server on the serving engine: POST /v1/chat/completions, /v1/completions\n"
    "         (stream: server-sent events), /tokenize, /detokenize; GET /v1/models, /health, /metrics (Prometheus)\n"
    "         and / (a chat page). --port 0 picks a free port; --api-key requires 'Authorization: Bearer KEY' on\n"
    "         /v1/*; --max-queued-requests (default 1024) bounds requests in flight (more get 503 + Retry-After);\n"
    "         --speculative: every request speculates (see generate; under a response_format or forced tool call too),\n"
    "         not while --speculative-disable-by-batch-size N or more requests run (default 0: always);\n"
    "         --fast-forward: constrained requests draft the text their grammar forces (see generate);\n"
    "         --max-body-bytes (default 16 MiB) bounds bodies (413); SIGTERM/SIGINT stops accepting and drains\n"
    "         running requests for at most --drain-timeout seconds (default 30), then exits 0\n"
    "usage: onnx-genai run [MODEL] [--system TEXT] [--greedy] [--max-new-tokens N] [--threads N] [--device cpu|cuda[:N]]\n"
    "         [--max-input-bytes N] [--tensor-parallel N]\n"
    "  run    chat with the model (its chat template), one line per user turn; /help lists the commands\n"
    "usage: onnx-genai eval-ppl [MODEL] --text FILE [--window N] [--stride N] [--threads N] [--device cpu|cuda[:N]] [--json]\n"
    "         [--max-input-bytes N]\n"
    "  eval-ppl  perplexity of the text in FILE (tokenized without special tokens), Hugging Face's\n"
    "         sliding-window protocol: windows of N tokens (default: the context length, at most 512)\n"
    "         every --stride tokens (default half a window), each scoring the tokens no earlier window\n"
    "         scored; prints tokens, scored tokens, total NLL, ppl and seconds\n"
    "  --max-input-bytes N (generate, tokenize, eval-ppl, run): the most bytes read from stdin or --text FILE\n"
    "         (run: in one line; default 67108864, 64 MiB); more is an error\n"
    "Options take their value as the next argument or after '='; a value that is itself an option name is\n"
    "refused (--prompt --greedy), so pass such text after '=': --prompt=--greedy\n";

// Errors are one line on stderr, whatever the message holds.
int fail(const std::string& message) { return onnx_genai::cli::report(onnx_genai::cli::kExitFailed, message); }

int run_command(const std::vector<std::string>& args) {
  if (args.empty()) return fail("missing subcommand (try --help)");
  const auto is_help = [](const std::string& a) { return a == "--help" || a == "-h"; };
  if (args[0] == "help" || std::any_of(args.begin(), args.end(), is_help)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args[0] == "generate") return onnx_genai::cli::run_generate(std::span(args).subspan(1));
  if (args[0] == "tokenize") return onnx_genai::cli::run_tokenize(std::span(args).subspan(1));
  if (args[0] == "show") return onnx_genai::cli::run_show(std::span(args).subspan(1));
  if (args[0] == "bench") return onnx_genai::cli::run_bench(std::span(args).subspan(1));
  if (args[0] == "bench-serve") return onnx_genai::cli::run_bench_serve(std::span(args).subspan(1));
  if (args[0] == "serve") return onnx_genai::cli::run_serve(std::span(args).subspan(1));
  if (args[0] == "run") return onnx_genai::cli::run_chat(std::span(args).subspan(1));
  if (args[0] == "eval-ppl") return onnx_genai::cli::run_eval_ppl(std::span(args).subspan(1));
  if (args[0] != "exec") return fail("unknown subcommand '" + args[0] + "' (try --help)");
  auto options = onnx_genai::cli::parse_exec_options(std::span(args).subspan(1));
  if (!options.is_ok()) return fail(options.status().message());
  const onnx_genai::Status status = onnx_genai::cli::run_exec(*options);
  return status.is_ok() ? 0 : fail(status.message());
}

// Commands write stdout through stdio without checking each write; a failed write leaves the
// stream's error flag set, so one check here catches them all.
int check_stdout(int exit_code) {
  if (std::fflush(stdout) != 0) return fail(std::string("cannot write standard output: ") + std::strerror(errno));
  if (std::ferror(stdout)) return fail("cannot write standard output (a write failed)");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 1;
  // Errors are values inside; this boundary turns what escapes (a library's exception, an
  // allocation that failed) into the same one-line error.
  try {
    exit_code = run_command(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::bad_alloc&) {
    exit_code = fail("out of memory");
  } catch (const std::exception& error) {
    exit_code = fail(std::string("internal error: ") + error.what());
  } catch (...) {
    exit_code = fail("internal error: an unknown exception");
  }
  return check_stdout(exit_code);
}
