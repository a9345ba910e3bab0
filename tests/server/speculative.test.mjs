// `onnx-genai serve --speculative`: prompt lookup and a draft model (the default model drafting
// for itself) inside the serving engine's batches give every greedy request the text a server
// without speculation gives it, streamed or whole, also under a response_format (drafts the
// grammar refuses are rejected); with --fast-forward a response_format drafts the text its schema
// forces and gives the text of a server without it; bad
// speculative options stop the server with one line.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cli, metrics, startServer } from './harness.mjs';

const draftDir = fileURLToPath(new URL('../../models/debian-prose-11m', import.meta.url));
const servers = {};
before(async () => {
  servers.plain = await startServer(['--max-num-seqs', '8']);
  servers.ngram = await startServer(['--max-num-seqs', '8', '--speculative', 'ngram', '--draft-tokens', '5']);
  servers.draft = await startServer(['--max-num-seqs', '8', '--speculative', draftDir, '--draft-tokens', '3']);
  servers.fast = await startServer(['--max-num-seqs', '8', '--fast-forward']);
});
after(async () => {
  for (const server of Object.values(servers)) assert.equal((await server.stop()).code, 0);
});

const prompts = ['And God said unto Moses', 'The quick brown fox', 'It were not best that we should all think alike',
                 'In the beginning', 'Hear, O Israel', 'A fortune: you will'];

async function texts(server, stream) {
  const client = server.client();
  return Promise.all(prompts.map(async (content) => {
    const request = { model: 'debian-prose-11m', messages: [{ role: 'user', content }], max_tokens: 40, temperature: 0,
                      frequency_penalty: 0 };
    if (!stream) return (await client.chat.completions.create(request)).choices[0].message.content;
    let text = '';
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    return text;
  }));
}

test('speculating servers give the plain server greedy text, whole and streamed', async () => {
  const want = await texts(servers.plain, false);
  for (const name of ['ngram', 'draft']) {
    assert.deepEqual(await texts(servers[name], false), want, name);
    assert.deepEqual(await texts(servers[name], true), want, `${name}, streamed`);
    const m = await metrics(servers[name].url);
    const drafted = m['onnx_genai:spec_decode_num_draft_tokens_total'];
    const accepted = m['onnx_genai:spec_decode_num_accepted_tokens_total'];
    assert.ok(drafted > 0 && accepted > 0 && accepted <= drafted, `${name}: ${drafted} drafted, ${accepted} accepted`);
  }
  assert.equal((await metrics(servers.plain.url))['onnx_genai:spec_decode_num_draft_tokens_total'], 0);
});

test('a request with response_format speculates too and gives the plain server its JSON', async () => {
  const json = (server) => server.client().chat.completions.create({
    model: 'debian-prose-11m', messages: [{ role: 'user', content: 'A dog as JSON.' }], max_tokens: 48, temperature: 0,
    frequency_penalty: 0, response_format: { type: 'json_object' } });
  const want = (await json(servers.plain)).choices[0].message.content;
  assert.match(want, /^\s*\{/);
  for (const name of ['ngram', 'draft']) {
    const [got, ...others] = await Promise.all([json(servers[name]), ...prompts.slice(0, 3).map((content) =>
      servers[name].client().chat.completions.create(
        { model: 'debian-prose-11m', messages: [{ role: 'user', content }], max_tokens: 24, temperature: 0 }))]);
    assert.equal(got.choices[0].message.content, want, name);
    for (const r of others) assert.equal(typeof r.choices[0].message.content, 'string');
  }
});

test('with --fast-forward a response_format drafts forced text and gives the text of a server without it', async () => {
  const schema = { type: 'object', additionalProperties: false,
                   properties: { customer_identification_number: { type: 'integer', minimum: 0, maximum: 999 },
                                 is_priority_delivery: { type: 'boolean' } },
                   required: ['customer_identification_number', 'is_priority_delivery'] };
  const ask = (server, content) => server.client().chat.completions.create({
    model: 'debian-prose-11m', messages: [{ role: 'user', content }], max_tokens: 96, temperature: 0,
    frequency_penalty: 0, response_format: { type: 'json_schema', json_schema: { name: 'order', schema } } });
  const drafted = async (server) => (await metrics(server.url))['onnx_genai:spec_decode_num_draft_tokens_total'];
  const plainBefore = await drafted(servers.plain);
  for (const content of prompts.slice(0, 3)) {
    const [fast, stepwise] = await Promise.all([ask(servers.fast, content), ask(servers.plain, content)]);
    assert.equal(fast.choices[0].message.content, stepwise.choices[0].message.content, content);
  }
  assert.ok(await drafted(servers.fast) > 0, 'no forced text was drafted');
  assert.equal(await drafted(servers.plain), plainBefore);
});

test('bad speculative options stop the server with one line', () => {
  for (const [args, needle] of [[['--speculative', '/no/such/draft'], '--speculative draft model'],
                                [['--speculative', 'ngram', '--draft-tokens', '99'], '--draft-tokens wants an integer in [1, 15]']]) {
    const r = spawnSync(cli, ['serve', '--port', '0', ...args], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(r.stderr.includes(needle), r.stderr);
  }
});
