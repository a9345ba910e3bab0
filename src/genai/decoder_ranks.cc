#include "genai/decoder_ranks.h"

namespace onnx_genai::genai {

Result<DecoderRanks> DecoderRanks::create(const ModelParts& parts, KvCacheLayout layout) {
  std::vector<Rank> ranks;
  const size_t n = parts.rank_io.size() + 1;
  for (size_t r = 0; r < n; ++r) {
    Session& session = r == 0 ? *parts.session : parts.ranks->rank(static_cast<int>(r));
    const DecoderIo& io = r == 0 ? parts.io : parts.rank_io[r - 1];
    layout.heads = io.kv_heads;
    layout.memory = &session.allocator();
    OG_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(layout, parts.kv_options));
    ranks.push_back(Rank{std::move(cache),
                         DecoderRunner(session, io, parts.info.pad_token_id, parts.decode_mask_at_capacity), {}});
  }
  return DecoderRanks(parts.ranks.get(), std::move(ranks));
}

Status DecoderRanks::run(std::span<const RunRow> rows, size_t first, LastPositions& last) {
  if (group_ == nullptr) return ranks_[0].runner.run(rows, first, ranks_[0].cache, last);
  // Only rank 0 samples: a sampler handed to every rank would draw once per rank.
  rank_rows_.assign(rows.begin(), rows.end());
  for (RunRow& row : rank_rows_) row.sampler = nullptr;
  return group_->run_ranks([&](int r) {
    Rank& rank = ranks_[static_cast<size_t>(r)];
    if (r == 0) return rank.runner.run(rows, first, rank.cache, last);
    const size_t needed = first + rows.size();
    if (rank.discarded.logits.size() < needed) {
      rank.discarded.logits.resize(needed);
      rank.discarded.tokens.resize(needed);
      rank.discarded.position_tokens.resize(needed);
    }
    return rank.runner.run(rank_rows_, first, rank.cache, rank.discarded);
  });
}

Status DecoderRanks::each_cache(const std::function<Status(KvCache&)>& fn) {
  for (Rank& rank : ranks_) OG_RETURN_IF_ERROR(fn(rank.cache));
  return Status::ok();
}

Status DecoderRanks::rewind(int64_t length) {
  return each_cache([&](KvCache& cache) { return cache.rewind(length); });
}

Status DecoderRanks::gather_rows(std::span<const int64_t> sources) {
  return each_cache([&](KvCache& cache) { return cache.gather_rows(sources); });
}

}  // namespace onnx_genai::genai
