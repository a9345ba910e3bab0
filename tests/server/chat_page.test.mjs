// GET /'s chat page in a real browser (Debian's chromium, headless, driven by puppeteer-core):
// a message typed and sent streams back the same reply the API gives for the same request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer } from './harness.mjs';

const require = createRequire(new URL('../oracle/package.json', import.meta.url));
const puppeteer = require('puppeteer-core');

let server, browser;
before(async () => {
  server = await startServer();
  browser = await puppeteer.launch({
    executablePath: process.env.OG_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
});
after(async () => {
  await browser?.close();
  assert.equal((await server.stop()).code, 0);
});

test('the chat page streams a reply equal to the API response', async () => {
  const page = await browser.newPage();
  const failures = [];
  page.on('pageerror', (e) => failures.push(String(e)));
  await page.goto(server.url + '/', { waitUntil: 'load' });
  assert.equal(await page.title(), 'onnx-genai chat');
  await page.$eval('#temperature', (el) => { el.value = '0'; });
  await page.$eval('#max_tokens', (el) => { el.value = '16'; });
  await page.type('#prompt', 'Tell me about ships.');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelector('#stop').disabled &&
    document.querySelectorAll('.msg.assistant, .msg.error').length === 1 &&
    document.querySelector('.msg.assistant, .msg.error').textContent.length > 0, { timeout: 30000 });
  const reply = await page.$eval('.msg.assistant', (el) => el.textContent);
  const expected = await server.client().chat.completions.create({
    model: 'debian-prose-11m', messages: [{ role: 'user', content: 'Tell me about ships.' }], temperature: 0, max_tokens: 16 });
  assert.equal(reply, expected.choices[0].message.content);
  assert.deepEqual(failures, []);
  // A second turn sends the history: the reply matches the API given the same three messages.
  await page.type('#prompt', 'And then?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 2 &&
    document.querySelector('#stop').disabled, { timeout: 30000 });
  const second = await page.$$eval('.msg.assistant', (els) => els[1].textContent);
  const expected2 = await server.client().chat.completions.create({ model: 'debian-prose-11m', temperature: 0, max_tokens: 16,
    messages: [{ role: 'user', content: 'Tell me about ships.' }, { role: 'assistant', content: reply }, { role: 'user', content: 'And then?' }] });
  assert.equal(second, expected2.choices[0].message.content);
});
