// Shared by the engine tests: a step loop that adds requests at given steps and collects each
// one's tokens until all have finished.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "onnx_genai/engine.h"

namespace onnx_genai::testing {

struct Finished {
  std::vector<int32_t> tokens;
  genai::FinishReason reason = genai::FinishReason::kNone;
  int64_t cached_prompt_tokens = 0;
};

// Steps until every request finished; `arrivals[i]` is the step before which prompt i is added.
inline std::vector<Finished> run_all(genai::Engine& engine, const std::vector<std::vector<int32_t>>& ids,
                                     const genai::RequestParams& params, const std::vector<int>& arrivals,
                                     const std::vector<genai::RequestParams>* per_request = nullptr) {
  std::map<uint64_t, size_t> index;
  std::vector<Finished> done(ids.size());
  size_t added = 0, finished = 0;
  for (int step = 0; finished < ids.size(); ++step) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (arrivals[i] != step) continue;
      auto id = engine.add_request(ids[i], per_request ? (*per_request)[i] : params);
      EXPECT_TRUE(id.is_ok()) << id.status().message();
      index[*id] = i;
      ++added;
    }
    auto outputs = engine.step();
    EXPECT_TRUE(outputs.is_ok()) << outputs.status().message();
    if (!outputs.is_ok()) break;
    for (const genai::RequestOutput& out : *outputs) {
      Finished& f = done[index.at(out.id)];
      f.tokens.insert(f.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) {
        f.reason = out.reason;
        f.cached_prompt_tokens = out.cached_prompt_tokens;
        ++finished;
      }
    }
    EXPECT_LT(step, 5000) << "the engine stopped making progress";
    if (step >= 5000) break;
  }
  return done;
}

}  // namespace onnx_genai::testing
