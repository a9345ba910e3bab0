// Greedy decoding in ONNX Runtime (onnxruntime-node, CPU): the reference for whole-model tests.
// Runs the prefill of a batch of prompts, then N decode steps feeding back each row's argmax
// (ties to the lowest id) and binding every present.{i}.key/value output as the next step's
// past_key_values.{i}.key/value.
//
//   node ort_decode.mjs MODEL OUT_DIR (--prompts JSON | --prompts-file FILE) [--steps N]
//        [--padding left|right] [--logits all|last] [--threads N]
//
// MODEL is a model folder or an .onnx file; a genai_config.json beside it gives the input and
// output names, pad_token_id, the KV head count and head size (for symbolic cache dims) and, for
// a folder, the file name; without one: model.onnx, input_ids, attention_mask, position_ids,
// past_key_values.%d.key/value, logits, present.%d.key/value, pad id 0. Prompts are a JSON list
// of token-id lists, one per batch row, of any lengths. Shorter rows are padded on the
// --padding side: right by default when genai_config says past_present_share_buffer
// (GroupQueryAttention, where a row's tokens must start at cache slot 0; onnxruntime-genai pads
// so), left otherwise (Hugging Face's convention). attention_mask is 1 on real tokens;
// position_ids (when the model has that input) count a row's real tokens from 0, and are 0 on
// pads.
//
// OUT_DIR gets ort_run.mjs's folder format (manifest.json = [{name, dtype, dims, file}] plus raw
// little-endian files) with, for each step k = 0 (prefill) .. N:
//   step{k}.input_ids, step{k}.attention_mask, step{k}.position_ids (if an input): the feeds
//   step{k}.logits        [B, S, V] (S = 1 for decode steps); with --logits last the prefill
//                         keeps only each row's last real position, [B, 1, V]
//   step{k}.next_tokens   [B] int64, the greedy pick from that step
// and generated [B, N + 1] int64, every row's picks in order.
//
// Exit status: 0 on success; 2 with one line on stderr for any failure.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

export function loadOrt() {
  const require = createRequire(path.join(HERE, 'package.json'));
  try {
    return require('onnxruntime-node');
  } catch (e) {
    throw new Error(`onnxruntime-node is not installed in ${HERE} (${String(e.message).split('\n')[0]}); ` +
                    'run: cd tests/oracle && ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts');
  }
}

function parseArgs(argv) {
  const args = { steps: 8, threads: 1, padding: null, logits: 'all', prompts: null };
  const positional = [];
  const value = (i) => {
    if (i >= argv.length) throw new Error(`${argv[i - 1]} wants a value`);
    return argv[i];
  };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    if (arg === '--prompts') args.prompts = JSON.parse(value(++i));
    else if (arg === '--prompts-file') args.prompts = JSON.parse(fs.readFileSync(value(++i), 'utf8'));
    else if (arg === '--steps') args.steps = Number(value(++i));
    else if (arg === '--threads') args.threads = Number(value(++i));
    else if (arg === '--padding') args.padding = value(++i);
    else if (arg === '--logits') args.logits = value(++i);
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
    else positional.push(arg);
  }
  if (positional.length !== 2 || args.prompts === null) {
    throw new Error('usage: node ort_decode.mjs MODEL OUT_DIR (--prompts JSON | --prompts-file FILE) [--steps N] ' +
                    '[--padding left|right] [--logits all|last] [--threads N]');
  }
  [args.model, args.outDir] = positional;
  if (!Number.isInteger(args.steps) || args.steps < 0) {
    throw new Error(`--steps wants an integer >= 0, got ${args.steps}`);
  }
  if (!Number.isInteger(args.threads) || args.threads < 1) throw new Error(`--threads wants a positive integer`);
  if (args.padding !== null && !['left', 'right'].includes(args.padding)) throw new Error('--padding is left or right');
  if (!['all', 'last'].includes(args.logits)) throw new Error('--logits is all or last');
  const rows = args.prompts;
  if (!Array.isArray(rows) || rows.length === 0 ||
      !rows.every((r) => Array.isArray(r) && r.length > 0 && r.every((t) => Number.isInteger(t) && t >= 0))) {
    throw new Error('prompts must be a non-empty JSON list of non-empty lists of token ids');
  }
  return args;
}

