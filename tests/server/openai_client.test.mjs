// `onnx-genai serve` on the default model, driven by the official openai client: chat and
// completions, streamed text against whole responses, n, logprobs, stop strings, seeds,
// concurrent streams against solo runs, aborts, and the error statuses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startServer, metrics, waitFor } from './harness.mjs';

let server, client;
before(async () => {
  server = await startServer(['--max-num-seqs', '16']);
  client = server.client();
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'the server exits 0 after SIGTERM');
});

const chat = (content, extra = {}) =>
  client.chat.completions.create({ model: 'debian-prose-11m', messages: [{ role: 'user', content }], ...extra });

async function streamText(stream) {
  const texts = [];
  let finish = null, usage = null, roleSeen = false;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] = (texts[c.index] ?? '') + (c.delta?.content ?? c.text ?? '');
      roleSeen ||= c.delta?.role === 'assistant';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { texts, finish, usage, roleSeen };
}

test('models lists the served model', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['debian-prose-11m']);
});

test('greedy chat: the stream carries the same text as the whole response', async () => {
  const whole = await chat('Tell me about the sea.', { max_tokens: 40, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.ok(whole.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  const streamed = await streamText(await chat('Tell me about the sea.', {
    max_tokens: 40, temperature: 0, stream: true, stream_options: { include_usage: true } }));
  assert.equal(streamed.texts[0], whole.choices[0].message.content);
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  assert.ok(streamed.roleSeen, 'the first chunk carries the role');
  assert.deepEqual(streamed.usage, whole.usage);
  const tokens = await (await fetch(server.url + '/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me about the sea.' }] }) })).json();
  assert.equal(whole.usage.prompt_tokens, tokens.count);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
});

