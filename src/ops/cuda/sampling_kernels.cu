// onnx_genai SampleTokens on the GPU (contract in ops/schema/sampling.h): the host Sampler's pick
// for each row, token for token, while the logits stay on the device.
//
// Exactness. Every number the host's choice depends on is computed with the host's operations,
// each rounded on its own: the temperature's division, softmax.h's exp (exp_nonpositive below:
// __fmul_rn / __fadd_rn keep nvcc from contracting into FMAs, which the host's -ffp-contract=off
// forbids too; the constants come from softmax_constants.h), the fixed-point weights and their
// integer sums (exact, so no summation order can change them), the rank keys that order equal
// logits by id, top-p's mass threshold and the draw's target. Where the host selects by partial
// sorts, this kernel selects by radix over the same keys; both find the same cut.
//
// Masks (structured output). A row with a mask reads its bit per token where it reads the logit:
// a token it forbids enters every phase as -inf, after the NaN / +inf check saw its logit, which
// is the host's order (check_logits, then the constraint processor, then the chain).
//
// Work split. One thread-block cluster of kClusterBlocks blocks per row. Block r owns the slice
// [r * S, (r + 1) * S) of the vocabulary (S = ceil(V / kClusterBlocks) rounded up to kSliceAlign
// tokens) and keeps its tokens' logits after the temperature in shared memory when
// S <= kMaxCachedTokens (else it recomputes them from the logits, which stay in L2):
//
//   row b:  | block 0's slice | block 1's slice | ... | block 7's slice |    (V = 151936: 18992 each)
//
// Phases; each ends in one cluster barrier, after which every block reads all blocks' partials
// through distributed shared memory and takes the same decision (so all blocks of a cluster take
// the same branches and meet at the same barriers):
//   scan    the largest logit M, tokens in play, a NaN / +inf seen, greedy's best rank key
//   top-k   4 rounds of an 8-bit radix select over order keys: the k-th key, by counts
//   top-p   4 rounds over order keys by fixed-point weight (the first round's total gives the mass
//           threshold); equal logits at the cut are split in id order by a running count
//   draw    each thread sums the weights of a contiguous run of its block's slice; a block scan and
//           the cluster's block totals place the target in one thread's run, which walks it in id
//           order, as the host's running sum does
// Exchanged partials alternate between two buffers, so a barrier per phase is enough: a buffer is
// written again only after the next barrier, by which time every block has read it. Each warp
// histograms a round into its own bins (add_to_bins), which the block then sums.
//
// Cost on an H200, one 151936-token f32 row (B = 8 takes the same: one cluster per row), a CUDA
// graph replay: greedy 8 us, temperature alone 21 us, temperature + top-k 50 + top-p 0.9 75 us,
// temperature + top-p 0.9 + min-p 101 us. A round costs 5-10 us (a pass over the slice, a barrier
// and its merge); top-p without top-k spends most of its time in its first round, where every
// token in play falls into the few bins of a digit of sign and exponent.
#include <cooperative_groups.h>

#include <cfloat>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "sampling/softmax_constants.h"
#include "ops/cuda/device_types.cuh"
#include "ops/cuda/sampling_kernels.h"
#include "ops/schema/sampling_layout.h"

