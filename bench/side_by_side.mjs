// Runs our kernel benchmarks (og_bench) and ONNX Runtime (ort_bench.mjs) on the same model files,
// alternating per case, and prints one markdown table of our time over ORT's. scripts/bench
// builds og_bench and the models, then calls this.
//
//   node bench/side_by_side.mjs --og-bench=PATH --models=DIR [--filter=REGEX] [--min-time=0.2]
//                               [--reps=5] [--out=FILE.md]
//
// Per case: our repetitions, then ORT's, with the order swapped on every other case so neither
// engine always runs second. Alternating matters here: shared machines swing in memory bandwidth
// and load from minute to minute, and a ratio is only meaningful if both sides saw the same swing.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { benchOrtCase, loadOrt, ortVersion, readManifest, threadSettings } from './ort_bench.mjs';

function parseFlags(argv) {
  const flags = { 'og-bench': '', models: '', filter: '', 'min-time': '0.2', reps: '5', out: '' };
  for (const arg of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(arg);
    if (!m || !(m[1] in flags)) throw new Error(`side_by_side: unknown argument ${arg}`);
    flags[m[1]] = m[2];
  }
  if (!flags['og-bench'] || !flags.models) throw new Error('side_by_side: give --og-bench=PATH and --models=DIR');
  return flags;
}

const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// One og_bench case: {median_us, median_cpu_us} or {error}. cpu is the timing thread's CPU time.
function benchOurs(ogBench, modelsDir, name, { minTime, reps }) {
  const run = spawnSync(ogBench, [
    `--models=${modelsDir}`, `--benchmark_filter=^${escapeRegex(name)}(/real_time)?$`, '--benchmark_format=json',
    `--benchmark_min_time=${minTime}`, `--benchmark_repetitions=${reps}`,
    '--benchmark_report_aggregates_only=true',
  ], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.status !== 0) return { error: `og_bench exited ${run.status}: ${run.stderr.trim().split('\n').pop()}` };
  const runs = JSON.parse(run.stdout).benchmarks ?? [];
  const failed = runs.find((r) => r.error_occurred);
  if (failed) return { error: failed.error_message };
  const med = runs.find((r) => r.aggregate_name === 'median');
  if (!med) return { error: 'og_bench reported no median (case not registered?)' };
  if (med.time_unit !== 'us') return { error: `og_bench time unit ${med.time_unit}, expected us` };
  return { median_us: med.real_time, median_cpu_us: med.cpu_time };
}

const fmtUs = (us) => (us === undefined ? 'n/a' : us.toFixed(us < 10 ? 2 : 1));

// GFLOP/s for matmuls, GB/s (least traffic) for the memory-bound ops.
function rate(entry, us) {
  if (us === undefined) return '';
  const seconds = us * 1e-6;
  if (entry.flops > 0) return `${(entry.flops / seconds * 1e-9).toFixed(1)} GFLOP/s`;
  if (entry.name.startsWith('call_overhead')) return '';
  return `${(entry.bytes / seconds * 1e-9).toFixed(1)} GB/s`;
}

function runAll(flags, options) {
  const ort = loadOrt();
  const filter = new RegExp(flags.filter);
  const rows = [];
  let index = 0;
  for (const entry of readManifest(flags.models).cases) {
    for (const [label, threads] of threadSettings()) {
      const name = `${entry.name}/threads:${label}`;
      if (!filter.test(name)) continue;
      const runOurs = () => benchOurs(flags['og-bench'], flags.models, name, options);
      const runOrt = () => benchOrtCase(ort, flags.models, entry, threads, options);
      let ours, theirs;  // theirs: {kernel_us, node_us} or {error}
      if (index++ % 2 === 0) {
        ours = runOurs();
        theirs = runOrt();
      } else {
        theirs = runOrt();
        ours = runOurs();
      }
      const ratio = ours.median_us !== undefined && theirs.kernel_us !== undefined
        ? ours.median_us / theirs.kernel_us : undefined;
      rows.push({ entry, name, threads: label, ours, theirs, ratio });
      process.stderr.write(`${name}: ours ${fmtUs(ours.median_us)} us, ORT ${fmtUs(theirs.kernel_us)} us` +
                           `${ratio === undefined ? '' : `, ratio ${ratio.toFixed(2)}`}\n`);
    }
  }
  return rows;
}