// The model file and its I/O names, from the genai_config.json beside it when there is one.
// A CPU session as every oracle and bench script runs it: `threads` intra-op threads, sequential.
export function createSession(ort, file, threads) {
  return ort.InferenceSession.create(file, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
}

// Runs body(ort, session, desc) with `modelArg`'s decoder loaded, releasing the session after.
export async function withDecoderSession(modelArg, threads, body) {
  const ort = loadOrt();
  const desc = describeModel(modelArg);
  const session = await createSession(ort, desc.file, threads);
  try {
    return await body(ort, session, desc);
  } finally {
    await session.release();
  }
}

export function describeModel(modelArg) {
  const desc = {
    file: modelArg, inputIds: 'input_ids', attentionMask: 'attention_mask', positionIds: 'position_ids',
    pastKey: 'past_key_values.%d.key', pastValue: 'past_key_values.%d.value', logits: 'logits',
    presentKey: 'present.%d.key', presentValue: 'present.%d.value', padTokenId: 0, sharedBuffer: false,
  };
  const isDir = fs.statSync(modelArg).isDirectory();
  const configPath = path.join(isDir ? modelArg : path.dirname(modelArg), 'genai_config.json');
  if (isDir) desc.file = path.join(modelArg, 'model.onnx');
  if (!fs.existsSync(configPath)) return desc;
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const decoder = config.model?.decoder ?? {};
  const inputs = decoder.inputs ?? {};
  const outputs = decoder.outputs ?? {};
  if (isDir && decoder.filename) desc.file = path.join(modelArg, decoder.filename);
  Object.assign(desc, {
    inputIds: inputs.input_ids ?? desc.inputIds, attentionMask: inputs.attention_mask ?? desc.attentionMask,
    positionIds: inputs.position_ids ?? desc.positionIds, pastKey: inputs.past_key_names ?? desc.pastKey,
    pastValue: inputs.past_value_names ?? desc.pastValue, logits: outputs.logits ?? desc.logits,
    presentKey: outputs.present_key_names ?? desc.presentKey,
    presentValue: outputs.present_value_names ?? desc.presentValue,
    padTokenId: config.model?.pad_token_id ?? 0, sharedBuffer: Boolean(config.search?.past_present_share_buffer),
    kvHeads: decoder.num_key_value_heads, headSize: decoder.head_size,
  });
  return desc;
}

// Every past input of the model with the present output that feeds it next step.
export function cachePairs(session, desc) {
  const pairs = [];
  for (let layer = 0; ; ++layer) {
    const found = [[desc.pastKey, desc.presentKey], [desc.pastValue, desc.presentValue]]
      .map(([past, present]) => [past.replace('%d', layer), present.replace('%d', layer)])
      .filter(([past]) => session.inputNames.includes(past));
    if (found.length === 0) break;
    for (const [past, present] of found) {
      if (!session.outputNames.includes(present)) throw new Error(`model has input ${past} but no output ${present}`);
      const meta = session.inputMetadata.find((m) => m.name === past);
      pairs.push({ past, present, type: meta.type, shape: meta.shape });
    }
  }
  return pairs;
}

// float16 bits -> number, for the argmax over float16 logits.
export function halfToFloat(h) {
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function argmax(data, offset, count, isHalf) {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < count; ++i) {
    const v = isHalf ? halfToFloat(data[offset + i]) : data[offset + i];
    if (v > bestValue) {
      bestValue = v;
      best = i;
    }
  }
  return best;
}

class Recorder {
  constructor(outDir) {
    this.outDir = outDir;
    this.manifest = [];
    fs.mkdirSync(outDir, { recursive: true });
  }

  add(name, tensor) {
    const file = `t${this.manifest.length}.bin`;
    const data = tensor.data;
    fs.writeFileSync(path.join(this.outDir, file), new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    this.manifest.push({ name, dtype: tensor.type, dims: tensor.dims.map(Number), file });
  }

  finish() {
    fs.writeFileSync(path.join(this.outDir, 'manifest.json'), JSON.stringify(this.manifest, null, 1));
  }
}

// The prefill feeds: padded ids, mask and positions, and each row's last real column.
export function prefillFeeds(ort, prompts, padding, padTokenId) {
  const batch = prompts.length;
  const width = Math.max(...prompts.map((p) => p.length));
  const ids = new BigInt64Array(batch * width).fill(BigInt(padTokenId));
  const mask = new BigInt64Array(batch * width);
  const positions = new BigInt64Array(batch * width);
  const lastColumn = [];
  prompts.forEach((prompt, b) => {
    const start = padding === 'left' ? width - prompt.length : 0;
    prompt.forEach((token, j) => {
      ids[b * width + start + j] = BigInt(token);
      mask[b * width + start + j] = 1n;
      positions[b * width + start + j] = BigInt(j);
    });
    lastColumn.push(start + prompt.length - 1);
  });
  const dims = [batch, width];
  return {
    ids: new ort.Tensor('int64', ids, dims), mask: new ort.Tensor('int64', mask, dims),
    positions: new ort.Tensor('int64', positions, dims), lastColumn,
  };
}

// [batch, kv_heads, 0, head_size]; symbolic head dims come from genai_config.json.
export function emptyPast(ort, pair, batch, desc) {
  const fallback = [batch, desc.kvHeads, 0, desc.headSize];
  const dims = pair.shape.map((d, i) => (i === 0 || i === 2 ? fallback[i] : Number.isInteger(d) ? d : fallback[i]));
  if (dims.length !== 4 || !dims.every((d) => Number.isInteger(d))) {
    throw new Error(`${pair.past} has dims [${pair.shape}]; symbolic heads or head size need genai_config.json`);
  }
  const ArrayType = { float32: Float32Array, float16: Uint16Array }[pair.type];
  if (!ArrayType) throw new Error(`${pair.past} has unsupported dtype ${pair.type}`);
  return new ort.Tensor(pair.type, new ArrayType(0), dims);
}

// The last real position's logits of each row, [B, 1, V].
function lastLogits(ort, logits, lastColumn) {
  const [batch, seq, vocab] = logits.dims.map(Number);
  const out = new logits.data.constructor(batch * vocab);
  lastColumn.forEach((column, b) => {
    const begin = (b * seq + column) * vocab;
    out.set(logits.data.subarray(begin, begin + vocab), b * vocab);
  });
  return new ort.Tensor(logits.type, out, [batch, 1, vocab]);
}

// The next step's feeds: each row's pick, the mask grown by one real column, the position after
// the row's real tokens.
export function decodeFeeds(ort, mask, next) {
  const [batch, width] = mask.dims.map(Number);
  const grown = new BigInt64Array(batch * (width + 1));
  const positions = new BigInt64Array(batch);
  for (let b = 0; b < batch; ++b) {
    let real = 0n;
    for (let j = 0; j < width; ++j) {
      grown[b * (width + 1) + j] = mask.data[b * width + j];
      real += mask.data[b * width + j];
    }
    grown[b * (width + 1) + width] = 1n;
    positions[b] = real;
  }
  return {
    ids: new ort.Tensor('int64', BigInt64Array.from(next.map(BigInt)), [batch, 1]),
    mask: new ort.Tensor('int64', grown, [batch, width + 1]),
    positions: new ort.Tensor('int64', positions, [batch, 1]),
    lastColumn: new Array(batch).fill(0),
  };
}

async function decode(ort, session, desc, args, recorder) {
  const batch = args.prompts.length;
  const padding = args.padding ?? (desc.sharedBuffer ? 'right' : 'left');
  const pairs = cachePairs(session, desc);
  const hasPositions = session.inputNames.includes(desc.positionIds);
  let { ids, mask, positions, lastColumn } = prefillFeeds(ort, args.prompts, padding, desc.padTokenId);
  let past = Object.fromEntries(pairs.map((p) => [p.past, emptyPast(ort, p, batch, desc)]));
  const generated = [];
  for (let step = 0; step <= args.steps; ++step) {
    const feeds = { [desc.inputIds]: ids, [desc.attentionMask]: mask, ...past };
    if (hasPositions) feeds[desc.positionIds] = positions;
    const results = await session.run(feeds);
    let logits = results[desc.logits];
    if (!logits) throw new Error(`model has no output ${desc.logits}`);
    const [, seq, vocab] = logits.dims.map(Number);
    const isHalf = logits.type === 'float16';
    const next = lastColumn.map((column, b) => argmax(logits.data, (b * seq + column) * vocab, vocab, isHalf));
    generated.push(next);
    recorder.add(`step${step}.input_ids`, ids);
    recorder.add(`step${step}.attention_mask`, mask);
    if (hasPositions) recorder.add(`step${step}.position_ids`, positions);
    if (args.logits === 'last' && seq > 1) logits = lastLogits(ort, logits, lastColumn);
    recorder.add(`step${step}.logits`, logits);
    recorder.add(`step${step}.next_tokens`, new ort.Tensor('int64', BigInt64Array.from(next.map(BigInt)), [batch]));

    past = Object.fromEntries(pairs.map((p) => [p.past, results[p.present]]));
    ({ ids, mask, positions, lastColumn } = decodeFeeds(ort, mask, next));
  }
  const flat = BigInt64Array.from(args.prompts.flatMap((_, b) => generated.map((row) => BigInt(row[b]))));
  recorder.add('generated', new ort.Tensor('int64', flat, [batch, args.steps + 1]));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  await withDecoderSession(args.model, args.threads, async (ort, session, desc) => {
    const recorder = new Recorder(args.outDir);
    await decode(ort, session, desc, args, recorder);
    recorder.finish();
  });
}

// Only as a script: bench/ort_generate_bench.mjs imports the helpers above.
if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`ort_decode: ${String(e.message ?? e).split('\n')[0]}`);
    process.exit(2);
  });
}
