// Hugging Face transformers' beam search, restated in JavaScript from its source as the reference
// for onnx-genai's (src/genai/beam_search.h). It follows transformers' tensor formulation of
// GenerationMixin._beam_search (generation/utils.py: _get_top_k_continuations,
// _get_running_beams_for_next_iteration, _update_finished_beams, _check_early_stop_heuristic,
// _beam_search_has_unfinished_sequences) step by step, with fixed-size arrays of num_beams
// "finished" slots holding -1e9 placeholders, the -1e9 masks and top-k merges, rather than a list
// of hypotheses. Values are rounded to float32 (Math.fround) where transformers' tensors are
// float32. torch.topk leaves the order of equal values open; here ties go to the lower index.
//
//   const search = new BeamSearchReference({ batch, numBeams, vocab, eosIds, lengthPenalty,
//                                           earlyStopping /* true | false | 'never' */, maxNewTokens });
//   while (!search.done) {
//     rows = processedLogProbs(search.running)   // [batch * numBeams] rows of vocab log-probs
//     const { beamIndices, tokens } = search.step(rows);   // reorder the cache by beamIndices
//   }
//   search.results(numReturnSequences)   // per prompt: [{ tokens, score }], best first
//
// Also the logit processors transformers runs inside beam search, on log-probs:
// logSoftmax, repetitionPenalty, noRepeatNgram, minNewTokens.

const f32 = Math.fround;
const PUSHED_DOWN = -1.0e9;

// Indices of the k largest values, largest first; equal values in index order.
function topk(values, k) {
  const order = Array.from(values.keys());
  order.sort((a, b) => (values[b] - values[a]) || (a - b));
  return order.slice(0, k);
}

export class BeamSearchReference {
  constructor({ batch, numBeams, vocab, eosIds, lengthPenalty = 1.0, earlyStopping = false, maxNewTokens }) {
    if (!(maxNewTokens >= 1)) throw new Error('maxNewTokens must be >= 1 (transformers needs a max_length)');
    Object.assign(this, { batch, numBeams, vocab, eosIds, lengthPenalty, earlyStopping, maxNewTokens });
    // transformers: beams_to_keep = max(2, 1 + n_eos_tokens) * num_beams.
    this.beamsToKeep = Math.max(2, 1 + eosIds.length) * numBeams;
    this.curLen = 0;  // generated tokens (transformers' cur_len - decoder_prompt_len)
    this.running = [];         // [batch][beam] generated tokens
    this.runningScores = [];   // [batch][beam]
    this.sequences = [];       // [batch][beam] finished slots' generated tokens
    this.beamScores = [];      // [batch][beam]
    this.isSentFinished = [];  // [batch][beam]
    this.heuristicUnsatisfied = [];  // [batch]
    for (let b = 0; b < batch; ++b) {
      this.running.push(Array.from({ length: numBeams }, () => []));
      this.runningScores.push(Array.from({ length: numBeams }, (_, i) => (i === 0 ? 0 : PUSHED_DOWN)));
      this.sequences.push(Array.from({ length: numBeams }, () => []));
      this.beamScores.push(new Array(numBeams).fill(PUSHED_DOWN));
      this.isSentFinished.push(new Array(numBeams).fill(false));
      this.heuristicUnsatisfied.push(true);
    }
    this.done = false;
  }

