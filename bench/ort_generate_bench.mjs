// ONNX Runtime side of the generation benchmark: the greedy loop of tests/oracle/ort_decode.mjs,
// timed the way `onnx-genai bench` times ours, on the same model file.
//
//   node bench/ort_generate_bench.mjs MODEL [--prompt-len P] [--gen-len G] [--repeat R]
//        [--threads N] [--kv shared|concat]
//
// One batch row: the synthetic prompt of src/cli/bench_command.cc (id i*7919+13 mod vocab), one
// prefill run, then exactly G single-token decode runs feeding back the argmax. One untimed
// warm-up, then R timed runs. Prints JSON: prefill_tok_s (prompt tokens over prefill run time),
// decode_tok_s (decode runs over their time, argmax and feed building included), ttft_ms
// (prefill run + first pick), ort_version, threads, kv.
//
// Outputs are bound as onnxruntime-genai binds them on CPU: with past_present_share_buffer
// (GroupQueryAttention, --kv shared, the default when genai_config.json says so) every
// past_key_values tensor is one [1, kv_heads, P + G, head_size] buffer per layer, bound both as
// the input and as the pre-allocated present output, so the kernel appends in place; with --kv
// concat each step's present outputs are fed back as the next past. Logits are pre-allocated too,
// so the Node binding neither zero-fills nor copies them. Session: intraOpNumThreads N, interOp 1,
// sequential, graphOptimizationLevel 'all' (ORT's default spinning).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  argmax, cachePairs, decodeFeeds, emptyPast, prefillFeeds, withDecoderSession,
} from '../tests/oracle/ort_decode.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function parseArgs(argv) {
  const args = { promptLen: 128, genLen: 32, repeat: 3, threads: 1, kv: null, model: null };
  const numeric = { '--prompt-len': 'promptLen', '--gen-len': 'genLen', '--repeat': 'repeat', '--threads': 'threads' };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg in numeric || arg === '--kv') {
      if (i + 1 >= argv.length) throw new Error(`${arg} wants a value`);
      const value = argv[++i];
      if (arg === '--kv') {
        args.kv = value;
      } else {
        args[numeric[arg]] = Number(value);
        if (!Number.isInteger(args[numeric[arg]]) || args[numeric[arg]] < 1) {
          throw new Error(`${arg} wants a positive integer, got ${value}`);
        }
      }
    } else if (arg.startsWith('--')) {
      throw new Error(`unknown option ${arg}`);
    } else if (args.model === null) {
      args.model = arg;
    } else {
      throw new Error(`unexpected argument ${arg}`);
    }
  }
  if (args.model === null) {
    throw new Error('usage: node bench/ort_generate_bench.mjs MODEL [--prompt-len P] [--gen-len G] [--repeat R] ' +
                    '[--threads N] [--kv shared|concat]');
  }
  if (args.kv !== null && !['shared', 'concat'].includes(args.kv)) throw new Error('--kv is shared or concat');
  return args;
}

// The same ids as bench_command.cc's synthetic_prompt, within the logits' width.
function syntheticPrompt(length, vocab) {
  return Array.from({ length }, (_, i) => (i * 7919 + 13) % vocab);
}

const ArrayOf = { float32: Float32Array, float16: Uint16Array };

function typedArray(type, count, what) {
  const ArrayType = ArrayOf[type];
  if (!ArrayType) throw new Error(`${what} has unsupported dtype ${type}`);
  return new ArrayType(count);
}

// Pre-allocated outputs for one run: logits [1, S, V], and in shared mode the caches themselves.
function fetchesFor(ort, desc, session, shapes, caches, seq) {
  const fetches = { [desc.logits]: new ort.Tensor(shapes.logitsType, shapes.logitsBuffer(seq), [1, seq, shapes.vocab]) };
  for (const name of session.outputNames) {
    if (name !== desc.logits && !(name in caches.presents)) fetches[name] = null;
  }
  return Object.assign(fetches, caches.presents);
}

// The KV state of one generation: shared buffers bound as both past and present, or the growing
// concatenated caches (present outputs left to ORT and fed back).
function freshCaches(ort, pairs, desc, kv, capacity) {
  if (kv === 'concat') return { past: Object.fromEntries(pairs.map((p) => [p.past, emptyPast(ort, p, 1, desc)])), presents: {} };
  const past = {};
  const presents = {};
  for (const pair of pairs) {
    const dims = emptyPast(ort, pair, 1, desc).dims.map(Number);
    dims[2] = capacity;
    const tensor = new ort.Tensor(pair.type, typedArray(pair.type, dims.reduce((a, b) => a * b, 1), pair.past), dims);
    past[pair.past] = tensor;
    presents[pair.present] = tensor;
  }
  return { past, presents };
}

