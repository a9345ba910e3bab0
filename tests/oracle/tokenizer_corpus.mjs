// Deterministic tokenizer test corpus: prose, code, many scripts, emoji, combining marks,
// whitespace and digit runs, special tokens inside text, and a few 100k-character strings.
// Usage: node tokenizer_corpus.mjs <out.json>   (same output on every run: seeded PRNG)
import { writeFileSync } from 'node:fs';

let seed = 0x5eed1234;
function random() {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const repeat = (n, fn) => Array.from({ length: n }, fn);

const WORDS = `the quick brown fox jumps over lazy dog tokenizer model language inference runtime
memory kernel attention layer vector matrix cache stream token byte merge rank vocabulary
normal pre split decode encode hello world people would could should because however
internationalization antidisestablishmentarianism supercalifragilistic don't isn't we're
they've I'll she'd it's you're O'Neil rock'n'roll naïve café résumé coöperate façade
Straße jalapeño München Zürich Ångström fiancée déjà vu`.split(/\s+/);
const PUNCT = ['.', ',', '!', '?', ';', ':', '...', ' -', ' —', '–', '(', ')', '"', "'", '«', '»', '“', '”'];

function sentence() {
  const words = repeat(int(3, 18), () => {
    let w = pick(WORDS);
    const r = random();
    if (r < 0.1) w = w.toUpperCase();
    else if (r < 0.25) w = w[0].toUpperCase() + w.slice(1);
    return w;
  });
  let s = words.join(' ');
  if (random() < 0.3) s = s.replace(/ /, pick([', ', ' (', ' "', ' - ']));
  return s + pick(PUNCT.slice(0, 4));
}
const prose = () => repeat(int(1, 5), sentence).join(pick([' ', '  ', '\n', '\n\n', ' \n']));

const IDENT = ['x', 'idx', 'value', 'buffer_size', 'TokenizerConfig', 'max_len', 'i', 'self', 'ctx', 'kMaxTokens', 'résultat', '变量'];
const CODE = [
  () => `def ${pick(IDENT)}(${pick(IDENT)}, ${pick(IDENT)}=None):\n    """Docstring with 'quotes'."""\n    if ${pick(IDENT)} is None:\n        return [${int(0, 999)}, ${int(0, 99)}]\n    for i in range(${int(1, 100)}):\n        print(f"{i:04d} -> {${pick(IDENT)}!r}")\n`,
  () => `#include <vector>\n\ntemplate <typename T>\nstatic T ${pick(IDENT)}(const std::vector<T>& v) {\n\tT sum{};\n\tfor (auto& e : v) sum += e * ${int(2, 9)};  // accumulate\n\treturn sum >> ${int(1, 4)};\n}\n`,
  () => `const ${pick(IDENT)} = async (a, b) => {\n  const r = await fetch(\`/api/v${int(1, 3)}/\${a}?q=\${encodeURIComponent(b)}\`);\n  return r.ok ? r.json() : null; // TODO\n};\n`,
  () => `fn ${pick(IDENT).toLowerCase()}<'a>(s: &'a str) -> Result<Vec<u8>, Box<dyn Error>> {\n    let v: Vec<u8> = s.bytes().filter(|b| *b != b' ').collect();\n    Ok(v)\n}\n`,
  () => `SELECT u.id, COUNT(*) AS n FROM users u\nLEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= '2024-0${int(1, 9)}-1${int(0, 9)}' AND o.total > ${int(10, 9999)}.${int(10, 99)}\nGROUP BY u.id HAVING n > ${int(1, 9)} ORDER BY n DESC;`,
  () => `<!DOCTYPE html>\n<html lang="en">\n  <body class="${pick(IDENT)}">\n    <p id='p${int(1, 99)}'>Hello &amp; welcome&nbsp;&lt;user&gt;</p>\n    <a href="https://example.com/${pick(IDENT)}?a=1&b=2">link</a>\n  </body>\n</html>`,
  () => `{"name": "${pick(IDENT)}", "values": [${repeat(int(1, 6), () => int(-999, 9999)).join(', ')}], "ok": true, "nested": {"k": null}}`,
  () => `$ ls -la /usr/local/bin | grep -E '^-rwx' && echo "done: $?" 2>&1 >> /tmp/log.txt`,
];

const SCRIPTS = [
  '我们正在测试分词器的正确性，包括标点符号。', '今天天气很好，我想去公园散步。', '東京は日本の首都です。カタカナとひらがなを混ぜる。',
  'ラーメンを食べたい！', '한국어 문장도 포함합니다. 안녕하세요?', '조선어 텍스트와 숫자 123',
  'مرحبا بالعالم، هذا اختبار للترميز.', 'اللغة العربية جميلة جدا', 'नमस्ते दुनिया, यह एक परीक्षण है।',
  'हिन्दी में क्षत्रिय और द्वार', 'สวัสดีครับ นี่คือการทดสอบภาษาไทย', 'ภาษาไทยไม่มีช่องว่างระหว่างคำ',
  'Привет, мир! Это тест токенизатора.', 'Ελληνικά: ΟΔΥΣΣΕΥΣ και ὁ λόγος', 'עברית: שלום עולם',
  'Tiếng Việt có dấu: Người ta nói rằng', 'Türkçe: İstanbul ışık ĞÜŞÖÇ', 'ქართული ენა', 'Հայերեն', 'አማርኛ ቋንቋ',
  'ᚠᛇᚻ᛫ᛒᛦᚦ', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛', '𠀀𠀁𠀂 𪚥 (CJK extension B)', 'ﬁﬂ ligatures, ＦＵＬＬＷＩＤＴＨ，①②③ ㍻ ㎏',
];
const EMOJI = ['😀', '🙂', '🚀', '🔥', '👍🏽', '👋🏿', '👨‍👩‍👧‍👦', '👩🏽‍💻', '🏳️‍🌈', '🧑🏻‍🤝‍🧑🏾', '❤️', '☺️', '1️⃣', '#️⃣', '🇺🇸', '🇯🇵🇩🇪', '🤷‍♂️', '🫠', '🐈‍⬛', '💁🏼‍♀️'];
const COMBINING = [
  'e\u0301', 'a\u0308\u0323', 'n\u0303', 'o\u0302\u0300', '\u1e9b\u0323', 'A\u030a', 'Z\u0335\u0336\u0337',
  'q\u0307\u0323', 'ḱ̷̛͔͎', 'i\u0307', '\u0915\u094d\u0937', '\u0e01\u0e34\u0e4a', 'Ζ\u0313\u0342',
  'Z͑ͫ̓ͪ̂ͫ̽͏̴̙̤̞͉͚̯̞̠͍A̴̵̜̰͔ͫ͗͢L̠ͨͧͩ͘G̴̻͈͍͔̹̑͗̎̅͛́Ǫ̵̹̻̝̳͂̌̌͘', '\u0300leading mark', 'x\u20dd', '\u3099\u309a', 'ﾊﾟ',
];
const SPACES = [' ', '  ', '   ', '\t', '\t\t', '\n', '\n\n', '\r\n', '\r\n\r\n', ' \n', '\n ', '\u00a0', '\u3000', '\u2009',
  '\u200b', '\ufeff', '\u0085', '\u2028', '\u202f', '\u1680', '\v', '\f', '        ', '\t \t', ' \r\n  '];
const SPECIAL = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '<|begin_of_text|>',
  '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<|reserved_special_token_5|>', '<s>', '</s>', '<unk>',
  '<bos>', '<eos>', '<pad>', '<start_of_turn>', '<end_of_turn>', '<start_of_image>', '<mask>',
  '<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<｜fim▁hole｜>',
  '<|start|>', '<|message|>', '<|channel|>', '<|return|>', '<|call|>', '<|constrain|>', '<|im_start', 'im_end|>', '<<s>>'];
