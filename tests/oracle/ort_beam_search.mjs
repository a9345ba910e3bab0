// Beam search over ONNX Runtime (onnxruntime-node, CPU) with Hugging Face transformers' semantics
// (beam_search_reference.mjs): the reference for onnx-genai's beam search on whole models.
//
//   node ort_beam_search.mjs MODEL --cases JSON
//
// JSON is a list of cases, each {"prompts": [[ids...], ...], "num_beams": N, "max_new_tokens": M,
// and optionally "length_penalty": F, "early_stopping": true | false | "never",
// "num_return_sequences": K, "eos": [ids] (default: genai_config.json's model.eos_token_id),
// "repetition_penalty": F, "no_repeat_ngram_size": N, "min_new_tokens": N}; one model session
// serves them all.
//
// As transformers runs it: every prompt is repeated num_beams times into one padded batch
// (ort_decode.mjs's padding and feeds), each step's last-position logits go through log_softmax
// and then the logit processors (repetition penalty, no-repeat n-grams, min new tokens) on the
// log-probs, and the presents are reordered along the batch by the beams' parents before they
// become the next step's past.
//
// Prints {"cases": [{"sequences": [[{"tokens": [...generated], "score": S}, ...] per prompt]}]}.
// Exit status: 0 on success; 2 with one line on stderr for any failure.
import fs from 'node:fs';
import path from 'node:path';

import {
  BeamSearchReference, logSoftmax, minNewTokens, noRepeatNgram, repetitionPenalty,
} from './beam_search_reference.mjs';
import {
  cachePairs, decodeFeeds, emptyPast, halfToFloat, prefillFeeds, withDecoderSession,
} from './ort_decode.mjs';

function parseArgs(argv) {
  if (argv.length !== 3 || argv[1] !== '--cases') throw new Error('usage: node ort_beam_search.mjs MODEL --cases JSON');
  const defaults = {
    num_beams: 1, max_new_tokens: 8, length_penalty: 1, early_stopping: false, num_return_sequences: 1, eos: null,
    repetition_penalty: 1, no_repeat_ngram_size: 0, min_new_tokens: 0,
  };
  const cases = JSON.parse(argv[2]).map((c) => ({ ...defaults, ...c }));
  for (const c of cases) {
    if (![true, false, 'never'].includes(c.early_stopping)) throw new Error('early_stopping is true, false or "never"');
    if (!Array.isArray(c.prompts) || c.prompts.length === 0) throw new Error('a case needs prompts');
  }
  return { model: argv[0], cases };
}

function configEos(model) {
  const dir = fs.statSync(model).isDirectory() ? model : path.dirname(model);
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8'));
  const eos = config.model?.eos_token_id ?? [];
  return Array.isArray(eos) ? eos : [eos];
}

// Row `row` of a [rows, ...] tensor's data, for every row in `order`, as one new tensor.
function gatherRows(ort, tensor, order) {
  const dims = tensor.dims.map(Number);
  const per = dims.slice(1).reduce((a, b) => a * b, 1);
  const out = new tensor.data.constructor(order.length * per);
  order.forEach((source, row) => out.set(tensor.data.subarray(source * per, (source + 1) * per), row * per));
  return new ort.Tensor(tensor.type, out, [order.length, ...dims.slice(1)]);
}

async function search(ort, session, desc, model, args) {
  const eosIds = args.eos ?? configEos(model);
  const beams = args.num_beams;
  const rowsPrompts = args.prompts.flatMap((p) => new Array(beams).fill(p));  // repeat_interleave
  const batch = rowsPrompts.length;
  const padding = desc.sharedBuffer ? 'right' : 'left';
  const pairs = cachePairs(session, desc);
  const hasPositions = session.inputNames.includes(desc.positionIds);
  let { ids, mask, positions, lastColumn } = prefillFeeds(ort, rowsPrompts, padding, desc.padTokenId);
  let past = Object.fromEntries(pairs.map((p) => [p.past, emptyPast(ort, p, batch, desc)]));
  let histories = rowsPrompts.map((p) => [...p]);
  let reference = null;
  for (;;) {
    const feeds = { [desc.inputIds]: ids, [desc.attentionMask]: mask, ...past };
    if (hasPositions) feeds[desc.positionIds] = positions;
    const results = await session.run(feeds);
    const logits = results[desc.logits];
    const [, seq, vocab] = logits.dims.map(Number);
    reference ??= new BeamSearchReference({
      batch: args.prompts.length, numBeams: beams, vocab, eosIds, lengthPenalty: args.length_penalty,
      earlyStopping: args.early_stopping, maxNewTokens: args.max_new_tokens,
    });
    const rows = lastColumn.map((column, r) => {
      const begin = (r * seq + column) * vocab;
      const raw = Array.from(logits.data.subarray(begin, begin + vocab), (x) => (logits.type === 'float16' ? halfToFloat(x) : x));
      const scores = logSoftmax(raw);
      const prompt = args.prompts[Math.floor(r / beams)];
      repetitionPenalty(scores, histories[r], args.repetition_penalty);
      noRepeatNgram(scores, histories[r], args.no_repeat_ngram_size);
      minNewTokens(scores, histories[r].length - prompt.length, args.min_new_tokens, eosIds);
      return scores;
    });
    const { beamIndices, tokens } = reference.step(rows);
    if (reference.done) break;
    histories = beamIndices.map((source, r) => [...histories[source], tokens[r]]);
    past = Object.fromEntries(pairs.map((p) => [p.past, gatherRows(ort, results[p.present], beamIndices)]));
    ({ ids, mask, positions, lastColumn } = decodeFeeds(ort, gatherRows(ort, mask, beamIndices), tokens));
  }
  return { sequences: reference.results(args.num_return_sequences) };
}

async function main() {
  const { model, cases } = parseArgs(process.argv.slice(2));
  const results = await withDecoderSession(model, 1, async (ort, session, desc) => {
    const out = [];
    for (const c of cases) out.push(await search(ort, session, desc, model, c));
    return out;
  });
  process.stdout.write(`${JSON.stringify({ cases: results })}\n`);
}

main().catch((e) => {
  console.error(`ort_beam_search: ${String(e.message ?? e).split('\n')[0]}`);
  process.exit(2);
});
