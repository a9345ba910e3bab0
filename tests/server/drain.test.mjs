// SIGTERM while a request streams: the server stops accepting, the request runs to its end, the
// process exits 0; and each request leaves one log line with its id, status, tokens and times.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './harness.mjs';

test('SIGTERM drains a running request, refuses new ones and exits 0', async () => {
  const server = await startServer();
  const client = server.client();
  const stream = await client.chat.completions.create({ model: 'debian-prose-11m', max_tokens: 300, ignore_eos: true,
    temperature: 0, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Talk on' }] });
  let id = null, usage = null, finish = null;
  for await (const chunk of stream) {
    if (!id) {
      id = chunk.id;
      server.proc.kill('SIGTERM');
    }
    usage = chunk.usage ?? usage;
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 300);
  await assert.rejects(fetch(server.url + '/health'), 'no new connections after SIGTERM');
  const { code } = await server.stop();
  assert.equal(code, 0);
  const line = server.log.find((l) => l.includes(id));
  assert.match(line, new RegExp(`${id} /v1/chat/completions 200 choices=1 prompt_tokens=\\d+ completion_tokens=300 ttft=\\d+\\.\\d+s duration=\\d+\\.\\d+s`));
  assert.ok(server.log.some((l) => /draining 1 requests/.test(l)), server.log.join('\n'));
});
