// Drives serve with OpenAI's own client for Node (the `openai` package),
// as a lab's code would: streaming, tool calls, stop, log-probs, errors.
// Prints TAP.
//
//   node tests/client/openai-node.mjs URL KEY CHAT_JSON
//
// URL is serve's address; it serves the model "a" (a fresh checkpoint) and
// "t" (taught to answer the chat of CHAT_JSON, a request with tools, by
// calling get_weather for Paris) behind --api-key KEY.  NODE_PATH names the
// node_modules folder that holds the package.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(process.env.NODE_PATH + '/');
const { default: OpenAI } = await import(require.resolve('openai'));
const [url, key, chatFile] = process.argv.slice(2);
const chat = JSON.parse(readFileSync(chatFile, 'utf8'));
const client = new OpenAI({ baseURL: url + '/v1', apiKey: key, maxRetries: 0 });

const tests = [];
const test = (name, fn) => tests.push([name, fn]);

test('models are listed and retrieved by id', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids.sort(), ['a', 't']);
  const t = await client.models.retrieve('t');
  assert.equal(t.id, 't');
  assert.equal(t.object, 'model');
});

test('a tool call comes back as message.tool_calls', async () => {
  const r = await client.chat.completions.create({ model: 't', ...chat });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  assert.equal(c.message.tool_calls[0].type, 'function');
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(typeof r.created, 'number');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('the stream helper assembles the same message from the chunks, usage last', async () => {
  const s = client.chat.completions.stream({
    model: 't', ...chat, stream_options: { include_usage: true },
  });
  let text = '';
  s.on('content', (delta) => { text += delta; });
  const r = await s.finalChatCompletion();
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(text, 'Let me look.\n');
  assert.equal(m.content, 'Let me look.\n');
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.ok(r.usage && r.usage.completion_tokens > 0);
});

test('a raw stream of chunks ends at [DONE], with one id throughout', async () => {
  const stream = await client.chat.completions.create({ model: 't', ...chat, stream: true });
  const ids = new Set();
  let n = 0;
  for await (const chunk of stream) {
    ids.add(chunk.id);
    assert.equal(chunk.object, 'chat.completion.chunk');
    n++;
  }
  assert.equal(ids.size, 1);
  // the role's chunk, then the text: one chunk a read of the connection,
  // so a single one when decoding ends before the first read
  assert.ok(n >= 2);
});

test('stop ends the reply before the stop string, streamed or whole', async () => {
  const want = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "';
  const r = await client.chat.completions.create({ model: 't', ...chat, stop: ['Paris'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.content, want);
  const s = await client.chat.completions.create({ model: 't', ...chat, stop: 'Paris', stream: true });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, want);
});

test('chat log-probs: logprobs.content with top_logprobs, the drawn token first when greedy', async () => {
  const r = await client.chat.completions.create({
    model: 'a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, temperature: 0,
    logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.ok(lp.length >= 1);
  for (const t of lp) {
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.ok(t.logprob <= 0 && Array.isArray(t.bytes));
  }
});

test('completions: streamed text and log-probs are the whole answer\'s', async () => {
  const body = { model: 'a', prompt: 'def f(x):', max_tokens: 10, temperature: 0, logprobs: 2 };
  const whole = await client.completions.create(body);
  const s = await client.completions.create({ ...body, stream: true });
  let text = '';
  const lps = [];
  for await (const chunk of s) {
    text += chunk.choices[0].text;
    lps.push(...chunk.choices[0].logprobs.token_logprobs);
  }
  assert.equal(text, whole.choices[0].text);
  assert.deepEqual(lps, whole.choices[0].logprobs.token_logprobs);
  assert.equal(whole.choices[0].logprobs.top_logprobs.length, 10);
});

test('a field serve does not support is a BadRequestError naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'a', messages: [{ role: 'user', content: 'x' }],
      reasoning_effort: 'high' }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'reasoning_effort',
  );
  await assert.rejects(
    client.completions.create({ model: 'a', prompt: 'x', frequency_penalty: 1 }),
    (e) => e.status === 400 && /frequency_penalty/.test(e.message),
  );
  await assert.rejects(
    client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError,
  );
});

test('a wrong API key is an AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: url + '/v1', apiKey: key + 'x', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(`1..${tests.length}`);
let failed = 0;
for (const [i, [name, fn]] of tests.entries()) {
  try {
    await fn();
    console.log(`ok ${i + 1} - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${i + 1} - ${name}`);
    for (const line of String(e.stack || e).split('\n')) console.log(`# ${line}`);
  }
}
process.exit(failed ? 1 : 0);
