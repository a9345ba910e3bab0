// Decode speed of a tensor-parallel decoder on the CPU (runtime/tensor_parallel_session.h):
//
//   build/bench/tp_bench MODEL.onnx RANKS THREADS_PER_RANK [TOKENS=64] [PROMPT=32]
//
// feeds a PROMPT-token prefill (ids 1..PROMPT), then TOKENS greedy single-token steps, each rank
// carrying its own KV cache, and prints the decode steps' tokens per second. RANKS = 1 runs the
// unsharded graph in one session of THREADS_PER_RANK threads: the baseline to compare with.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "runtime/tensor_parallel_session.h"

namespace og = onnx_genai;

namespace {

struct Ranks {
  og::TensorParallelSessions& tp;
  std::vector<std::map<std::string, og::Tensor>> past;  // per rank, by input name
};

og::Status init_past(Ranks& ranks) {
  ranks.past.resize(static_cast<size_t>(ranks.tp.world_size()));
  for (int r = 0; r < ranks.tp.world_size(); ++r) {
    for (const og::IoInfo& in : ranks.tp.rank(r).inputs()) {
      if (in.name.rfind("past_key_values.", 0) != 0) continue;
      OG_ASSIGN_OR_RETURN(ranks.past[static_cast<size_t>(r)][in.name],
                          og::Tensor::allocate(in.dtype, og::Shape{1, in.dims[1], 0, in.dims[3]}));
    }
  }
  return og::Status::ok();
}

// One decoder run over `ids` after `total - ids.size()` cached positions; returns the greedy pick.
og::Result<int64_t> step(Ranks& ranks, const std::vector<int64_t>& ids, int64_t total) {
  const auto n = static_cast<size_t>(ranks.tp.world_size());
  std::vector<std::vector<og::Tensor>> inputs(n), outputs(n);
  for (size_t r = 0; r < n; ++r) {
    og::Session& s = ranks.tp.rank(static_cast<int>(r));
    for (const og::IoInfo& in : s.inputs()) {
      if (in.name == "input_ids") {
        inputs[r].push_back(og::Tensor::from_vector<int64_t>(og::Shape{1, static_cast<int64_t>(ids.size())}, ids));
      } else if (in.name == "attention_mask") {
        inputs[r].push_back(og::Tensor::from_vector<int64_t>(og::Shape{1, total}, std::vector<int64_t>(static_cast<size_t>(total), 1)));
      } else {
        inputs[r].push_back(ranks.past[r].at(in.name));
      }
    }
    outputs[r].resize(s.outputs().size());
  }
  OG_RETURN_IF_ERROR(ranks.tp.run_into(inputs, outputs));
  int64_t pick = 0;
  for (size_t r = 0; r < n; ++r) {
    const auto& outs = ranks.tp.rank(static_cast<int>(r)).outputs();
    for (size_t o = 0; o < outs.size(); ++o) {
      if (outs[o].name.rfind("present.", 0) == 0) {
        ranks.past[r]["past_key_values." + outs[o].name.substr(8)] = outputs[r][o];
      } else if (outs[o].name == "logits" && r == 0) {
        const og::Tensor& logits = outputs[r][o];
        const int64_t vocab = logits.shape()[2];
        const float* row = logits.data<float>() + logits.numel() - vocab;
        pick = std::max_element(row, row + vocab) - row;
      }
    }
  }
  return pick;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tp_bench MODEL.onnx RANKS THREADS_PER_RANK [TOKENS=64] [PROMPT=32]\n");
    return 2;
  }
  const int world = std::atoi(argv[2]);
  og::SessionOptions options;
  options.num_threads = std::atoi(argv[3]);
  const int tokens = argc > 4 ? std::atoi(argv[4]) : 64;
  const int prompt = argc > 5 ? std::atoi(argv[5]) : 32;
  auto tp = og::TensorParallelSessions::load(argv[1], "logits", world, options);
  if (!tp.is_ok()) {
    std::fprintf(stderr, "tp_bench: %s\n", tp.status().message().c_str());
    return 1;
  }
  Ranks ranks{**tp, {}};
  std::vector<int64_t> ids(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) ids[static_cast<size_t>(i)] = i + 1;
  og::Status status = init_past(ranks);
  auto pick = status.is_ok() ? step(ranks, ids, prompt) : og::Result<int64_t>(status);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < tokens && pick.is_ok(); ++t) pick = step(ranks, {*pick}, prompt + t + 1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!pick.is_ok()) {
    std::fprintf(stderr, "tp_bench: %s\n", pick.status().message().c_str());
    return 1;
  }
  std::printf("ranks %d x %d threads: %d decode tokens in %.3f s = %.2f tok/s (last token %lld)\n", world,
              options.num_threads, tokens, seconds, tokens / seconds, static_cast<long long>(*pick));
  return 0;
}