const digits = () => pick([
  () => String(int(0, 9)).repeat(int(2, 40)),
  () => repeat(int(5, 60), () => int(0, 9)).join(''),
  () => `${int(0, 99999)}.${int(0, 99999)}`,
  () => `${int(1, 999)},${String(int(0, 999)).padStart(3, '0')},${String(int(0, 999)).padStart(3, '0')}`,
  () => `+1 (${int(200, 999)}) ${int(200, 999)}-${int(1000, 9999)}`,
  () => `v${int(0, 9)}.${int(0, 99)}.${int(0, 999)}-rc${int(1, 9)}`,
  () => `${int(1, 9)}e-${int(1, 30)} 0x${int(0, 0xffffff).toString(16)} ${int(0, 1e9)}`,
  () => '٣٤٥ ١٢٣ ४५६ ๑๒๓ ①② ¹²³ ½',
])();
const emoji = () => repeat(int(1, 6), () => pick(EMOJI) + (random() < 0.4 ? pick([' ', '', 'ok', '!']) : '')).join('');
const combining = () => repeat(int(1, 4), () => pick(WORDS) + pick(COMBINING)).join(pick([' ', '']));
const spaces = () => repeat(int(1, 5), () => pick(SPACES) + (random() < 0.6 ? pick(WORDS) : '')).join('');
const special = () => repeat(int(1, 4), () => pick([pick(SPECIAL), pick(SPECIAL) + ' ', ' ' + pick(SPECIAL), sentence(), pick(WORDS)]))
  .join(pick(['', ' ', '\n']));