function geomean(values) {
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

function summaryLines(rows) {
  const lines = [];
  for (const threads of ['1', 'all']) {
    const kernels = rows.filter((r) => r.threads === threads && r.ratio !== undefined &&
                                       !r.name.startsWith('call_overhead'));
    if (kernels.length === 0) continue;
    const slower = kernels.filter((r) => r.ratio > 1).map((r) => `${r.entry.name} ${r.ratio.toFixed(2)}x`);
    lines.push(`- threads:${threads}, ours/ORT: geometric mean ${geomean(kernels.map((r) => r.ratio)).toFixed(2)} ` +
               `over ${kernels.length} cases; slower than ORT: ${slower.length ? slower.join(', ') : 'none'}`);
  }
  return lines;
}

function renderTable(rows, flags, context) {
  const lines = [
    `# Kernel benchmarks: onnx-genai vs ONNX Runtime ${ortVersion()}`,
    '',
    `Command: \`${context.command}\``,
    `Revision: ${context.revision}; CPU: ${context.cpu}; threads:all = ${threadSettings()[1][1]}; ` +
      `load average ${context.loadBefore} before, ${context.loadAfter} after.`,
    '',
    '| case | ours (µs) | ORT (µs) | ours/ORT | ours CPU (µs) | ours | ORT | ORT via Node (µs) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const fmtRatio = (ratio) => (ratio === undefined ? 'n/a' : ratio.toFixed(2));
  for (const r of rows) {
    const single = r.threads === '1';
    lines.push(`| ${r.name} | ${fmtUs(r.ours.median_us)} | ${fmtUs(r.theirs.kernel_us)} | ${fmtRatio(r.ratio)} | ` +
               `${single ? fmtUs(r.ours.median_cpu_us) : ''} | ` +
               `${rate(r.entry, r.ours.median_us)} | ${rate(r.entry, r.theirs.kernel_us)} | ${fmtUs(r.theirs.node_us)} |`);
  }
  lines.push('', ...summaryLines(rows), '');
  const errors = rows.flatMap((r) => [['ours', r.ours], ['ORT', r.theirs]]
    .filter(([, result]) => result.error).map(([who, result]) => `- ${r.name} (${who}): ${result.error}`));
  if (errors.length) lines.push('Not measured (n/a):', ...errors, '');
  lines.push(
    `Ratio < 1: we are faster. Times are the median of ${flags.reps} repetitions of at least ` +
      `${flags['min-time']} s each, ours and ORT alternating per case.`,
    '**The threads:1 ratios are the stable ones.** threads:all rows depend on how much memory ' +
      'bandwidth and how many idle cores the machine has at that moment; on a small shared machine ' +
      'they move by tens of percent between runs.',
    '"ours CPU" (threads:1 only) is the CPU time of our timing thread. It is a load gauge, not a ' +
      'result: when "ours" is several times "ours CPU", other processes had the cores during that ' +
      'case, and every wall time of the run, ORT\'s too, is inflated by an amount that varies.',
    'Ours: `Session::run_into` on a compiled plan with reused output tensors, the whole call. ' +
      'ORT: its kernels alone as its own profiler times them, without its per-Run overhead: this ' +
      'flatters ORT, most in the smallest cases. ORT via Node: one call of the onnxruntime-node ' +
      'binding, for reference (N-API marshalling, output copies). call_overhead/add_1 shows the ' +
      'fixed per-call costs. Details: bench/ort_bench.mjs.',
    'GB/s counts the least memory traffic of one run (inputs, weights read, output).',
  );
  return lines.join('\n') + '\n';
}

function gitRevision() {
  const describe = spawnSync('git', ['describe', '--always', '--dirty'], { encoding: 'utf8' });
  return describe.status === 0 ? describe.stdout.trim() : 'unknown';
}

function cpuName() {
  const model = /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
  return model ? model[1] : os.cpus()[0]?.model ?? 'unknown';
}

function main() {
  const flags = parseFlags(process.argv.slice(2));
  const options = { minTime: Number(flags['min-time']), reps: Number(flags.reps) };
  const load = () => os.loadavg()[0].toFixed(1);
  const context = {
    command: process.env.OG_BENCH_COMMAND ?? process.argv.join(' '), revision: gitRevision(),
    cpu: cpuName(), loadBefore: load(),
  };
  const rows = runAll(flags, options);
  context.loadAfter = load();
  const table = renderTable(rows, flags, context);
  process.stdout.write(table);
  if (flags.out) fs.writeFileSync(flags.out, table);
}

try {
  main();
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