namespace onnx_genai::cuda {

namespace {

namespace cg = cooperative_groups;
using u64 = unsigned long long;  // what atomicAdd and the shuffles take

constexpr int kClusterBlocks = 8;  // portable cluster size: 8 SMs share a row
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;  // <= kThreads: one bin per thread when merging
constexpr int kDigits = 32 / kDigitBits;
// Tokens of a block's slice kept in shared memory (160 KiB of floats): V up to 327680 is cached.
constexpr int64_t kMaxCachedTokens = 40960;
// Slices start on multiples of this many tokens, so that 16-byte loads of a row that starts on a
// 16-byte boundary (any vocabulary of a multiple of 8 tokens) stay aligned in every slice.
constexpr int64_t kSliceAlign = 8;
// Dynamic shared memory: each warp's private histogram (weights, counts), then the slice's cache.
constexpr size_t kWarpHistogramBytes = size_t{kWarps} * kBins * (sizeof(unsigned long long) + sizeof(uint32_t));
constexpr uint32_t kNone = 0xffffffffu;  // no id found
// order_key(-FLT_MAX): every finite logit's key is at most this, -inf's is above it, so a key
// limit of at most this also leaves out the tokens out of play.
constexpr uint32_t kLastFiniteKey = 0xff7fffffu;
constexpr float kMinPMargin = 1e-4f;     // MinP::apply's kMargin

// ---- The host sampler's arithmetic, operation for operation ----------------------------------

// softmax.h's exp_nonpositive.
__device__ __forceinline__ float exp_nonpositive(float x) {
  using namespace sampling;
  const bool representable = x > kExpLowest;  // false for NaN too
  const float clamped = representable ? x : kExpLowest;
  const float shifted = __fadd_rn(__fmul_rn(clamped, kExpLog2e), kExpRoundingShift);
  const float k = __fsub_rn(shifted, kExpRoundingShift);
  const float r = __fsub_rn(__fsub_rn(clamped, __fmul_rn(k, kExpLn2Hi)), __fmul_rn(k, kExpLn2Lo));
  float poly = kExpPoly7;
  poly = __fadd_rn(__fmul_rn(poly, r), kExpPoly6);
  poly = __fadd_rn(__fmul_rn(poly, r), kExpPoly5);
  poly = __fadd_rn(__fmul_rn(poly, r), kExpPoly4);
  poly = __fadd_rn(__fmul_rn(poly, r), kExpPoly3);
  poly = __fadd_rn(__fmul_rn(poly, r), kExpPoly2);
  poly = __fadd_rn(__fmul_rn(poly, r), 1.0f);
  poly = __fadd_rn(__fmul_rn(poly, r), 1.0f);
  const float two_to_k = __uint_as_float((__float_as_uint(shifted) + 127u) << 23);
  const uint32_t keep_mask = 0u - static_cast<uint32_t>(representable);
  return __uint_as_float(__float_as_uint(__fmul_rn(poly, two_to_k)) & keep_mask);
}

// softmax.h's to_fixed: exact scaling, truncating conversion.
__device__ __forceinline__ u64 to_fixed(float weight) {
  return static_cast<u64>(__double2ll_rz(__dmul_rn(static_cast<double>(weight), sampling::kWeightScale)));
}

// The high half of softmax.h's rank_key: ascending order is descending logit, -0 and +0 alike.
__device__ __forceinline__ uint32_t order_key(float logit) {
  const uint32_t bits = __float_as_uint(__fadd_rn(logit, 0.0f));
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

__device__ __forceinline__ u64 rank_key(uint32_t order, uint32_t id) { return (u64{order} << 32) | id; }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Temperature::apply as Candidates::transform stores it: -inf stays out of play, NaN goes out,
// an overflow to +inf becomes the largest float. Temperature 1 is no step at all.
__device__ __forceinline__ float apply_temperature(float logit, float temperature) {
  if (logit == -INFINITY || temperature == 1.0f) return logit;
  const float scaled = __fdiv_rn(logit, temperature);
  if (scaled != scaled) return -INFINITY;
  return scaled > FLT_MAX ? FLT_MAX : scaled;
}

// sampling::mass_threshold(fraction, total) - 1: the running mass must exceed this.
__device__ __forceinline__ u64 mass_target(float fraction, u64 total) {
  return __double2ull_rz(ceil(__dmul_rn(static_cast<double>(fraction), __ull2double_rn(total)))) - 1;
}

// The host draw's target: uniform over [0, total), clamped where the product rounds up to total.
__device__ __forceinline__ u64 draw_target(double uniform, u64 total) {
  const u64 target = __double2ull_rz(__dmul_rn(uniform, __ull2double_rn(total)));
  return target < total - 1 ? target : total - 1;
}

// SamplingParams::validate()'s ranges for these four, a whole top_k, a uniform below 1 (or NaN).
__device__ __forceinline__ bool valid_params(const float* p, double uniform, int64_t mask_rows) {
  const float t = p[kSampleTemperature], k = p[kSampleTopK], top_p = p[kSampleTopP], min_p = p[kSampleMinP];
  const float slot = p[kSampleMaskSlot];
  return isfinite(t) && t >= 0.0f && isfinite(k) && k >= 0.0f && k == floorf(k) && top_p > 0.0f && top_p <= 1.0f &&
         min_p >= 0.0f && min_p <= 1.0f && uniform < 1.0 && slot >= 0.0f && slot == floorf(slot) &&
         slot <= static_cast<float>(mask_rows);
}

// ---- Block and cluster plumbing --------------------------------------------------------------

// What a block shares with its cluster in one phase.
struct Exchange {
  uint32_t count[kBins];
  u64 weight[kBins];
  float max;
  uint32_t in_play;
  uint32_t invalid;
  u64 best_key;
  u64 sum;
  uint32_t found;
};

// The cluster's partials of a phase, combined once by warp 0 (a lane per block) for its block.
struct Combined {
  float max;
  uint32_t in_play;
  uint32_t invalid;
  u64 best_key;
  u64 before;  // this block's place in a running sum over the cluster
  u64 total;
  uint32_t found;
};

struct Shared {
  Exchange exchange[2];
  Combined combined;
  uint32_t merged_count[kBins];
  u64 merged_weight[kBins];
  u64 slots[kWarps];  // block reductions and scans
  uint32_t chosen_bin;
  u64 chosen_before;
};

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, u64* raw_slots) {
  T* slots = reinterpret_cast<T*>(raw_slots);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // the slots' previous readers are done
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = v;
  __syncthreads();
  T result = slots[0];
  for (int w = 1; w < kWarps; ++w) result = op(result, slots[w]);
  return result;
}

// The sum of `v` over the threads before this one; `total` gets the block's sum.
__device__ u64 block_exclusive_scan(u64 v, u64& total, u64* slots) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  u64 inclusive = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const u64 up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  __syncthreads();
  if (lane == 31) slots[warp] = inclusive;
  __syncthreads();
  u64 before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? slots[w] : 0;
    total += slots[w];
  }
  return before + inclusive - v;
}

