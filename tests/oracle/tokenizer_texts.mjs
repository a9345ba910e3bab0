// @huggingface/transformers' (offline) encoding and decoding of given texts with the tokenizer of
// a model folder (tokenizer.json + tokenizer_config.json), for the C++ tests.
// Usage: node tokenizer_texts.mjs <model_dir> <texts.json> <out.json>
// Writes <out.json>: [{ids, decoded, decoded_skip}] in the order of texts.json (a JSON string list)
//   ids           encode(text, {add_special_tokens: false})
//   decoded       decode(ids)                                (null when ids is empty: decode
//   decoded_skip  decode(ids, {skip_special_tokens: true})   rejects an empty list)
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

import { AutoTokenizer, env } from './transformers_tokenizer.mjs';

const [modelDir, textsPath, outPath] = process.argv.slice(2);
if (!modelDir || !textsPath || !outPath) {
  console.error('usage: node tokenizer_texts.mjs <model_dir> <texts.json> <out.json>');
  process.exit(2);
}
const folder = resolve(modelDir);
if (!existsSync(join(folder, 'tokenizer.json'))) {
  console.error(`missing ${folder}/tokenizer.json`);
  process.exit(2);
}
env.localModelPath = dirname(folder) + '/';
const tokenizer = await AutoTokenizer.from_pretrained(basename(folder));
const texts = JSON.parse(readFileSync(textsPath, 'utf8'));
const cases = texts.map((text) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  if (!ids.length) return { ids, decoded: null, decoded_skip: null };
  return {
    ids,
    decoded: tokenizer.decode(ids),
    decoded_skip: tokenizer.decode(ids, { skip_special_tokens: true }),
  };
});
writeFileSync(outPath, JSON.stringify(cases));
