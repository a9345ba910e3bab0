// Runs ONNX models in ONNX Runtime (onnxruntime-node, CPU) on inputs read from a folder and
// writes every model output to another folder: the reference the C++ oracle tests compare with.
//
//   node ort_run.mjs MODEL.onnx IN_DIR OUT_DIR [--threads N]
//   node ort_run.mjs --batch LIST [--threads N]
//
// --batch runs many models in one process (Node and ORT start once): LIST holds one case per
// line, `MODEL<TAB>IN_DIR<TAB>OUT_DIR`. A case that fails (ORT rejects the model or its inputs)
// writes OUT_DIR/error.txt with the one-line reason instead of outputs; the other cases go on.
//
// Folder format (both ways): manifest.json = [{name, dtype, dims, file}] plus one raw
// little-endian file per tensor. dtype is ORT's name: float32 float16 int64 int32 bool uint8 int8
// (float16 as its IEEE bits; bool one byte per element). Output files are named by position
// (output_<i>.bin) because output names may hold '/' or ':'.
// bfloat16 is absent: onnxruntime-node 1.30 has no bfloat16 tensor type.
//
// Exit status: 0 on success (in batch mode: every case ran or wrote its error.txt); 2 with one
// line on stderr for any other failure (missing package, bad manifest or list, model that ORT
// rejects in single-model mode).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ORT dtype name -> the typed array holding its little-endian bytes.
const kArrayTypes = {
  float32: Float32Array,
  float16: Uint16Array,
  int64: BigInt64Array,
  int32: Int32Array,
  bool: Uint8Array,
  uint8: Uint8Array,
  int8: Int8Array,
};

function loadOrt() {
  const require = createRequire(path.join(HERE, 'package.json'));
  try {
    return require('onnxruntime-node');
  } catch (e) {
    throw new Error(`onnxruntime-node is not installed in ${HERE} (${String(e.message).split('\n')[0]}); ` +
                    'run: cd tests/oracle && ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts');
  }
}

function parseArgs(argv) {
  const positional = [];
  let threads = 1;
  let batch = null;
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--threads') {
      threads = Number(argv[++i]);
      if (!Number.isInteger(threads) || threads < 1) throw new Error(`--threads wants a positive integer, got ${argv[i]}`);
    } else if (argv[i] === '--batch') {
      batch = argv[++i];
      if (!batch) throw new Error('--batch wants a list file');
    } else if (argv[i].startsWith('--')) {
      throw new Error(`unknown option ${argv[i]}`);
    } else {
      positional.push(argv[i]);
    }
  }
  if (batch !== null) {
    if (positional.length !== 0) throw new Error('--batch takes no MODEL IN_DIR OUT_DIR arguments');
    return { cases: readBatchList(batch), threads, batch: true };
  }
  if (positional.length !== 3) {
    throw new Error('usage: node ort_run.mjs MODEL.onnx IN_DIR OUT_DIR [--threads N] | --batch LIST [--threads N]');
  }
  const [model, inDir, outDir] = positional;
  return { cases: [{ model, inDir, outDir }], threads, batch: false };
}

function readBatchList(listPath) {
  const lines = fs.readFileSync(listPath, 'utf8').split('\n').filter((line) => line.trim() !== '');
  return lines.map((line, index) => {
    const fields = line.split('\t');
    if (fields.length !== 3) throw new Error(`${listPath}:${index + 1}: expected MODEL<TAB>IN_DIR<TAB>OUT_DIR`);
    const [model, inDir, outDir] = fields;
    return { model, inDir, outDir };
  });
}

function readInputs(ort, inDir) {
  const manifestPath = path.join(inDir, 'manifest.json');
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  if (!Array.isArray(manifest)) throw new Error(`${manifestPath}: expected a JSON array`);
  const feeds = {};
  for (const entry of manifest) {
    const ArrayType = kArrayTypes[entry.dtype];
    if (!ArrayType) throw new Error(`${manifestPath}: input '${entry.name}' has unsupported dtype ${entry.dtype}`);
    const count = entry.dims.reduce((a, b) => a * b, 1);
    const bytes = fs.readFileSync(path.join(inDir, entry.file));
    if (bytes.byteLength !== count * ArrayType.BYTES_PER_ELEMENT) {
      throw new Error(`input '${entry.name}': ${entry.file} has ${bytes.byteLength} bytes, ` +
                      `dims [${entry.dims}] of ${entry.dtype} need ${count * ArrayType.BYTES_PER_ELEMENT}`);
    }
    // Copy into a fresh, aligned buffer: a Buffer's byteOffset need not suit 8-byte elements.
    const data = new ArrayType(count);
    new Uint8Array(data.buffer).set(bytes);
    feeds[entry.name] = new ort.Tensor(entry.dtype, data, entry.dims);
  }
  return feeds;
}

function writeOutputs(session, results, outDir) {
  fs.mkdirSync(outDir, { recursive: true });
  const manifest = session.outputNames.map((name, index) => {
    const tensor = results[name];
    if (!kArrayTypes[tensor.type]) throw new Error(`output '${name}' has unsupported dtype ${tensor.type}`);
    const file = `output_${index}.bin`;
    const data = tensor.data;
    fs.writeFileSync(path.join(outDir, file), new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return { name, dtype: tensor.type, dims: tensor.dims.map(Number), file };
  });
  fs.writeFileSync(path.join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 1));
}

async function runCase(ort, options, { model, inDir, outDir }) {
  const session = await ort.InferenceSession.create(model, options);
  try {
    const results = await session.run(readInputs(ort, inDir));
    writeOutputs(session, results, outDir);
  } finally {
    await session.release();
  }
}

function firstLine(e) {
  return String(e.message ?? e).split('\n')[0];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const options = {
    intraOpNumThreads: args.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,  // errors only: ORT warns when its shape inference disagrees with a kernel
  };
  if (!args.batch) return runCase(ort, options, args.cases[0]);
  let failed = 0;
  for (const c of args.cases) {
    try {
      await runCase(ort, options, c);
    } catch (e) {
      ++failed;
      fs.mkdirSync(c.outDir, { recursive: true });
      fs.writeFileSync(path.join(c.outDir, 'error.txt'), `${firstLine(e)}\n`);
    }
  }
  console.log(`ort_run: ${args.cases.length} cases, ${failed} failed`);
}

main().catch((e) => {
  console.error(`ort_run: ${firstLine(e)}`);
  process.exit(2);
});