// Adds each lane's count (1) and weight to its bin (bin < 0: nothing) in the warp's private
// histogram. Where the warp's tokens fall into a few bins (a digit of sign and exponent over a
// dense row), per-lane atomics on one address would serialize: one lane per bin adds the bin's
// count and its weights summed over the warp (full-warp redux, in two parts that cannot overflow
// 32 bits: a weight is at most 2^44, 32 of them below 2^49: 23 low bits, 22 high). Where they
// spread over many bins, each lane adds its own. Every lane of the warp calls it.
constexpr int kAggregatedBins = 4;
__device__ __forceinline__ void add_to_bins(uint32_t* count, u64* weight, int bin, u64 w, bool counts, bool weights) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const unsigned leaders = __ballot_sync(0xffffffffu, bin >= 0 && lane == __ffs(peers) - 1);
  if (__popc(leaders) > kAggregatedBins) {
    if (bin < 0) return;
    if (counts) atomicAdd(&count[bin], 1u);
    if (w != 0) atomicAdd(&weight[bin], w);
    return;
  }
  for (unsigned rest = leaders; rest != 0; rest &= rest - 1) {
    const int leader = __ffs(rest) - 1;
    const int b = __shfl_sync(0xffffffffu, bin, leader);
    u64 sum = 0;
    if (weights) {
      const bool in_bin = bin == b;
      const unsigned low = __reduce_add_sync(0xffffffffu, in_bin ? static_cast<unsigned>(w & 0x7fffffu) : 0u);
      const unsigned high = __reduce_add_sync(0xffffffffu, in_bin ? static_cast<unsigned>(w >> 23) : 0u);
      sum = (u64{high} << 23) + low;
    }
    if (lane == leader) {
      if (counts) atomicAdd(&count[b], static_cast<uint32_t>(__popc(peers)));
      if (sum != 0) atomicAdd(&weight[b], sum);
    }
  }
}

// Tokens of a block's slice per thread in flight: the loads of a pass are issued together.
constexpr int kUnroll = 8;

