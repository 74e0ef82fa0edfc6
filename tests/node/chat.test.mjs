// The AI SDK's own client code against `streamwire serve --agent demo` (run by
// tests/test_aisdk_node.py, which starts the server and passes its address, its token and the
// demo agent's expected replies). Every chunk goes through the SDK's DefaultChatTransport, which
// validates it against the real `uiMessageChunkSchema` (ai v6) and throws on any unknown type.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AbstractChat, DefaultChatTransport, readUIMessageStream } from 'ai';

const BASE = process.env.STREAMWIRE_URL;
const TOKEN = process.env.STREAMWIRE_TOKEN;
// { prompt: { full: text of the whole reply, half: text before a /fail or /pause } }
const EXPECTED = JSON.parse(process.env.STREAMWIRE_EXPECTED);
const AUTH = { authorization: `Bearer ${TOKEN}` };
const PACE = 0.01; // seconds between the demo agent's words: 300 words, about 3 s a reply

const transport = () => new DefaultChatTransport({ api: `${BASE}/api/chat`, headers: AUTH,
                                                   body: { pace: PACE } });
const user = (text, id = `u-${text.length}`) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const textOf = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

// What @ai-sdk/react's Chat keeps: the SDK's own AbstractChat runs every rule over it.
class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = (m) => { this.messages = [...this.messages, m]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = this.messages.with(i, structuredClone(m)); };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(options) { super({ ...options, state: new State() }); }
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function lastMessage(chunks) {
  const stream = new ReadableStream({ start(c) { chunks.forEach((x) => c.enqueue(x)); c.close(); } });
  let message;
  const errors = [];
  for await (const m of readUIMessageStream({ stream, onError: (e) => errors.push(e) })) message = m;
  return { message, errors };
}

// The parts of a reply without what differs from run to run (the run's own ids).
const comparable = (message) => message.parts.map(({ providerMetadata, ...part }) => (
  part.type === 'data-progress' || part.type === 'data-usage' ? { type: part.type, data: part.data } : part));

