// Starts `onnx-genai serve` on a free port for a test file and stops it after; the official
// openai client comes from tests/oracle's node_modules (npm ci of its lockfile).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';

const require = createRequire(new URL('../oracle/package.json', import.meta.url));
export const { OpenAI } = require('openai');

export const cli = process.env.OG_CLI;
if (!cli) throw new Error('OG_CLI must name the onnx-genai executable');

// Resolves once the server prints its address; `log` collects its stderr lines.
export async function startServer(args = []) {
  const proc = spawn(cli, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  let buffered = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log.join('\n'))), 60000);
    proc.stderr.on('data', (data) => {
      buffered += data.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop();
      for (const line of lines) {
        log.push(line);
        const m = line.match(/listening on (http:\/\/[\d.]+:\d+)/);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n` + log.join('\n'))); });
  });
  // 'close': after the last of its stderr was read.
  const exited = new Promise((resolve) => proc.on('close', (code, signal) => resolve({ code, signal })));
  return {
    url, proc, log, exited,
    client: (options = {}) => new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, ...options }),
    // SIGTERM, then the exit status (the server drains and exits 0). Fails when the sanitizers
    // (the ASan/UBSan build) reported anything.
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const status = await exited;
      const reports = log.filter((line) => /runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer/.test(line));
      if (reports.length) throw new Error('sanitizer reports from the server:\n' + reports.join('\n'));
      return status;
    },
    fdCount: () => fs.readdirSync(`/proc/${proc.pid}/fd`).length,
    rssKb: () => Number(fs.readFileSync(`/proc/${proc.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]),
  };
}

// The Prometheus text of GET /metrics as {name: value} (histogram buckets left out).
export async function metrics(url) {
  const text = await (await fetch(url + '/metrics')).text();
  const values = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z0-9_:]+(?:\{[^}]*\})?) (\S+)$/);
    if (m && !m[1].includes('_bucket')) values[m[1]] = Number(m[2]);
  }
  return values;
}

// Polls `predicate` (async) until true or the deadline; returns its last value.
export async function waitFor(predicate, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await predicate();
    if (value || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}