const script = () => repeat(int(1, 3), () => pick(SCRIPTS)).join(pick(['', ' ', '\n']));
const code = () => pick(CODE)();
const GENERATORS = [prose, code, script, emoji, combining, spaces, digits, special];
const mixture = () => repeat(int(2, 6), () => pick(GENERATORS)()).join(pick(['', ' ', '\n', '\t']));

const FIXED = ['', ' ', '  ', '\n', '\r\n', '\t', 'a', 'A', '0', '\u00e9', 'e\u0301', '😀', '<s>', '<|im_start|>',
  "I'm", "DON'T", "you've", "'s", "'", "''", '"', 'Hello world', ' Hello world', 'Hello  world ', 'hello\n\nworld',
  '\u0000', 'nul\u0000byte', '\u0001\u0002\u001f\u007f', '\ud7ff\ue000\uffef', '\ufffd', '\uffff', '\u{10ffff}',
  'a'.repeat(300), ' '.repeat(300), '\n'.repeat(50), '1'.repeat(301), '▁', '▁▁ ▁', 'Ġ', 'Ċ', '<0x41>', '<0xZZ>',
  'Σ ΣΑΣ σας', 'İI ıi', 'ǅ ǈ ǋ', 'ﬀ', 'Å Å Å', '한 한', '가각', '각'];

const corpus = [...FIXED];
const plan = [[prose, 300], [code, 250], [script, 250], [emoji, 150], [combining, 150], [spaces, 150], [digits, 120],
  [special, 250], [mixture, 500]];
for (const [generator, count] of plan) for (let i = 0; i < count; ++i) corpus.push(generator());
// Four strings of 100k characters (code points), of different kinds.
const long = (generator) => {
  let s = '';
  while ([...s].length < 100000) s += generator() + ' ';
  return [...s].slice(0, 100000).join('');
};
corpus.push(long(prose), long(mixture), long(code), long(() => pick(SPACES) + digits()));

const out = process.argv[2];
if (!out) {
  console.error('usage: node tokenizer_corpus.mjs <out.json>');
  process.exit(2);
}
writeFileSync(out, JSON.stringify(corpus));
console.log(`wrote ${corpus.length} strings to ${out}`);