async function runStep(session, desc, hasPositions, feeds, caches, fetches) {
  const inputs = { [desc.inputIds]: feeds.ids, [desc.attentionMask]: feeds.mask, ...caches.past };
  if (hasPositions) inputs[desc.positionIds] = feeds.positions;
  return session.run(inputs, fetches);
}

// One generation: {prefillSeconds, ttftSeconds, decodeSeconds, tokens}.
async function generateOnce(ort, session, desc, ctx, args) {
  const caches = freshCaches(ort, ctx.pairs, desc, ctx.kv, args.promptLen + args.genLen);
  let feeds = prefillFeeds(ort, [ctx.prompt], 'right', desc.padTokenId);
  const pick = (results, column) => {
    const logits = results[desc.logits];
    return argmax(logits.data, column * ctx.shapes.vocab, ctx.shapes.vocab, logits.type === 'float16');
  };
  const adopt = (results) => {
    if (ctx.kv === 'concat') caches.past = Object.fromEntries(ctx.pairs.map((p) => [p.past, results[p.present]]));
  };
  const start = performance.now();
  let results = await runStep(session, desc, ctx.hasPositions, feeds, caches,
                              fetchesFor(ort, desc, session, ctx.shapes, caches, args.promptLen));
  const prefillEnd = performance.now();
  const tokens = [pick(results, args.promptLen - 1)];
  const ttftEnd = performance.now();
  adopt(results);
  const decodeFetches = fetchesFor(ort, desc, session, ctx.shapes, caches, 1);
  const decodeStart = performance.now();
  for (let step = 0; step < args.genLen; ++step) {
    feeds = decodeFeeds(ort, feeds.mask, [tokens[tokens.length - 1]]);
    results = await runStep(session, desc, ctx.hasPositions, feeds, caches, decodeFetches);
    tokens.push(pick(results, 0));
    adopt(results);
  }
  const decodeEnd = performance.now();
  return {
    prefillSeconds: (prefillEnd - start) / 1e3, ttftSeconds: (ttftEnd - start) / 1e3,
    decodeSeconds: (decodeEnd - decodeStart) / 1e3, tokens,
  };
}

// The logits' width and dtype from the session metadata (the vocabulary is the last dim).
function logitsShapes(session, desc, promptLen) {
  const meta = session.outputMetadata.find((m) => m.name === desc.logits);
  if (!meta) throw new Error(`model has no output ${desc.logits}`);
  const vocab = meta.shape[meta.shape.length - 1];
  if (!Number.isInteger(vocab)) throw new Error(`${desc.logits} has a symbolic vocabulary dim (${vocab})`);
  const buffers = new Map();
  const logitsBuffer = (seq) => {
    if (!buffers.has(seq)) buffers.set(seq, typedArray(meta.type, seq * vocab, desc.logits));
    return buffers.get(seq);
  };
  logitsBuffer(promptLen);
  return { vocab, logitsType: meta.type, logitsBuffer };
}

function ortVersion() {
  const pkg = path.join(repoRoot, 'tests/oracle/node_modules/onnxruntime-node/package.json');
  return JSON.parse(fs.readFileSync(pkg, 'utf8')).version;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  await withDecoderSession(args.model, args.threads, async (ort, session, desc) => {
    const shapes = logitsShapes(session, desc, args.promptLen);
    const ctx = {
      pairs: cachePairs(session, desc), hasPositions: session.inputNames.includes(desc.positionIds), shapes,
      kv: args.kv ?? (desc.sharedBuffer ? 'shared' : 'concat'), prompt: syntheticPrompt(args.promptLen, shapes.vocab),
    };
    const warmUp = await generateOnce(ort, session, desc, ctx, args);
    const runs = [];
    for (let r = 0; r < args.repeat; ++r) runs.push(await generateOnce(ort, session, desc, ctx, args));
    const sum = (key) => runs.reduce((total, run) => total + run[key], 0);
    if (runs.some((run) => run.tokens.join() !== warmUp.tokens.join())) throw new Error('greedy tokens differ between runs');
    console.log(JSON.stringify({
      engine: 'onnxruntime', ort_version: ortVersion(), prompt_len: args.promptLen, gen_len: args.genLen,
      repeat: args.repeat, threads: args.threads, kv: ctx.kv,
      prefill_tok_s: (args.promptLen * runs.length) / sum('prefillSeconds'),
      decode_tok_s: (args.genLen * runs.length) / sum('decodeSeconds'),
      ttft_ms: (sum('ttftSeconds') / runs.length) * 1e3,
      tokens: warmUp.tokens,
    }, null, 2));
  });
}

main().catch((e) => {
  console.error(`ort_generate_bench: ${String(e.message ?? e).split('\n')[0]}`);
  process.exit(2);
});
