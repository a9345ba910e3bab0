// Compares two og_bench JSON reports (base, head) case by case; scripts/bench-compare calls it.
//
//   node bench/compare_runs.mjs BASE.json HEAD.json
//
// A report may be missing (that revision had no suite): every case of the other is then "new"
// or "removed". Prints a markdown table of the median time change per case; flags head >= 15%
// slower as SLOWER, and >= 30% slower or failing where base ran as REGRESSION; exits 1 when any
// case is a REGRESSION.
import fs from 'node:fs';

const kSlower = 0.15;
const kRegression = 0.30;

// case name -> {median_us} or {error}, from a Google Benchmark JSON report with median aggregates.
function readReport(file) {
  const cases = new Map();
  if (!fs.existsSync(file)) return cases;
  for (const run of JSON.parse(fs.readFileSync(file, 'utf8')).benchmarks ?? []) {
    const name = (run.run_name ?? run.name).replace(/\/real_time$/, '');
    if (run.error_occurred) {
      cases.set(name, { error: run.error_message });
    } else if (run.aggregate_name === 'median') {
      const scale = { ns: 1e-3, us: 1, ms: 1e3, s: 1e6 }[run.time_unit];
      cases.set(name, { median_us: run.real_time * scale });
    }
  }
  return cases;
}

function verdict(base, head) {
  if (head?.error) {
    // A case that ran in base and fails in head is worse than slow.
    const broke = base !== undefined && !base.error;
    return { text: `${broke ? 'REGRESSION, ' : ''}head error: ${head.error}`, regression: broke };
  }
  if (!base) return { text: 'new' };
  if (!head) return { text: 'removed' };
  if (base.error) return { text: `base error: ${base.error}` };
  const change = head.median_us / base.median_us - 1;
  const flag = change >= kRegression ? 'REGRESSION' : change >= kSlower ? 'SLOWER' : '';
  return { change, text: flag, regression: flag === 'REGRESSION' };
}

const fmt = (r) => (r?.median_us === undefined ? '' : r.median_us.toFixed(r.median_us < 10 ? 2 : 1));

function main() {
  const [baseFile, headFile] = process.argv.slice(2);
  if (!baseFile || !headFile) throw new Error('usage: compare_runs.mjs BASE.json HEAD.json');
  const base = readReport(baseFile);
  const head = readReport(headFile);
  const names = [...head.keys(), ...[...base.keys()].filter((n) => !head.has(n))];
  const lines = ['| case | base (µs) | head (µs) | change | |', '|---|---:|---:|---:|---|'];
  let regressions = 0;
  for (const name of names) {
    const v = verdict(base.get(name), head.get(name));
    if (v.regression) ++regressions;
    const change = v.change === undefined ? '' : `${v.change >= 0 ? '+' : ''}${(v.change * 100).toFixed(1)}%`;
    lines.push(`| ${name} | ${fmt(base.get(name))} | ${fmt(head.get(name))} | ${change} | ${v.text} |`);
  }
  lines.push('', `change = head/base - 1 of the median time (+ is slower). SLOWER >= ${kSlower * 100}%, ` +
             `REGRESSION >= ${kRegression * 100}%. threads:1 cases are the stable ones.`,
             regressions ? `${regressions} regression(s).` : 'No regressions.');
  console.log(lines.join('\n'));
  process.exitCode = regressions ? 1 : 0;
}

try {
  main();
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
