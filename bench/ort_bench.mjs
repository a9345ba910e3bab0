// ONNX Runtime side of the kernel benchmark suite: times the models of
// tools/make_bench_models.py with onnxruntime-node, the way bench/kernels_bench.cc times ours.
//
//   node bench/ort_bench.mjs --models=DIR [--filter=REGEX] [--min-time=0.2] [--reps=5]
//
// prints JSON: {"ort_version", "threads_all", "cases": [{name, kernel_us, node_us, iterations,
// reps} or {name, error}]}, names like `matmul/32x512x512/f32/threads:1`.
//
// Two times per case:
// - kernel_us: ORT's kernels alone, as ORT's own profiler times them ("Node" events, summed per
//   run), in a second session with profiling on. It leaves out ORT's per-Run overhead (a few µs,
//   which profiling itself inflates) and everything below, so it flatters ORT: a case where our
//   whole Session::run is faster than this is faster than ORT for any caller.
// - node_us: one call of the Node binding, measured around it. The binding adds much that a C/C++
//   caller of ORT never pays: N-API marshalling, and a zero-filled JS buffer plus a copy for every
//   output (about 3x ORT's own time on add/262144). ORT is called through the package's native
//   binding (dist/binding, what InferenceSession wraps) synchronously, because the public async
//   run() would add a setImmediate hop on top. Shown for reference only.
//
// Timing protocol, the same as Google Benchmark's with --benchmark_repetitions and its median
// aggregate: one untimed warm-up run; the first repetition grows the iteration count until one
// batch lasts min-time; later repetitions reuse that count; a time is the median over
// repetitions of the mean per run. The profiled pass runs the same repetitions (at most
// kMaxProfiledRuns runs each, to bound the profile's size). Sessions: intraOpNumThreads 1 or all
// CPUs, interOp 1, sequential, graphOptimizationLevel 'all', ORT's default spinning.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const kMaxProfiledRuns = 1000;

// {Tensor, binding}: the public Tensor class and the native InferenceSession binding.
export function loadOrt() {
  const require = createRequire(path.join(repoRoot, 'tests/oracle/package.json'));
  try {
    const { Tensor } = require('onnxruntime-node');
    const { binding, initOrt } = require('onnxruntime-node/dist/binding');
    initOrt();
    return { Tensor, binding };
  } catch (e) {
    throw new Error('onnxruntime-node is not installed: cd tests/oracle && ' +
                    'ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts');
  }
}

export function ortVersion() {
  const pkg = path.join(repoRoot, 'tests/oracle/node_modules/onnxruntime-node/package.json');
  return JSON.parse(fs.readFileSync(pkg, 'utf8')).version;
}

export function readManifest(modelsDir) {
  return JSON.parse(fs.readFileSync(path.join(modelsDir, 'manifest.json'), 'utf8'));
}

// The thread counts every case runs with; "all" is every CPU this process may use.
export function threadSettings() {
  return [['1', 1], ['all', os.availableParallelism()]];
}

const kTypedArrays = { float32: Float32Array, float16: Uint16Array, int64: BigInt64Array, int32: Int32Array };

function readInput(ort, modelsDir, input) {
  const ArrayType = kTypedArrays[input.dtype];
  if (!ArrayType) throw new Error(`onnxruntime-node has no ${input.dtype} tensor type`);
  const bytes = fs.readFileSync(path.join(modelsDir, input.file));
  const data = new ArrayType(bytes.buffer, bytes.byteOffset, bytes.byteLength / ArrayType.BYTES_PER_ELEMENT);
  return new ort.Tensor(input.dtype, data, input.shape);
}

function meanRunSeconds(run, iterations) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; ++i) run();
  return Number(process.hrtime.bigint() - start) * 1e-9 / iterations;
}

