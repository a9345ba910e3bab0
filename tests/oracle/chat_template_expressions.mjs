// Generated expression templates for differential testing of the chat-template interpreter:
// random combinations of literals, operators, filters, tests, methods, slices and loops, each
// rendered with @huggingface/jinja. Most combinations make the reference throw (e.g. `none + 1`);
// the checker then only lists them, so what is compared byte for byte is every one that renders.
//
// usage: node chat_template_expressions.mjs --out <refs.json> [--count N]
// Output has the format of chat_template_render.mjs (template source inline).
import fs from 'node:fs';
import { Template } from '@huggingface/jinja';

const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, v, i, all) => (i % 2 ? pairs : [...pairs, [all[i].replace(/^--/, ''), all[i + 1]]]), []));
if (!args.out) throw new Error('usage: node chat_template_expressions.mjs --out <refs.json> [--count N]');
const count = Number(args.count ?? 6000);

// A linear congruential generator: the same templates on every run.
let seed = 777;
const below = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const pick = (items) => items[below(items.length)];

const ATOMS = ["1", "2.5", "-3", "0", "'ab c'", "''", "' x '", "true", "false", "none", "[1, 'a', none]", "[]",
  "{'k': 1, 'j': [2]}", "{}", "messages", "messages[0]", "messages[-1].content", "tools", "tools[0].function",
  "undefined_var", "(1, 2)", "range(4)", "'a,b,,c'", "3.0", "10", "'Hello World'", "messages | length"];
const OPERATORS = [" + ", " - ", " * ", " / ", " // ", " % ", " ~ ", " == ", " != ", " < ", " >= ", " in ", " not in ",
  " and ", " or ", " ** "];
const FILTERS = ["length", "upper", "lower", "trim", "tojson", "string", "int", "float", "first", "last", "list", "reverse",
  "sort", "unique", "join", "items", "dictsort", "abs", "title", "capitalize", "indent", "tojson(indent=2)", "join(', ')",
  "default('d')", "default('e', true)", "map(attribute='role')", "selectattr('role', 'equalto', 'user')",
  "rejectattr('content')", "replace('a', 'X')", "indent(2, true)", "int(7)", "sort(reverse=true)", "safe", "count", "round"];
const TESTS = ["defined", "undefined", "none", "string", "number", "integer", "mapping", "sequence", "iterable", "boolean",
  "true", "false", "odd", "even", "lower", "upper", "callable"];
const METHODS = [".upper()", ".strip()", ".split()", ".split(',')", ".startswith('a')", ".endswith(('c', 'x'))",
  ".replace(' ', '_')", ".title()", ".get('k')", ".get('z', 5)", ".items()", ".keys()", ".values()", "[1:]", "[::-1]",
  "[0]", "[-1]", ".length", "[1:3]", "[::2]"];

function expression(depth) {
  const form = below(6);
  if (depth > 1 || form === 0) return pick(ATOMS);
  if (form === 1) return expression(depth + 1) + pick(OPERATORS) + expression(depth + 1);
  if (form === 2) return `(${expression(depth + 1)}) | ${pick(FILTERS)}`;
  if (form === 3) return `(${expression(depth + 1)}) is ${below(2) ? 'not ' : ''}${pick(TESTS)}`;
  if (form === 4) return `(${expression(depth + 1)})${pick(METHODS)}`;
  return `(${expression(depth + 1)} if ${expression(depth + 1)} else ${expression(depth + 1)})`;
}

const conversation = {
  id: 'fixed',
  messages: [
    { role: 'system', content: 'Sys' },
    { role: 'user', content: 'Hi there' },
    { role: 'assistant', content: null, tool_calls: [{ function: { name: 'f', arguments: { a: 1 } } }] },
  ],
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  add_generation_prompt: true,
  extra: {},
};
const specialTokens = { bos_token: '<s>', eos_token: '</s>' };
const context = { messages: conversation.messages, add_generation_prompt: true, tools: conversation.tools, documents: null, ...specialTokens };

const templates = [];
for (let i = 0; i < count; ++i) {
  const source = below(3) === 0
    ? `{% for x in ${expression(1)} %}[{{ loop.index }}:{{ x }}]{% else %}none{% endfor %}`
    : `{{ ${expression(0)} }}|{{ ${expression(0)} }}`;
  const result = { ...conversation };
  try {
    result.text = new Template(source).render(context);
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.raised = false;
    result.error = String(error.message);
  }
  templates.push({ name: `expr${i}: ${source}`, origin: { source }, special_tokens: specialTokens, cases: [result] });
}
fs.writeFileSync(args.out, JSON.stringify({ templates }));
console.log(`generated ${count} expression templates -> ${args.out}`);