test('completions: stream = whole, echo, token-id prompts, tokenize round trip', async () => {
  const prompt = 'The old lighthouse keeper';
  const whole = await client.completions.create({ model: 'debian-prose-11m', prompt, max_tokens: 24, temperature: 0 });
  assert.equal(whole.object, 'text_completion');
  const streamed = await streamText(await client.completions.create({
    model: 'debian-prose-11m', prompt, max_tokens: 24, temperature: 0, stream: true }));
  assert.equal(streamed.texts[0], whole.choices[0].text);
  const echoed = await client.completions.create({ model: 'debian-prose-11m', prompt, max_tokens: 24, temperature: 0, echo: true });
  assert.equal(echoed.choices[0].text, prompt + whole.choices[0].text);
  const ids = (await (await fetch(server.url + '/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt }) })).json()).tokens;
  assert.equal(ids.length, whole.usage.prompt_tokens);
  const byIds = await client.completions.create({ model: 'debian-prose-11m', prompt: ids, max_tokens: 24, temperature: 0 });
  assert.equal(byIds.choices[0].text, whole.choices[0].text);
  const back = await (await fetch(server.url + '/detokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ tokens: ids }) })).json();
  assert.ok(back.prompt.endsWith(prompt), `detokenize gave ${JSON.stringify(back.prompt)}`);
});

test('n=2: greedy choices agree; seeded choices are reproducible', async () => {
  const greedy = await chat('Once upon a time', { max_tokens: 16, temperature: 0, n: 2 });
  assert.equal(greedy.choices.length, 2);
  assert.equal(greedy.choices[0].message.content, greedy.choices[1].message.content);
  const a = await chat('Once upon a time', { max_tokens: 16, temperature: 1, seed: 7, n: 2 });
  const b = await chat('Once upon a time', { max_tokens: 16, temperature: 1, seed: 7, n: 2 });
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  const seeds = await Promise.all([1, 2, 3, 4].map((seed) => chat('Once upon a time', { max_tokens: 16, temperature: 1, seed })));
  assert.ok(new Set(seeds.map((r) => r.choices[0].message.content)).size > 1, 'different seeds draw different texts');
});

test('logprobs: one entry per token, top alternatives sorted, the greedy token first', async () => {
  // The package's repetition penalty would make the pick differ from the raw distribution's top.
  const r = await chat('The weather today', { max_tokens: 8, temperature: 0, repetition_penalty: 1, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
    assert.equal(entry.top_logprobs[0].token, entry.token);
    assert.ok(entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob);
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
  }
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  const legacy = await client.completions.create({ model: 'debian-prose-11m', prompt: 'The weather today', max_tokens: 6,
    temperature: 0, repetition_penalty: 1, logprobs: 2 });
  const lp = legacy.choices[0].logprobs;
  assert.equal(lp.tokens.length, legacy.usage.completion_tokens);
  assert.equal(lp.tokens.join(''), legacy.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  lp.tokens.forEach((t, i) => assert.equal(lp.top_logprobs[i][t], lp.token_logprobs[i]));
});

test('stop strings end the text before them', async () => {
  const free = (await chat('Write about a cat.', { max_tokens: 40, temperature: 0 })).choices[0].message.content;
  const words = free.split(' ').filter((w) => w.length > 2);
  assert.ok(words.length > 3, `too little text to cut: ${JSON.stringify(free)}`);
  const stop = words[Math.floor(words.length / 2)];
  const cut = await chat('Write about a cat.', { max_tokens: 40, temperature: 0, stop: [stop, 'zzzz-never'] });
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal(cut.choices[0].message.content, free.slice(0, free.indexOf(stop)));
});

test('16 concurrent greedy streams each equal their solo run', async () => {
  const prompts = Array.from({ length: 16 }, (_, i) => `Story number ${i + 1}: the ${['fox', 'river', 'king', 'ship'][i % 4]}`);
  const solo = [];
  for (const p of prompts) solo.push((await chat(p, { max_tokens: 24, temperature: 0 })).choices[0].message.content);
  const together = await Promise.all(prompts.map(async (p) =>
    (await streamText(await chat(p, { max_tokens: 24, temperature: 0, stream: true }))).texts[0]));
  assert.deepEqual(together, solo);
});

test('response_format json_object gives JSON', async () => {
  const r = await chat('Describe a dog as JSON.', { max_tokens: 48, temperature: 0, response_format: { type: 'json_object' } });
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(r.choices[0].message.content), 'object');
  else assert.match(r.choices[0].message.content, /^\s*\{/);
});

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: {
    type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
];
// What each tool's schema asks, checked on a parsed arguments object.
const argumentsValid = {
  get_weather: (a) => Object.keys(a).sort().join() === 'city,days' && typeof a.city === 'string' && a.city.length <= 16 &&
    Number.isInteger(a.days) && a.days >= 1 && a.days <= 7,
  get_time: (a) => Object.keys(a).join() === 'zone' && ['UTC', 'CET'].includes(a.zone),
};
const weather = 'What is the weather in Paris for the next days?';

async function streamedCalls(stream) {
  const calls = [];
  let finish = null, content = '';
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      content += c.delta?.content ?? '';
      for (const d of c.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', name: '', arguments: '' };
        calls[d.index].id += d.id ?? '';
        calls[d.index].name += d.function?.name ?? '';
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { calls, finish, content };
}

test('tools: a named or required function is always called with arguments its schema accepts', async () => {
  for (const tool_choice of [{ type: 'function', function: { name: 'get_time' } }, 'required']) {
    for (const temperature of [0, 0.9]) {
      const r = await chat(weather, { tools, tool_choice, max_tokens: 200, temperature, seed: 7 });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.equal(call.type, 'function');
      assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
      if (tool_choice !== 'required') assert.equal(call.function.name, 'get_time');
      assert.ok(argumentsValid[call.function.name](JSON.parse(call.function.arguments)), call.function.arguments);
      // Streamed: the same call (greedy), as tool-call deltas and no content.
      if (temperature === 0) {
        const s = await streamedCalls(await chat(weather, { tools, tool_choice, max_tokens: 200, temperature, stream: true }));
        assert.equal(s.finish, 'tool_calls');
        assert.equal(s.content, '');
        assert.deepEqual(s.calls.map((c) => [c.name, c.arguments]), [[call.function.name, call.function.arguments]]);
      }
    }
  }
});

test('tools: none and auto answer in text; a tool result continues the conversation', async () => {
  const plain = await chat(weather, { max_tokens: 30, temperature: 0 });
  const none = await chat(weather, { tools, tool_choice: 'none', max_tokens: 30, temperature: 0 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.ok(['stop', 'length'].includes(none.choices[0].finish_reason));
  // The default model's chat template does not render tools: the prompt, and so the text, is unchanged.
  assert.equal(none.choices[0].message.content, plain.choices[0].message.content);
  const auto = await chat(weather, { tools, max_tokens: 30, temperature: 0 });
  assert.equal(auto.choices[0].message.content, plain.choices[0].message.content);
  const streamed = await streamText(await chat(weather, { tools, max_tokens: 30, temperature: 0, stream: true }));
  assert.equal(streamed.texts[0], plain.choices[0].message.content);
  const call = (await chat(weather, { tools, tool_choice: 'required', max_tokens: 200, temperature: 0 })).choices[0].message;
  const followUp = await client.chat.completions.create({ model: 'debian-prose-11m', max_tokens: 20, temperature: 0, tools, messages: [
    { role: 'user', content: weather }, call,
    { role: 'tool', tool_call_id: call.tool_calls[0].id, content: '{"forecast": "sunny"}' }] });
  assert.ok(['stop', 'length'].includes(followUp.choices[0].finish_reason));
});

test('tools: malformed tools and choices are 400s naming the field', async () => {
  const refused = (extra, param) => assert.rejects(chat('hi', extra), (e) => e.status === 400 && e.param === param);
  await refused({ tools: 'get_weather' }, 'tools');
  await refused({ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name');
  await refused({ tools, tool_choice: { type: 'function', function: { name: 'get_stock' } } }, 'tool_choice');
  await refused({ tool_choice: 'required' }, 'tool_choice');
  await refused({ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'response_format');
});

const aborts = async () => (await metrics(server.url))['onnx_genai:request_success_total{finished_reason="abort"}'] ?? 0;

test('an aborted stream frees its request and KV blocks', async () => {
  const before = await aborts();
  // Eight choices: one alone can finish its 490 tokens before a loaded client's close reaches the
  // server (an ASan build under a parallel ctest did once).
  const stream = await chat('A very long story', { max_tokens: 490, ignore_eos: true, stream: true, n: 8 });
  let chunks = 0;
  for await (const _ of stream) if (++chunks === 3) break;  // closes the connection
  const idle = await waitFor(async () => {
    const m = await metrics(server.url);
    return m['onnx_genai:num_requests_running'] === 0 && m['onnx_genai:kv_cache_usage_perc'] === 0 ? m : null;
  });
  assert.ok(idle, 'the engine went idle after the abort');
  assert.ok(idle['onnx_genai:request_success_total{finished_reason="abort"}'] > before, 'the request was aborted');
});

test('a non-streamed request whose client disconnects is aborted', async () => {
  const before = await aborts();
  const controller = new AbortController();
  const request = fetch(server.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: controller.signal,
    // Eight choices: one alone can finish its 500 tokens (the context's limit) within the server's
    // 250 ms between disconnect checks.
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Go on forever' }], max_tokens: 500, ignore_eos: true, n: 8 }),
  }).catch((e) => e);
  // Disconnect once the engine runs it (a client gone before its request arrived aborts nothing).
  assert.ok(await waitFor(async () => (await metrics(server.url))['onnx_genai:num_requests_running'] > 0), 'the request runs');
  controller.abort();
  await request;
  assert.ok(await waitFor(async () => (await aborts()) > before), 'the disconnected request was aborted');
});

test('errors: statuses and OpenAI error objects', async () => {
  const post = (path, body, headers = { 'Content-Type': 'application/json' }) =>
    fetch(server.url + path, { method: 'POST', headers, body });
  const expectError = async (response, status, pattern) => {
    assert.equal(response.status, status);
    const body = await response.json();
    assert.equal(typeof body.error.message, 'string');
    assert.match(body.error.message, pattern);
    return body;
  };
  await expectError(await post('/v1/chat/completions', '{"messages": [}'), 400, /malformed JSON/);
  await expectError(await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x' }], temperature: 'hot' })), 400, /temperature/);
  await expectError(await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x' }], temperature: 5 })), 400, /temperature/);
  await expectError(await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'wizard', content: 'x' }] })), 400, /role/);
  await expectError(await post('/v1/chat/completions', JSON.stringify({ messages: [] })), 400, /messages/);
  await expectError(await post('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: -1 })), 400, /max_tokens/);
  await expectError(await post('/v1/completions', JSON.stringify({ prompt: [1, 2, 99999999] })), 400, /token ids/);
  await expectError(await post('/v1/completions', '{"prompt": "x"}', { 'Content-Type': 'text/plain' }), 415, /Content-Type/);
  const long = 'word '.repeat(2000);
  const tooLong = await expectError(await post('/v1/completions', JSON.stringify({ prompt: long, max_tokens: 10 })), 400, /maximum context length is 512 tokens/);
  assert.match(tooLong.error.message, /\d{4} in the prompt/);
  assert.equal(tooLong.error.code, 'context_length_exceeded');
  await expectError(await post('/v1/chat/completions', JSON.stringify({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] })), 404, /gpt-9/);
  await expectError(await fetch(server.url + '/v1/nothing'), 404, /no route/);
  await assert.rejects(chat('x', { temperature: -1 }), (e) => e.status === 400);
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status === 404);
});

test('curl sees server-sent events framed as data lines ending in [DONE]', () => {
  const r = spawnSync('curl', ['-sN', '-D', '-', server.url + '/v1/chat/completions', '-H', 'Content-Type: application/json',
    '-d', JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, temperature: 0, stream: true })], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const [head, body] = r.stdout.split('\r\n\r\n');
  assert.match(head, /^HTTP\/1\.1 200/);
  assert.match(head, /Content-Type: text\/event-stream/i);
  const events = body.split('\n\n');
  assert.equal(events.pop(), '', 'the stream ends with a blank line');
  assert.equal(events.pop(), 'data: [DONE]');
  for (const e of events) {
    assert.match(e, /^data: \{.*\}$/s);
    assert.equal(JSON.parse(e.slice(6)).object, 'chat.completion.chunk');
  }
});

test('metrics count tokens, latencies and prefix cache hits', async () => {
  const shared = 'The history of the lighthouse is long and full of storms, ships and keepers. '.repeat(4);
  await chat(shared + 'First question?', { max_tokens: 4, temperature: 0 });
  await chat(shared + 'Second question?', { max_tokens: 4, temperature: 0 });
  const m = await metrics(server.url);
  assert.ok(m['onnx_genai:prompt_tokens_total'] > 0);
  assert.ok(m['onnx_genai:generation_tokens_total'] > 0);
  assert.ok(m['onnx_genai:time_to_first_token_seconds_count'] > 0);
  assert.ok(m['onnx_genai:e2e_request_latency_seconds_count'] >= m['onnx_genai:time_to_first_token_seconds_count']);
  assert.ok(m['onnx_genai:prefix_cache_queries_total'] >= m['onnx_genai:prefix_cache_hits_total']);
  assert.ok(m['onnx_genai:prefix_cache_hits_total'] >= 3, 'a shared 60-token prefix hits the prefix cache');
});

test('bench-serve --url drives the server with its load', () => {
  const r = spawnSync(process.env.OG_CLI, ['bench-serve', '--url', server.url, '--num-requests', '4', '--concurrency', '2',
    '--prompt-len', '8', '--gen-len', '4', '--range', '0', '--json'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.requests, 4);
  assert.equal(summary.url, server.url);
  assert.ok(summary.output_tok_s > 0);
  assert.ok(summary.ttft_ms.p50 > 0 && summary.tpot_ms.p50 > 0);
});
