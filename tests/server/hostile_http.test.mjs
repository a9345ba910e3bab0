// `onnx-genai serve` under hostile and careless HTTP: authentication, limits, malformed requests
// at the socket level, slow clients and connection floods. After each, the server must still
// answer, and at the end it must hold no more descriptors than it started with.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, waitFor } from './harness.mjs';

const key = 'test-key-123';
let server, baseline;
before(async () => {
  server = await startServer(['--api-key', key, '--max-queued-requests', '1', '--max-body-bytes', '65536',
                              '--read-timeout', '2', '--http-threads', '64']);
  baseline = server.fdCount();
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'the server exits 0 after SIGTERM');
});

const auth = { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };
const chatBody = (extra = {}) => JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0, ...extra });

async function healthy() {
  const r = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers: auth, body: chatBody() });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).object, 'chat.completion');
}

// Sends raw bytes; resolves with the reply once a whole response came (its head and
// Content-Length bytes), the server closed, or `ms` passed.
function raw(bytes, ms = 3000) {
  return new Promise((resolve) => {
    const socket = net.connect(new URL(server.url).port, '127.0.0.1');
    let reply = '';
    const done = () => { clearTimeout(timer); socket.destroy(); resolve(reply); };
    const timer = setTimeout(done, ms);
    socket.on('data', (d) => {
      reply += d.toString('latin1');
      const head = reply.indexOf('\r\n\r\n');
      const length = Number((reply.match(/Content-Length: (\d+)/i) ?? [])[1] ?? -1);
      if (head >= 0 && length >= 0 && reply.length >= head + 4 + length) done();
    });
    socket.on('close', done);
    socket.on('error', () => {});
    socket.write(bytes);
  });
}
const statusOf = (reply) => Number((reply.match(/^HTTP\/1\.1 (\d{3})/) ?? [])[1]);
const post = (body, headers) =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;

test('the API key is required on /v1, with 401 and an error object otherwise', async () => {
  for (const headers of [{ 'Content-Type': 'application/json' }, { 'Content-Type': 'application/json', Authorization: 'Bearer wrong' }]) {
    const r = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers, body: chatBody() });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).error.type, 'authentication_error');
  }
  const client = server.client({ apiKey: 'wrong' });
  await assert.rejects(client.models.list(), (e) => e.status === 401);
  assert.equal((await server.client({ apiKey: key }).models.list()).data.length, 1);
  assert.equal((await fetch(server.url + '/health')).status, 200);
  await healthy();
});

test('a full queue answers 503 with Retry-After', async () => {
  const long = fetch(server.url + '/v1/chat/completions', { method: 'POST', headers: auth,
    body: chatBody({ max_tokens: 400, ignore_eos: true }) });
  await new Promise((r) => setTimeout(r, 20));
  const refused = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers: auth, body: chatBody() });
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.equal((await refused.json()).error.code, 'queue_full');
  assert.equal((await long).status, 200);
  await healthy();
});

test('bodies over the limit get 413', async () => {
  const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(100000) }] });
  const r = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers: auth, body: big });
  assert.equal(r.status, 413);
  assert.match((await r.json()).error.message, /larger than/);
  await healthy();
});

test('malformed, truncated, deeply nested and non-UTF-8 bodies get 4xx', async () => {
  const cases = [
    ['{"messages": [{"role": "user", "content": "hi"}', 400],            // truncated JSON
    ['null', 400], ['[1, 2]', 400], ['"text"', 400],                      // not an object
    ['{"messages": "hi"}', 400],                                          // wrong type
    ['{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400],
  ];
  for (const [body, status] of cases) {
    const reply = await raw(post(body, 'Content-Type: application/json\r\n') + body);
    assert.equal(statusOf(reply), status, `${body.slice(0, 40)} -> ${reply.slice(0, 80)}`);
  }
  const deep = '['.repeat(30000) + ']'.repeat(30000);
  assert.equal(statusOf(await raw(post(deep, 'Content-Type: application/json\r\n') + deep)), 400);
  const invalid = Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]);
  const head = Buffer.from(post(invalid.toString('latin1'), 'Content-Type: application/json\r\n').replace(/Content-Length: \d+/, `Content-Length: ${invalid.length}`));
  assert.equal(statusOf(await raw(Buffer.concat([head, invalid]))), 400);
  assert.equal(statusOf(await raw(post('{}', 'Content-Type: text/html\r\n') + '{}')), 415);
  // A body shorter than its Content-Length: the server gives up after its read timeout.
  const started = Date.now();
  await raw(post('{"messages": []}', 'Content-Type: application/json\r\n').replace(/Content-Length: \d+/, 'Content-Length: 500') + '{"messages"', 8000);
  assert.ok(Date.now() - started < 7000, 'a truncated body does not hold the connection past the read timeout');
  assert.equal(statusOf(await raw('GARBAGE / HTTP/9.9\r\n\r\n')), 400);
  await healthy();
});

test('huge headers are refused without harm', async () => {
  // httplib reads header lines of at most 8 KiB: a longer one is a 400.
  const long = await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200000)}\r\nConnection: close\r\n\r\n`);
  assert.equal(statusOf(long), 400);
  const many = Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`).join('\r\n');
  const lots = await raw(`GET /health HTTP/1.1\r\nHost: x\r\n${many}\r\nConnection: close\r\n\r\n`);
  assert.equal(statusOf(lots), 200, 'many short headers are fine');
  await healthy();
});

test('slow clients (slowloris) do not stop others being served', async () => {
  const sockets = [];
  for (let i = 0; i < 40; ++i) {
    const s = net.connect(new URL(server.url).port, '127.0.0.1');
    s.on('error', () => {});
    s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    sockets.push(s);
  }
  const drip = setInterval(() => sockets.forEach((s) => s.write('X-Slow: 1\r\n')), 500);
  const started = Date.now();
  await healthy();
  assert.ok(Date.now() - started < 2000, 'a normal request is served while 40 clients drip headers');
  clearInterval(drip);
  sockets.forEach((s) => s.destroy());
});

test('1,000 connections opened and dropped leave no descriptors behind', async () => {
  const port = new URL(server.url).port;
  for (let round = 0; round < 4; ++round) {
    await Promise.all(Array.from({ length: 250 }, () => new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.write('POST /v1/chat'); s.destroy(); resolve(); });
      s.on('error', resolve);
    })));
  }
  await healthy();
  // A leak would keep hundreds; the test's own keep-alive connections are a handful.
  const settled = await waitFor(() => server.fdCount() <= baseline + 16, 15000);
  assert.ok(settled, `descriptors: ${server.fdCount()} now, ${baseline} at the start`);
});
