// Perplexity in ONNX Runtime (onnxruntime-node, CPU): the reference for onnx-genai's eval-ppl.
// Hugging Face's sliding-window loop (transformers' perplexity guide), written out on its own:
//
//   prev_end = 0
//   for begin in 0, stride, 2 * stride, ...:
//     end = min(begin + window, n); target_len = end - prev_end      (tokens not scored yet)
//     logits = model(ids[begin:end]) with an empty KV cache
//     labels = the window's last target_len tokens; each is scored by the logits one position
//              before it, so the window's first token never is
//     prev_end = end; stop when end == n
//   ppl = exp(sum of NLL / number of scored tokens)
//
// Log-softmax in double (JavaScript numbers) over the float32/float16 logits.
//
//   node ort_ppl.mjs MODEL --tokens-file FILE --window N [--stride N] [--threads N]
//
// MODEL is a model folder or an .onnx file, read as ort_decode.mjs reads it (genai_config.json
// names); FILE holds a JSON list of token ids. --stride defaults to window / 2. Prints one JSON
// object: {tokens, scored, window, stride, runs, nll, ppl}.
//
// Exit status: 0 on success; 2 with one line on stderr for any failure.
import fs from 'node:fs';

import { cachePairs, emptyPast, halfToFloat, prefillFeeds, withDecoderSession } from './ort_decode.mjs';

function parseArgs(argv) {
  const args = { model: null, tokens: null, window: null, stride: null, threads: 1 };
  const value = (i) => {
    if (i >= argv.length) throw new Error(`${argv[i - 1]} wants a value`);
    return argv[i];
  };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === '--tokens-file') args.tokens = JSON.parse(fs.readFileSync(value(++i), 'utf8'));
    else if (arg === '--window') args.window = Number(value(++i));
    else if (arg === '--stride') args.stride = Number(value(++i));
    else if (arg === '--threads') args.threads = Number(value(++i));
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
    else if (args.model === null) args.model = arg;
    else throw new Error(`unexpected argument ${arg}`);
  }
  if (args.model === null || args.tokens === null || args.window === null) {
    throw new Error('usage: node ort_ppl.mjs MODEL --tokens-file FILE --window N [--stride N] [--threads N]');
  }
  args.stride ??= Math.floor(args.window / 2);
  const ids = args.tokens;
  if (!Array.isArray(ids) || ids.length < 2 || !ids.every((t) => Number.isInteger(t) && t >= 0)) {
    throw new Error('the tokens file must hold a JSON list of at least 2 token ids');
  }
  if (!Number.isInteger(args.window) || args.window < 2) throw new Error('--window wants an integer >= 2');
  if (!Number.isInteger(args.stride) || args.stride < 1 || args.stride > args.window) {
    throw new Error('--stride wants an integer in [1, window]');
  }
  if (!Number.isInteger(args.threads) || args.threads < 1) throw new Error('--threads wants a positive integer');
  return args;
}

// -log softmax(row)[target] for the logits row starting at `offset`.
function negativeLogLikelihood(logits, offset, vocab, target) {
  const at = logits.type === 'float16' ? (i) => halfToFloat(logits.data[offset + i]) : (i) => logits.data[offset + i];
  let top = -Infinity;
  for (let i = 0; i < vocab; ++i) top = Math.max(top, at(i));
  let sum = 0;
  for (let i = 0; i < vocab; ++i) sum += Math.exp(at(i) - top);
  return top + Math.log(sum) - at(target);
}

async function perplexity(ort, session, desc, args) {
  const ids = args.tokens;
  const n = ids.length;
  const pairs = cachePairs(session, desc);
  const hasPositions = session.inputNames.includes(desc.positionIds);
  let nll = 0;
  let scored = 0;
  let runs = 0;
  let prevEnd = 0;
  for (let begin = 0; begin < n; begin += args.stride) {
    const end = Math.min(begin + args.window, n);
    const targetLength = end - prevEnd;
    const windowIds = ids.slice(begin, end);
    const { ids: idsTensor, mask, positions } = prefillFeeds(ort, [windowIds], 'right', desc.padTokenId);
    const feeds = { [desc.inputIds]: idsTensor, [desc.attentionMask]: mask };
    if (hasPositions) feeds[desc.positionIds] = positions;
    for (const pair of pairs) feeds[pair.past] = emptyPast(ort, pair, 1, desc);
    const results = await session.run(feeds);
    const logits = results[desc.logits];
    if (!logits) throw new Error(`model has no output ${desc.logits}`);
    const [, seq, vocab] = logits.dims.map(Number);
    if (seq !== windowIds.length) throw new Error(`logits cover ${seq} positions of a ${windowIds.length}-token window`);
    ++runs;
    for (let j = Math.max(1, windowIds.length - targetLength); j < windowIds.length; ++j) {
      nll += negativeLogLikelihood(logits, (j - 1) * vocab, vocab, windowIds[j]);
      ++scored;
    }
    prevEnd = end;
    if (end === n) break;
  }
  return { tokens: n, scored, window: args.window, stride: args.stride, runs, nll, ppl: Math.exp(nll / scored) };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const result = await withDecoderSession(args.model, args.threads, (ort, session, desc) =>
    perplexity(ort, session, desc, args));
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_ppl: ${String(e.message ?? e).split('\n')[0]}`);
  process.exit(2);
});