  // `rows`: [batch * numBeams] processed log-prob rows (row b * numBeams + i: beam i of prompt b).
  // Returns the flat row each new running beam continues, and its new token.
  step(rows) {
    const { numBeams, vocab, beamsToKeep } = this;
    const beamIndices = [];
    const tokens = [];
    let allHit = true;
    for (let b = 0; b < this.batch; ++b) {
      // b. accumulated log-probs over (beam, token)
      const accumulated = new Float64Array(numBeams * vocab);
      for (let i = 0; i < numBeams; ++i) {
        const row = rows[b * numBeams + i];
        for (let t = 0; t < vocab; ++t) accumulated[i * vocab + t] = f32(row[t] + this.runningScores[b][i]);
      }
      // c. _get_top_k_continuations
      const top = topk(accumulated, beamsToKeep);
      const topLogProbs = top.map((index) => accumulated[index]);
      const topSequences = top.map((index) => [...this.running[b][Math.floor(index / vocab)], index % vocab]);
      const topBeams = top.map((index) => Math.floor(index / vocab));
      // d. stopping criteria on each continuation: max length, or an eos token
      const hits = top.map((index) => this.curLen + 1 >= this.maxNewTokens || this.eosIds.includes(index % vocab));
      allHit = allHit && hits.every(Boolean);
      // e. _get_running_beams_for_next_iteration
      const runningLogProbs = topLogProbs.map((v, k) => f32(v + (hits[k] ? PUSHED_DOWN : 0)));
      const next = topk(runningLogProbs, numBeams);
      // f. _update_finished_beams (with the flags as they stood before this step)
      const divisor = f32((this.curLen + 1) ** this.lengthPenalty);
      const full = this.isSentFinished[b].every(Boolean) && this.earlyStopping === true;
      const finishedScores = topLogProbs.map((v, k) => {
        let score = f32(v / divisor);
        if (full) score = f32(score + PUSHED_DOWN);
        if (!this.heuristicUnsatisfied[b]) score = f32(score + PUSHED_DOWN);
        if (!(hits[k] && k < numBeams)) score = f32(score + PUSHED_DOWN);
        return score;
      });
      const mergedScores = [...this.beamScores[b], ...finishedScores];
      const mergedSequences = [...this.sequences[b], ...topSequences];
      const mergedFinished = [...this.isSentFinished[b], ...hits.map((hit, k) => hit && k < numBeams)];
      const kept = topk(mergedScores, numBeams);
      this.sequences[b] = kept.map((k) => mergedSequences[k]);
      this.beamScores[b] = kept.map((k) => mergedScores[k]);
      this.isSentFinished[b] = kept.map((k) => mergedFinished[k]);

      this.running[b] = next.map((k) => topSequences[k]);
      this.runningScores[b] = next.map((k) => runningLogProbs[k]);
      for (const k of next) {
        beamIndices.push(b * numBeams + topBeams[k]);
        tokens.push(topSequences[k][topSequences[k].length - 1]);
      }
    }
    // g. cur_len + 1, the early-stop heuristic, and whether the loop goes on
    this.curLen += 1;
    const bestLength = this.earlyStopping === 'never' && this.lengthPenalty > 0 ? this.maxNewTokens : this.curLen;
    for (let b = 0; b < this.batch; ++b) {
      const bestPossible = f32(this.runningScores[b][0] / f32(bestLength ** this.lengthPenalty));
      const worstFinished = Math.min(...this.beamScores[b]);
      const improvable = this.isSentFinished[b].some((finished) => bestPossible > (finished ? worstFinished : PUSHED_DOWN));
      this.heuristicUnsatisfied[b] = this.heuristicUnsatisfied[b] && improvable;
    }
    const improvementPossible = this.heuristicUnsatisfied.some(Boolean);
    const existsOpenBeam = !(this.isSentFinished.every((row) => row.every(Boolean)) && this.earlyStopping === true);
    this.done = !(improvementPossible && existsOpenBeam && !allHit);
    return { beamIndices, tokens };
  }

  // transformers' output: each prompt's best `count` finished slots (sorted by score).
  results(count) {
    return this.sequences.map((slots, b) =>
      slots.slice(0, count).map((tokens, k) => ({ tokens, score: this.beamScores[b][k] })));
  }
}

// log_softmax of one row, in double, rounded to float32.
export function logSoftmax(logits) {
  let most = -Infinity;
  for (const x of logits) most = Math.max(most, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - most);
  const lse = most + Math.log(sum);
  return Float64Array.from(logits, (x) => f32(x - lse));
}

// RepetitionPenaltyLogitsProcessor over prompt + generated tokens.
export function repetitionPenalty(scores, tokens, penalty) {
  if (penalty === 1) return;
  for (const t of new Set(tokens)) scores[t] = f32(scores[t] < 0 ? scores[t] * penalty : scores[t] / penalty);
}

// NoRepeatNGramLogitsProcessor: bans every token that would complete an n-gram already present.
export function noRepeatNgram(scores, tokens, n) {
  if (n <= 0 || tokens.length + 1 < n) return;
  const prefix = tokens.slice(tokens.length - (n - 1)).join(',');
  for (let start = 0; start + n <= tokens.length; ++start) {
    if (tokens.slice(start, start + n - 1).join(',') === prefix) scores[tokens[start + n - 1]] = -Infinity;
  }
}

// MinNewTokensLengthLogitsProcessor: eos is banned until `minNew` tokens have been generated.
export function minNewTokens(scores, generatedCount, minNew, eosIds) {
  if (generatedCount >= minNew) return;
  for (const e of eosIds) scores[e] = -Infinity;
}