__host__ __device__ constexpr int64_t slice_tokens(int64_t vocab) {
  const int64_t even = (vocab + kClusterBlocks - 1) / kClusterBlocks;
  return (even + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
}

// One row as one block of its cluster sees it.
template <typename T>
struct Row {
  cg::cluster_group cluster;
  Shared& sh;
  const T* logits;   // the row's sampled position, [vocab]
  u64* warp_weights;        // [kWarps, kBins] private histograms (dynamic shared memory)
  uint32_t* warp_counts;    // [kWarps, kBins]
  float* cache;      // the slice's logits after the temperature, or null
  const u64* mask = nullptr;  // the row's allowed tokens (bit sets), or null: all
  int64_t mask_tokens = 0;    // ids the mask covers; those past it are not allowed
  int64_t begin = 0;  // the slice: token ids [begin, begin + size)
  int64_t size = 0;
  float temperature = 1.0f;
  float max = -INFINITY;  // M, once scanned
  int phase = 0;

  __device__ Row(cg::cluster_group c, Shared& s, const T* row, unsigned char* dynamic, bool cached, int64_t vocab)
      : cluster(c), sh(s), logits(row) {
    warp_weights = reinterpret_cast<u64*>(dynamic);
    warp_counts = reinterpret_cast<uint32_t*>(warp_weights + kWarps * kBins);
    cache = cached ? reinterpret_cast<float*>(warp_counts + kWarps * kBins) : nullptr;
    const int64_t slice = slice_tokens(vocab);
    begin = min64(vocab, slice * static_cast<int64_t>(c.block_rank()));
    size = min64(vocab, begin + slice) - begin;
  }

  __device__ float raw(int64_t i) const { return to_float(logits[begin + i]); }
  // f(i, logit) for every token of the slice with its logit as the model gave it, loaded kPacks
  // 16-byte packs per thread at a time when the slice is 16-byte aligned, else one by one.
  template <typename F>
  __device__ void for_each_raw(F&& f) const {
    constexpr int kVec = 16 / sizeof(T);
    constexpr int kPacks = 4;
    const T* slice = logits + begin;
    const int64_t packs = reinterpret_cast<uintptr_t>(slice) % 16 == 0 ? size / kVec : 0;
    for (int64_t first = 0; first < packs; first += int64_t{kThreads} * kPacks) {
      float x[kPacks][kVec];
#pragma unroll
      for (int u = 0; u < kPacks; ++u) {
        const int64_t p = first + u * kThreads + threadIdx.x;
        if (p < packs) load_floats<T, kVec>(slice + p * kVec, x[u]);
      }
#pragma unroll
      for (int u = 0; u < kPacks; ++u) {
        const int64_t p = first + u * kThreads + threadIdx.x;
        if (p < packs) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) f(p * kVec + e, x[u][e]);
        }
      }
    }
    for (int64_t i = packs * kVec + threadIdx.x; i < size; i += kThreads) f(i, raw(i));
  }
  // Whether the mask lets token begin + i be drawn.
  __device__ bool allowed(int64_t i) const {
    const int64_t t = begin + i;
    return mask == nullptr || (t < mask_tokens && ((mask[t >> 6] >> (t & 63)) & 1));
  }
  // Token begin + i's logit after the mask and the temperature, as the host chain leaves it.
  __device__ float processed(int64_t i, float x) const { return allowed(i) ? apply_temperature(x, temperature) : -INFINITY; }
  __device__ float scaled(int64_t i) const { return cache != nullptr ? cache[i] : processed(i, raw(i)); }
  // Its fixed-point weight exp(logit - M), as softmax.h's exp_weights and to_fixed give it.
  __device__ u64 weight(float logit) const { return to_fixed(exp_nonpositive(__fsub_rn(logit, max))); }

  __device__ Exchange& mine() { return sh.exchange[phase & 1]; }
  __device__ Exchange& of(unsigned rank) { return *cluster.map_shared_rank(&sh.exchange[phase & 1], rank); }
  // Publishes this phase's partials; after it, of(r) reads block r's.
  __device__ void barrier() { cluster.sync(); }
  __device__ void next_phase() { ++phase; }
};

// ---- Phases ----------------------------------------------------------------------------------

struct Scan {
  bool invalid = false;
  uint32_t in_play = 0;
  u64 best_key = ~0ull;  // greedy's pick: the lowest rank key in play
};

// Fills the cache and finds M (into row.max), the tokens in play and whether a logit is NaN / +inf.
template <typename T>
__device__ Scan scan_row(Row<T>& row, bool greedy) {
  float max = -INFINITY;
  uint32_t in_play = 0, invalid = 0;
  uint32_t best_key = kNone, best_id = kNone;  // each thread visits its tokens in ascending id order
  row.for_each_raw([&](int64_t i, float x) {
    invalid |= !(x < INFINITY);  // checked over every token, masked or not, as the host checks first
    const float logit = row.processed(i, x);
    if (row.cache != nullptr) row.cache[i] = logit;
    if (logit != -INFINITY) {
      max = logit > max ? logit : max;
      ++in_play;
      const uint32_t key = order_key(logit);
      if (greedy && key < best_key) {
        best_key = key;
        best_id = static_cast<uint32_t>(row.begin + i);
      }
    }
  });
  u64 best = rank_key(best_key, best_id);
  max = block_reduce(max, [](float a, float b) { return a > b ? a : b; }, row.sh.slots);
  in_play = block_reduce(in_play, [](uint32_t a, uint32_t b) { return a + b; }, row.sh.slots);
  invalid = block_reduce(invalid, [](uint32_t a, uint32_t b) { return a | b; }, row.sh.slots);
  best = block_reduce(best, [](u64 a, u64 b) { return a < b ? a : b; }, row.sh.slots);
  Exchange& mine = row.mine();
  if (threadIdx.x == 0) {
    mine.max = max;
    mine.in_play = in_play;
    mine.invalid = invalid;
    mine.best_key = best;
  }
  row.barrier();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    float m = -INFINITY;
    uint32_t n = 0, bad = 0;
    u64 key = ~0ull;
    if (lane < kClusterBlocks) {
      const Exchange& e = row.of(lane);
      m = e.max;
      n = e.in_play;
      bad = e.invalid;
      key = e.best_key;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, m, offset);
      m = other > m ? other : m;
      n += __shfl_xor_sync(0xffffffffu, n, offset);
      bad |= __shfl_xor_sync(0xffffffffu, bad, offset);
      key = min(key, __shfl_xor_sync(0xffffffffu, key, offset));
    }
    if (lane == 0) row.sh.combined = Combined{m, n, bad, key, 0, 0, kNone};
  }
  __syncthreads();
  const Combined& c = row.sh.combined;
  row.max = c.max;
  Scan scan;
  scan.in_play = c.in_play;
  scan.invalid = c.invalid != 0;
  scan.best_key = c.best_key;
  row.next_phase();
  return scan;
}

