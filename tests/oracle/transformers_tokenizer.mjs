// @huggingface/transformers' AutoTokenizer and env (remote models off), for the tokenizer oracles. The package entry
// point pulls in sharp (image support, an optional native module); the tokenizer classes do not
// need it, so they are imported directly. Exits 2 when `npm ci` has not run in tests/oracle.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const transformers = join(here, 'node_modules/@huggingface/transformers/src');
if (!existsSync(transformers)) {
  console.error(`missing ${transformers}: run npm ci in tests/oracle`);
  process.exit(2);
}
export const { AutoTokenizer } = await import(join(transformers, 'models/auto/tokenization_auto.js'));
export const { env } = await import(join(transformers, 'env.js'));
env.allowRemoteModels = false;
