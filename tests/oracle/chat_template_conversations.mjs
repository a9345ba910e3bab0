// Deterministic chat-template conversations: every (template, conversation) pair is rendered by
// @huggingface/jinja (chat_template_render.mjs) and by our C++ renderer, and the outputs compared.
//
// A conversation is a request as `apply_chat_template` receives it: messages, tools (or null),
// add_generation_prompt and extra keyword arguments. Scenarios cover system/user/assistant turns,
// multi-turn, tools and tool calls (arguments as object and as JSON string), tool results,
// reasoning content, list-of-parts content, whitespace and non-ASCII text, and role-order errors
// that templates reject with raise_exception.

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather for a city.',
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'City name, e.g. Paris' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' },
        },
        required: ['location'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'search_web',
      description: 'Search the web and return the top results.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to search for' },
          max_results: { type: 'integer', description: 'How many results', default: 5 },
          safe: { type: 'boolean', description: 'Filter explicit results' },
        },
        required: ['query'],
      },
    },
  },
];

const system = (content) => ({ role: 'system', content });
const user = (content) => ({ role: 'user', content });
const assistant = (content) => ({ role: 'assistant', content });
const parts = (...texts) => texts.map((text) => ({ type: 'text', text }));

function toolCall(id, name, args, argsAsString) {
  return { id, type: 'function', function: { name, arguments: argsAsString ? JSON.stringify(args) : args } };
}

function toolTurn(argsAsString) {
  return [
    user('What is the weather in Paris?'),
    {
      role: 'assistant',
      content: null,
      tool_calls: [toolCall('call_1', 'get_weather', { location: 'Paris', unit: 'celsius' }, argsAsString)],
    },
    { role: 'tool', tool_call_id: 'call_1', name: 'get_weather', content: '{"temperature": 21, "sky": "clear"}' },
  ];
}

// Each scenario: [name, messages, uses tools].
function scenarios() {
  return [
    ['single_user', [user('Hello!')], false],
    ['system_user', [system('You are a helpful assistant.'), user('What is 2 + 2?')], false],
    [
      'multi_turn',
      [system('You are terse.'), user('Hi'), assistant('Hello.'), user('Name a color.')],
      false,
    ],
    ['assistant_last', [user('Continue the story.'), assistant('Once upon a time')], false],
    [
      'long_multi_turn',
      [
        system('You are a math tutor.'),
        user('What is 3 * 4?'),
        assistant('12.'),
        user('And 12 / 4?'),
        assistant('3.'),
        user('And 3 ** 2?'),
        assistant('9.'),
        user('Thanks!'),
      ],
      false,
    ],
    [
      'whitespace_unicode',
      [user('  Grüße, 你好, мир 🌍\n\nSecond paragraph.\t \n'), assistant('\n Ça va? 😀 \n'), user('"quotes" \\ back\\slash')],
      false,
    ],
    ['parts_user', [user(parts('Describe this.', 'Be brief.'))], false],
    [
      'parts_all_roles',
      [system(parts('System in parts.')), user(parts('Question in parts.')), assistant(parts('Answer in parts.')), user(parts('Again.'))],
      false,
    ],
    ['tools_user', [user('What is the weather in Paris?')], true],
    ['tool_call_object', toolTurn(false), true],
    ['tool_call_string', toolTurn(true), true],
    [
      'parallel_tool_calls',
      [
        system('Use tools when needed.'),
        user('Weather in Paris and Tokyo, then search for flights.'),
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            toolCall('call_a', 'get_weather', { location: 'Paris' }, false),
            toolCall('call_b', 'get_weather', { location: 'Tokyo', unit: 'celsius' }, false),
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', name: 'get_weather', content: 'Sunny, 21C' },
        { role: 'tool', tool_call_id: 'call_b', name: 'get_weather', content: 'Rain, 15C' },
        assistant('Paris is sunny (21C); Tokyo has rain (15C).'),
        user('Now search for flights.'),
      ],
      true,
    ],
    [
      'tool_call_with_text',
      [
        user('Find news about ONNX.'),
        {
          role: 'assistant',
          content: 'Let me search for that.',
          tool_calls: [toolCall('call_s', 'search_web', { query: 'ONNX news', max_results: 3, safe: true }, false)],
        },
        { role: 'tool', tool_call_id: 'call_s', name: 'search_web', content: '["ONNX 1.18 released"]' },
      ],
      true,
    ],
    [
      'reasoning_content',
      [
        user('Is 17 prime?'),
        { role: 'assistant', reasoning_content: '17 has no divisors other than 1 and itself.', content: 'Yes, 17 is prime.' },
        user('Is 21 prime?'),
      ],
      false,
    ],
    [
      'think_in_content',
      [user('Pick a number.'), assistant('<think>\nAny number works.\n</think>\n\nSeven.'), user('Another?')],
      false,
    ],
    ['empty_content', [system(''), user('')], false],
    ['system_only', [system('Only a system prompt.')], false],
    ['double_user', [user('First.'), user('Second.')], false],
  ];
}

// Returns the conversations for one template source. enable_thinking and reasoning_effort
// variants are added where the template reads those variables.
export function conversationsFor(templateSource) {
  const out = [];
  for (const [name, messages, withTools] of scenarios()) {
    for (const addGenerationPrompt of [true, false]) {
      out.push({
        id: `${name}/agp=${addGenerationPrompt}`,
        messages,
        tools: withTools ? TOOLS : null,
        add_generation_prompt: addGenerationPrompt,
        extra: {},
      });
    }
  }
  const variants = [];
  if (templateSource.includes('enable_thinking')) {
    variants.push(['enable_thinking', true], ['enable_thinking', false]);
  }
  if (templateSource.includes('reasoning_effort')) {
    variants.push(['reasoning_effort', 'high'], ['reasoning_effort', 'low']);
  }
  for (const [key, value] of variants) {
    for (const name of ['single_user', 'multi_turn', 'reasoning_content', 'tool_call_object']) {
      const [, messages, withTools] = scenarios().find(([n]) => n === name);
      out.push({
        id: `${name}/${key}=${value}`,
        messages,
        tools: withTools ? TOOLS : null,
        add_generation_prompt: true,
        extra: { [key]: value },
      });
    }
  }
  return out;
}