struct Selected {
  uint32_t key = 0;  // the order key at which the running measure passes the target
  u64 rest = 0;      // the target less the measure of the smaller keys
  uint32_t count = 0;  // candidates with exactly this key (counted in the last round)
  u64 weight = 0;      // their weight (by weight only)
};

// Merges the cluster's histograms of this round into sh.merged_* and returns the bin where the
// running measure (in bin order) passes `target`, and the measure of the bins before it. When
// `fraction` >= 0 the target is first set to mass_target(fraction, total weight).
template <typename T>
__device__ uint32_t choose_bin(Row<T>& row, bool by_weight, float fraction, u64& target, u64& before) {
  Shared& sh = row.sh;
  for (int j = threadIdx.x; j < 2 * kBins; j += kThreads) {  // counts and weights on separate threads
    const int b = j % kBins;
    if (j < kBins) {
      uint32_t count = 0;
      for (unsigned r = 0; r < kClusterBlocks; ++r) count += row.of(r).count[b];
      sh.merged_count[b] = count;
    } else {
      u64 weight = 0;
      for (unsigned r = 0; r < kClusterBlocks; ++r) weight += row.of(r).weight[b];
      sh.merged_weight[b] = weight;
    }
  }
  __syncthreads();
  const bool binned = threadIdx.x < kBins;
  const u64 measure = !binned ? 0 : by_weight ? sh.merged_weight[threadIdx.x] : sh.merged_count[threadIdx.x];
  if (threadIdx.x == 0) {  // unreachable fallback (the target always lies below the total); ordered by the scan's barriers
    sh.chosen_bin = kBins - 1;
    sh.chosen_before = 0;
  }
  u64 total = 0;
  const u64 excl = block_exclusive_scan(measure, total, sh.slots);
  if (fraction >= 0.0f) target = mass_target(fraction, total);
  if (binned && excl <= target && target - excl < measure) {
    sh.chosen_bin = threadIdx.x;
    sh.chosen_before = excl;
  }
  __syncthreads();
  before = sh.chosen_before;
  return sh.chosen_bin;
}

