// Soak of `onnx-genai serve`: D minutes of streamed chat requests at concurrency C with random
// aborts (a client that closes its stream after a few tokens), through the official openai
// client. Samples the server's RSS every 5 s; prints per-minute request, token and error counts,
// the RSS after warm-up and at the end, and writes the samples as CSV for serve_soak_plot.py.
//
//   node bench/serve_soak.mjs URL SERVER_PID MINUTES CONCURRENCY OUT.csv
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/oracle/package.json', import.meta.url));
const { OpenAI } = require('openai');
const [url, pid, minutes, concurrency, csv] = process.argv.slice(2);
const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0 });
const end = Date.now() + Number(minutes) * 60000;
const words = 'the sea ship storm keeper light night harbour old wind rain story king river fox'.split(' ');
const stats = { requests: 0, aborted: 0, errors: 0, tokens: 0, firstError: null };
const rss = () => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
const samples = [];
const start = Date.now();
const sampler = setInterval(() => samples.push([(Date.now() - start) / 1000, rss()]), 5000);

async function worker(seed) {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  while (Date.now() < end) {
    const prompt = Array.from({ length: 4 + Math.floor(rand() * 40) }, () => words[Math.floor(rand() * words.length)]).join(' ');
    const abortAfter = rand() < 0.2 ? 1 + Math.floor(rand() * 10) : Infinity;
    try {
      const stream = await client.chat.completions.create({
        messages: [{ role: 'user', content: prompt }], max_tokens: 16 + Math.floor(rand() * 112),
        temperature: rand() < 0.5 ? 0 : 0.8, stream: true });
      let chunks = 0;
      for await (const chunk of stream) {
        stats.tokens += chunk.choices.length;
        if (++chunks >= abortAfter) break;
      }
      if (chunks >= abortAfter) ++stats.aborted;
      ++stats.requests;
    } catch (e) {
      ++stats.errors;
      stats.firstError ??= String(e);
    }
  }
}

const minute = setInterval(() => console.log(JSON.stringify({ t_s: Math.round((Date.now() - start) / 1000), ...stats, rss_kb: rss() })), 60000);
await Promise.all(Array.from({ length: Number(concurrency) }, (_, i) => worker(i + 1)));
clearInterval(sampler);
clearInterval(minute);
samples.push([(Date.now() - start) / 1000, rss()]);
fs.writeFileSync(csv, 't_s,rss_kb\n' + samples.map((s) => s.join(',')).join('\n') + '\n');
const warm = samples.find((s) => s[0] >= Math.min(120, Number(minutes) * 60 / 5)) ?? samples[0];
const last = samples[samples.length - 1];
console.log(JSON.stringify({ done: true, ...stats, rss_after_warmup_kb: warm[1], rss_end_kb: last[1],
  drift_percent: 100 * (last[1] - warm[1]) / warm[1] }));
process.exit(stats.errors === 0 ? 0 : 1);