async function waitFor(predicate, what, ms = 10_000) {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('a full reply through the Chat class equals the demo agent\'s reply', async () => {
  const prompt = 'hello interop';
  let finish;
  const chat = new Chat({ id: 'node-full', transport: transport(), onFinish: (f) => { finish = f; } });
  await chat.sendMessage({ text: prompt });
  assert.equal(chat.status, 'ready');
  assert.equal(chat.messages.length, 2);
  const reply = chat.lastMessage;
  assert.equal(reply.role, 'assistant');
  assert.match(reply.id, /^chat:node-full:[0-9a-f]{32}-assistant$/);
  assert.equal(textOf(reply), EXPECTED[prompt].full);
  const reasoning = reply.parts.filter((p) => p.type === 'reasoning');
  assert.equal(reasoning.length, 1);
  assert.equal(reasoning[0].text, `The user asked: '${prompt}'. I will answer from the script.`);
  assert.equal(reply.parts.filter((p) => p.type === 'source-url').length, 3);
  assert.deepEqual(reply.parts.find((p) => p.type === 'data-usage').data,
                   { inputTokens: 2, outputTokens: 300, totalTokens: 302 });
  assert.equal(reply.metadata.model.id, 'demo');
  assert.equal(finish.finishReason, 'stop');
  assert.equal(finish.isError, false);
});

test('D-4: a /fail reply ends with the error chunk, then finish{error}', async () => {
  const prompt = 'please /fail';
  const chunks = await collect(await transport().sendMessages({
    chatId: 'node-fail', messages: [user(prompt)], trigger: 'submit-message', messageId: undefined }));
  const [error, finish] = chunks.slice(-2);
  assert.equal(error.type, 'error');
  assert.ok(error.errorText.length > 0);
  assert.deepEqual(finish, { type: 'finish', finishReason: 'error' });
  assert.equal(chunks.filter((c) => c.type === 'finish').length, 1);
  const { message, errors } = await lastMessage(chunks);
  assert.equal(textOf(message), EXPECTED[prompt].half, 'the text before the failure is kept');
  assert.deepEqual(errors.map((e) => e.message), [error.errorText]);

  // The Chat class: the error reaches chat.error, the partial reply stays.
  const chat = new Chat({ id: 'node-fail-chat', transport: transport() });
  await chat.sendMessage({ text: prompt });
  assert.equal(chat.status, 'error');
  assert.equal(chat.error.message, error.errorText);
  assert.equal(textOf(chat.lastMessage), EXPECTED[prompt].half);
});

test('a reply cut mid-stream and reconnected equals an uncut one', async () => {
  const prompt = 'cut me off';
  const t = transport();
  const uncut = await lastMessage(await collect(await t.sendMessages({
    chatId: 'node-uncut', messages: [user(prompt)], trigger: 'submit-message' })));

  const cut = new AbortController();
  const first = await t.sendMessages({ chatId: 'node-cut', messages: [user(prompt)],
                                       trigger: 'submit-message', abortSignal: cut.signal });
  let deltas = 0;
  for await (const chunk of first) {
    if (chunk.type === 'text-delta' && ++deltas === 20) break; // the connection is dropped
  }
  cut.abort();
  const again = await t.reconnectToStream({ chatId: 'node-cut' });
  assert.notEqual(again, null, 'the reply is still running: the stream is there');
  const resumed = await lastMessage(await collect(again));
  assert.equal(textOf(resumed.message), EXPECTED[prompt].full);
  assert.deepEqual(comparable(resumed.message), comparable(uncut.message));
  assert.equal(resumed.message.id.endsWith('-assistant'), true);
  assert.equal(await t.reconnectToStream({ chatId: 'node-cut' }), null, 'finished: 204');

  // The Chat class after a cut (its stop() only aborts the fetch: a disconnect), then
  // resumeStream(): the replay replaces the message (same id), it is not appended.
  const chat = new Chat({ id: 'node-cut-chat', transport: transport() });
  const sent = chat.sendMessage({ text: prompt });
  await waitFor(() => chat.lastMessage?.role === 'assistant' && textOf(chat.lastMessage).length > 40,
                'some text');
  await chat.stop();
  await sent;
  const partial = textOf(chat.lastMessage);
  assert.ok(partial.length < EXPECTED[prompt].full.length, 'cut before the end');
  await chat.resumeStream();
  assert.equal(chat.status, 'ready');
  assert.equal(chat.messages.length, 2, 'one user message, one assistant message');
  assert.equal(textOf(chat.lastMessage), EXPECTED[prompt].full);
  assert.deepEqual(comparable(chat.lastMessage), comparable(uncut.message));
});

test('stop mid-reply: the run ends interrupted, the reply keeps its text and finishes', async () => {
  const prompt = 'stop me';
  const stream = await transport().sendMessages({
    chatId: 'node-stop', messages: [user(prompt)], trigger: 'submit-message' });
  const chunks = [];
  let stopped;
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (chunk.type === 'text-delta' && stopped === undefined) {
      stopped = fetch(`${BASE}/api/chat/node-stop/stop`, { method: 'POST', headers: AUTH });
    }
  }
  const answer = await stopped;
  assert.equal(answer.status, 200);
  assert.equal((await answer.json()).status, 'interrupted');
  assert.deepEqual(chunks.slice(-2), [{ type: 'abort', reason: 'interrupted' },
                                      { type: 'finish', finishReason: 'stop' }]);
  const { message } = await lastMessage(chunks);
  const text = textOf(message);
  assert.ok(text.length > 0 && text.length < EXPECTED[prompt].full.length);
  assert.ok(EXPECTED[prompt].full.startsWith(text), 'the text so far is kept');
  assert.equal(await transport().reconnectToStream({ chatId: 'node-stop' }), null);
});