// The smallest order key among the candidates (order key <= limit <= kLastFiniteKey: in play) at
// which the running measure in key order exceeds `target`: counts (the target-th + 1 smallest
// key) or, by weight, the mass cut with target mass_target(top_p, total candidate weight).
// Candidates of weight 0 are skipped by weight: they can never be the cut (weights only fall along
// the order).
template <typename T>
__device__ Selected radix_select(Row<T>& row, bool by_weight, u64 target, float top_p, uint32_t limit) {
  Selected s;
  uint32_t prefix = 0;
  for (int round = 0; round < kDigits; ++round) {
    const int shift = 32 - kDigitBits * (round + 1);
    const bool last = round == kDigits - 1;
    for (int j = threadIdx.x; j < kWarps * kBins; j += kThreads) {
      row.warp_counts[j] = 0;
      row.warp_weights[j] = 0;
    }
    __syncthreads();
    uint32_t* counts_of_warp = row.warp_counts + threadIdx.x / 32 * kBins;
    u64* weights_of_warp = row.warp_weights + threadIdx.x / 32 * kBins;
    // Candidates share the digits chosen so far: key & high_mask == prefix.
    const uint32_t high_mask = shift + kDigitBits >= 32 ? 0u : ~0u << (shift + kDigitBits);
    const bool counts = !by_weight || last;
    // kUnroll tokens per thread at a time: their bins first, then (only where a lane of the warp
    // has one) the histogram updates, so that a pass over tokens outside the prefix runs freely.
    const int size = static_cast<int>(row.size);
    for (int base = 0; base < size; base += kThreads * kUnroll) {
      int bin[kUnroll];
      u64 weight[kUnroll];
      bool any = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
        const float logit = i < size ? row.scaled(i) : -INFINITY;
        const uint32_t key = order_key(logit);
        bin[u] = -1;
        weight[u] = 0;
        if (key <= limit && (key & high_mask) == prefix) {  // in play: limit <= kLastFiniteKey
          weight[u] = by_weight ? row.weight(logit) : 0;
          if (!by_weight || weight[u] != 0) bin[u] = static_cast<int>((key >> shift) & (kBins - 1));
        }
        any = any || bin[u] >= 0;
      }
      if (!__any_sync(0xffffffffu, any)) continue;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (__any_sync(0xffffffffu, bin[u] >= 0)) add_to_bins(counts_of_warp, weights_of_warp, bin[u], weight[u], counts, by_weight);
      }
    }
    __syncthreads();
    Exchange& mine = row.mine();  // the block's histogram, for the cluster
    for (int j = threadIdx.x; j < 2 * kBins; j += kThreads) {
      const int b = j % kBins;
      if (j < kBins) {
        uint32_t count = 0;
        for (int w = 0; w < kWarps; ++w) count += row.warp_counts[w * kBins + b];
        mine.count[b] = count;
      } else {
        u64 weight = 0;
        for (int w = 0; w < kWarps; ++w) weight += row.warp_weights[w * kBins + b];
        mine.weight[b] = weight;
      }
    }
    row.barrier();
    u64 before = 0;
    const uint32_t bin = choose_bin(row, by_weight, by_weight && round == 0 ? top_p : -1.0f, target, before);
    prefix |= bin << shift;
    target -= before;
    if (last) {
      s.count = row.sh.merged_count[bin];
      s.weight = row.sh.merged_weight[bin];
    }
    row.next_phase();
  }
  s.key = prefix;
  s.rest = target;
  return s;
}

// A thread's contiguous run of its block's slice, [lo, hi): runs follow the id order, so sums
// over them, scanned over the block and the cluster, are the row's running sums in id order.
struct Run {
  int64_t lo = 0, hi = 0;
};

template <typename T>
__device__ Run my_run(const Row<T>& row) {
  const int64_t length = (row.size + kThreads - 1) / kThreads;
  const int64_t lo = min64(row.size, static_cast<int64_t>(threadIdx.x) * length);
  return {lo, min64(row.size, lo + length)};
}

// Where this thread's run starts in the row's running sum, given each thread's run sum; `total`
// gets the row's whole sum.
template <typename T>
__device__ u64 place_run(Row<T>& row, u64 sum, u64& total) {
  u64 block_total = 0;
  const u64 excl = block_exclusive_scan(sum, block_total, row.sh.slots);
  if (threadIdx.x == 0) row.mine().sum = block_total;
  row.barrier();
  if (threadIdx.x < 32) {  // lane r: block r's sum, scanned over the lanes
    const unsigned lane = threadIdx.x;
    const u64 own = lane < kClusterBlocks ? row.of(lane).sum : 0;
    u64 inclusive = own;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const u64 up = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (static_cast<int>(lane) >= offset) inclusive += up;
    }
    const u64 before = __shfl_sync(0xffffffffu, inclusive - own, row.cluster.block_rank());
    const u64 all = __shfl_sync(0xffffffffu, inclusive, kClusterBlocks - 1);
    if (lane == 0) {
      row.sh.combined.before = before;
      row.sh.combined.total = all;
    }
  }
  __syncthreads();
  total = row.sh.combined.total;
  const u64 before = row.sh.combined.before;
  row.next_phase();
  return before + excl;
}

// The token that one thread of the cluster found (every other thread passes kNone), known to all.
template <typename T>
__device__ uint32_t agree_on_found(Row<T>& row, uint32_t found) {
  Exchange& mine = row.mine();
  if (threadIdx.x == 0) mine.found = kNone;
  __syncthreads();
  if (found != kNone) mine.found = found;
  row.barrier();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    uint32_t agreed = lane < kClusterBlocks ? row.of(lane).found : kNone;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) agreed = min(agreed, __shfl_xor_sync(0xffffffffu, agreed, offset));
    if (lane == 0) row.sh.combined.found = agreed;
  }
  __syncthreads();
  const uint32_t agreed = row.sh.combined.found;
  row.next_phase();
  return agreed;
}