// Google Benchmark's iteration sizing: grow by the predicted factor (at most 10x) until a batch
// lasts minTime; that batch is the first repetition.
function firstRepetition(run, minTime) {
  let iterations = 1;
  for (;;) {
    const mean = meanRunSeconds(run, iterations);
    if (mean * iterations >= minTime || iterations >= 1e9) return { iterations, mean };
    const factor = Math.min(10, (minTime * 1.4) / Math.max(mean * iterations, 1e-9));
    iterations = Math.max(Math.round(iterations * factor), iterations + 1);
  }
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// Loads a session, runs `body(run)` with run() = one synchronous inference, and releases it:
// its thread pool's spinning threads would otherwise steal cores from whatever runs next.
function withSession(ort, modelsDir, entry, threads, extraOptions, body) {
  const session = new ort.binding.InferenceSession();
  session.loadModel(path.join(modelsDir, entry.model), {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', ...extraOptions,
  });
  try {
    const feeds = {};
    entry.inputs.forEach((input) => { feeds[input.name] = readInput(ort, modelsDir, input); });
    const fetches = Object.fromEntries(session.outputMetadata.map((m) => [m.name, null]));
    return body(() => session.run(feeds, fetches, {}), session);
  } finally {
    session.dispose();
  }
}

// Median over repetitions of the mean time ORT's kernels take per run, from a profiled session.
// The profile lists each run's kernel ("Node") events before that run's "model_run" event.
function profiledKernelSeconds(ort, modelsDir, entry, threads, iterations, reps) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'og-ort-profile-'));
  try {
    const batch = Math.min(iterations, kMaxProfiledRuns);
    const profile = withSession(ort, modelsDir, entry, threads,
                                { enableProfiling: true, profileFilePrefix: path.join(dir, 'p') }, (run, session) => {
      for (let i = 0; i < 1 + batch * reps; ++i) run();
      return session.endProfiling();
    });
    const durations = [];
    let kernelSeconds = 0;
    for (const event of JSON.parse(fs.readFileSync(profile, 'utf8'))) {
      if (event.cat === 'Node') kernelSeconds += event.dur * 1e-6;
      if (event.name === 'model_run') {
        durations.push(kernelSeconds);
        kernelSeconds = 0;
      }
    }
    if (durations.length !== 1 + batch * reps) {
      throw new Error(`ORT profile has ${durations.length} model_run events, expected ${1 + batch * reps}`);
    }
    const means = [];
    for (let r = 0; r < reps; ++r) {
      const slice = durations.slice(1 + r * batch, 1 + (r + 1) * batch);  // [0] is the warm-up
      means.push(slice.reduce((a, b) => a + b, 0) / batch);
    }
    return median(means);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Times one manifest case at `threads` intra-op threads: {kernel_us, node_us, iterations, reps}
// or {error}.
export function benchOrtCase(ort, modelsDir, entry, threads, { minTime, reps }) {
  try {
    const { iterations, nodeSeconds } = withSession(ort, modelsDir, entry, threads, {}, (run) => {
      run();  // warm-up
      const first = firstRepetition(run, minTime);
      const means = [first.mean];
      while (means.length < reps) means.push(meanRunSeconds(run, first.iterations));
      return { iterations: first.iterations, nodeSeconds: median(means) };
    });
    const kernelSeconds = profiledKernelSeconds(ort, modelsDir, entry, threads, iterations, reps);
    return { kernel_us: kernelSeconds * 1e6, node_us: nodeSeconds * 1e6, iterations, reps };
  } catch (e) {
    return { error: String(e.message ?? e).split('\n')[0] };
  }
}

function parseFlags(argv) {
  const flags = { 'min-time': '0.2', reps: '5', filter: '' };
  for (const arg of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(arg);
    if (!m || !(m[1] in flags || m[1] === 'models')) throw new Error(`ort_bench: unknown argument ${arg}`);
    flags[m[1]] = m[2];
  }
  if (!flags.models) throw new Error('ort_bench: give --models=DIR (written by tools/make_bench_models.py DIR)');
  return flags;
}

function main() {
  const flags = parseFlags(process.argv.slice(2));
  const ort = loadOrt();
  const filter = new RegExp(flags.filter);
  const options = { minTime: Number(flags['min-time']), reps: Number(flags.reps) };
  const cases = [];
  for (const entry of readManifest(flags.models).cases) {
    for (const [label, threads] of threadSettings()) {
      const name = `${entry.name}/threads:${label}`;
      if (filter.test(name)) cases.push({ name, ...benchOrtCase(ort, flags.models, entry, threads, options) });
    }
  }
  console.log(JSON.stringify({ ort_version: ortVersion(), threads_all: threadSettings()[1][1], cases }, null, 1));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (e) {
    console.error(e.message);
    process.exit(2);
  }
}