// What is left after top-k and top-p, and min-p's test, as the draw sees a token.
struct Filters {
  uint32_t top_k_limit = kLastFiniteKey;  // order keys above this were cut by top-k (or are -inf)
  u64 top_p_limit = ~0ull;       // rank keys above this were cut by top-p
  bool min_p_on = false;
  float min_p = 0.0f;
  float log_min_p = 0.0f;

  __device__ bool keeps(float logit, uint32_t id, float max) const {
    if (logit == -INFINITY) return false;
    const uint32_t key = order_key(logit);
    if (key > top_k_limit || rank_key(key, id) > top_p_limit) return false;
    if (!min_p_on) return true;
    // MinP::apply: in log space away from the threshold, by exp near it.
    const float gap = __fsub_rn(logit, max);
    if (gap > __fadd_rn(log_min_p, kMinPMargin)) return true;
    if (gap < __fsub_rn(log_min_p, kMinPMargin)) return false;
    return exp_nonpositive(gap) >= min_p;
  }
};

// TopP::apply: keeps the tokens ranked at or before the one where the mass reaches top_p of the
// candidates' total. Returns that token's rank key.
template <typename T>
__device__ u64 top_p_limit(Row<T>& row, float top_p, uint32_t top_k_limit) {
  const Selected cut = radix_select(row, /*by_weight=*/true, 0, top_p, top_k_limit);
  if (cut.count == 0 || cut.weight == 0) return ~0ull;  // unreachable: the cut's bin holds the target
  // The cut's tokens share one logit, hence one weight: the first `needed` of them in id order
  // bring the running mass past the target.
  const u64 each = cut.weight / cut.count;
  const u64 needed = cut.rest / each + 1;
  if (needed >= cut.count) return rank_key(cut.key, kNone);
  // The needed-th of them in id order: a running count.
  const auto tied = [&row, key = cut.key](int64_t i) -> u64 {
    const float logit = row.scaled(i);
    return logit != -INFINITY && order_key(logit) == key ? 1 : 0;
  };
  const Run run = my_run(row);
  u64 count = 0;
  for (int64_t i = run.lo; i < run.hi; ++i) count += tied(i);
  u64 total = 0;
  u64 running = place_run(row, count, total);
  const u64 target = needed - 1;
  uint32_t found = kNone;
  if (running <= target && target - running < count) {
    for (int64_t i = run.lo; i < run.hi && found == kNone; ++i) {
      running += tied(i);
      if (running > target) found = static_cast<uint32_t>(row.begin + i);
    }
  }
  return rank_key(cut.key, agree_on_found(row, found));
}

// The host's inverse-CDF draw: the running weight of the kept tokens in id order passes the
// uniform's target at the drawn token. A thread's weights are kept in its run of the cache (the
// logits are not needed after), so the thread whose run holds the target walks it without
// recomputing them.
template <typename T>
__device__ int64_t draw(Row<T>& row, const Filters& filters, double uniform) {
  const auto weight_of = [&row, &filters](int64_t i) {
    const float logit = row.scaled(i);
    return filters.keeps(logit, static_cast<uint32_t>(row.begin + i), row.max)
               ? exp_nonpositive(__fsub_rn(logit, row.max))
               : 0.0f;
  };
  const Run run = my_run(row);
  u64 sum = 0;
  for (int64_t i = run.lo; i < run.hi; ++i) {
    const float weight = weight_of(i);
    sum += to_fixed(weight);
    if (row.cache != nullptr) row.cache[i] = weight;
  }
  u64 total = 0;
  u64 running = place_run(row, sum, total);
  if (total == 0) return kSampleNothingLeft;  // unreachable: the largest logit is always kept
  const u64 target = draw_target(uniform, total);
  uint32_t found = kNone;
  if (running <= target && target - running < sum) {
    for (int64_t i = run.lo; i < run.hi && found == kNone; ++i) {
      running += to_fixed(row.cache != nullptr ? row.cache[i] : weight_of(i));
      if (running > target) found = static_cast<uint32_t>(row.begin + i);
    }
  }
  const uint32_t token = agree_on_found(row, found);
  return token == kNone ? kSampleNothingLeft : token;
}

template <typename T>
__device__ int64_t sample_row(Row<T>& row, const float* params, double uniform) {
  const float temperature = params[kSampleTemperature];
  const bool greedy = temperature == 0.0f;
  row.temperature = greedy ? 1.0f : temperature;  // greedy skips the shaping steps
  const Scan scan = scan_row(row, greedy);
  if (scan.invalid) return kSampleInvalidLogits;
  if (scan.in_play == 0) return kSampleNothingLeft;
  if (greedy) return static_cast<int64_t>(scan.best_key & 0xffffffffu);
  Filters filters;
  // TopK::apply: nothing to cut unless 0 < k < the tokens in play.
  const float top_k = params[kSampleTopK];
  if (top_k > 0.0f && top_k < static_cast<float>(scan.in_play)) {
    filters.top_k_limit = radix_select(row, /*by_weight=*/false, static_cast<u64>(top_k) - 1, 0.0f, kLastFiniteKey).key;
  }
  const float top_p = params[kSampleTopP];
  if (top_p < 1.0f) filters.top_p_limit = top_p_limit(row, top_p, filters.top_k_limit);
  filters.min_p = params[kSampleMinP];
  filters.min_p_on = filters.min_p > 0.0f;
  filters.log_min_p = filters.min_p_on ? logf(filters.min_p) : 0.0f;
  return draw(row, filters, uniform);
}

struct KernelArgs {
  const void* logits;  // [batch, positions, vocab]
  const float* params;
  const double* uniforms;
  int64_t* tokens;
  const u64* allowed;  // [mask_rows, mask_words], or null
  int64_t positions, vocab, mask_rows, mask_words;
  bool cached;  // the dynamic shared memory holds a slice's logits
};

template <typename T>
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads) sample_tokens_kernel(KernelArgs a) {
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  __shared__ Shared sh;
  const int64_t b = blockIdx.x / kClusterBlocks;
  cg::cluster_group cluster = cg::this_cluster();
  const bool lead = cluster.block_rank() == 0 && threadIdx.x == 0;
  const double uniform = a.uniforms[b];
  const float* params = a.params + b * kSampleParamCount;
  // Decided from the inputs alone, identically in every block, before any shared memory is
  // exchanged: these blocks may leave without the final barrier.
  if (uniform < 0.0) {
    if (lead) a.tokens[b] = kSampleNoToken;
    return;
  }
  if (!valid_params(params, uniform, a.mask_rows)) {
    if (lead) a.tokens[b] = kSampleInvalidParams;
    return;
  }
  const T* logits = static_cast<const T*>(a.logits) + ((b + 1) * a.positions - 1) * a.vocab;
  Row<T> row(cluster, sh, logits, dynamic_smem, a.cached, a.vocab);
  const auto slot = static_cast<int64_t>(params[kSampleMaskSlot]);
  if (slot > 0) {
    row.mask = a.allowed + (slot - 1) * a.mask_words;
    row.mask_tokens = a.mask_words * 64;
  }
  const int64_t token = sample_row(row, params, uniform);
  if (lead) a.tokens[b] = token;
  cluster.sync();  // no block leaves while another may still read its shared memory
}

template <typename T>
auto kernel_for() {
  return sample_tokens_kernel<T>;
}

}  // namespace

bool sample_tokens_supported(DType dtype) { return listed(FloatTypes{}, dtype); }

Status prepare_sample_tokens(DType dtype) {
  cudaError_t err = cudaSuccess;
  const bool known = dispatch_float_type(dtype, [&]<typename T>() {
    err = cudaFuncSetAttribute(kernel_for<T>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kWarpHistogramBytes + kMaxCachedTokens * sizeof(float)));
  });
  if (!known) return OG_ERROR("SampleTokens: no CUDA kernel for logits of dtype ", dtype_name(dtype));
  return cuda_status(err, "raising the SampleTokens kernel's shared-memory limit");
}

Status launch_sample_tokens(const SampleTokensArgs& args, void* stream) {
  if (args.batch == 0) return Status::ok();
  const int64_t slice = slice_tokens(args.vocab);
  const bool cached = slice <= kMaxCachedTokens;
  const KernelArgs k{args.logits,     args.params, args.uniforms, args.tokens, reinterpret_cast<const u64*>(args.allowed),
                     args.positions, args.vocab,  args.mask_rows, args.mask_words, cached};
  const size_t smem = kWarpHistogramBytes + (cached ? static_cast<size_t>(slice) * sizeof(float) : 0);
  const bool known = dispatch_float_type(args.dtype, [&]<typename T>() {
    kernel_for<T>()<<<dim3(static_cast<unsigned>(args.batch * kClusterBlocks)), dim3(kThreads), smem,
                      static_cast<cudaStream_t>(stream)>>>(k);
  });
  if (!known) return OG_ERROR("SampleTokens: no CUDA kernel for logits of dtype ", dtype_name(args.dtype));
  return launch_status("SampleTokens kernel");
}

}  // namespace onnx_genai::cuda
