// Threads through the AI SDK's own client code (run by tests/test_threads_node.py, which starts
// `streamwire serve --agent demo` on each backend and passes its address in STREAMWIRE_THREADS_URL
// and its token in STREAMWIRE_TOKEN): after a reply, the server's GET /api/chat/{id}/messages
// equals the SDK's own messages (ids, roles, parts, metadata); regenerate through the SDK replaces
// the reply on the server too; a Chat started from the server's messages (a reload, another
// device) goes on with them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DefaultChatTransport } from 'ai';

import { Chat, plain, stored as storedAt } from './sdk_chat.mjs';

const BASE = process.env.STREAMWIRE_THREADS_URL;
const skip = BASE ? false : 'run by tests/test_threads_node.py (STREAMWIRE_THREADS_URL)';
const AUTH = { authorization: `Bearer ${process.env.STREAMWIRE_TOKEN}` };
const RUN = Math.random().toString(36).slice(2, 8);

const transport = () => new DefaultChatTransport({ api: `${BASE}/api/chat`, headers: AUTH,
                                                   body: { pace: 0.001 } });
const stored = (id) => storedAt(BASE, id, AUTH);

test('after replies the server\'s messages equal the SDK\'s (a tool reply, a text reply)',
     { skip }, async () => {
  const id = `node-thread-${RUN}`;
  const chat = new Chat({ id, transport: transport() });
  await chat.sendMessage({ text: '/tool what is the weather in Paris?' });
  assert.equal(chat.status, 'ready', String(chat.error));
  const tool = chat.lastMessage.parts.find((p) => p.type === 'tool-get_weather');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(await stored(id), plain(chat.messages));
  await chat.sendMessage({ text: 'and now a long answer' });
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(chat.messages.length, 4);
  assert.deepEqual(await stored(id), plain(chat.messages));
});

test('regenerate through the SDK replaces the last reply on the server, once', { skip },
     async () => {
  const id = `node-regen-${RUN}`;
  const chat = new Chat({ id, transport: transport() });
  await chat.sendMessage({ text: 'hello threads' });
  const first = chat.lastMessage.id;
  await chat.regenerate();
  assert.equal(chat.status, 'ready', String(chat.error));
  assert.equal(chat.messages.length, 2);
  assert.notEqual(chat.lastMessage.id, first);
  assert.deepEqual(await stored(id), plain(chat.messages));
});

test('a Chat started from the server\'s messages goes on with the thread', { skip }, async () => {
  const id = `node-reload-${RUN}`;
  const before = new Chat({ id, transport: transport() });
  await before.sendMessage({ text: '/tool first question' });
  const reloaded = new Chat({ id, transport: transport(), messages: await stored(id) });
  assert.deepEqual(plain(reloaded.messages), plain(before.messages));
  await reloaded.sendMessage({ text: 'second question' });
  assert.equal(reloaded.status, 'ready', String(reloaded.error));
  assert.equal(reloaded.messages.length, 4);
  assert.deepEqual(await stored(id), plain(reloaded.messages));
  const list = await (await fetch(`${BASE}/api/chats?limit=200`, { headers: AUTH })).json();
  assert.ok(list.threads.some((t) => t.id === id && t.messageCount === 4));
});

// The server's own fold (UIMessageAssembler) of replies that carry every tool state, written by
// tests/test_threads_node.py in STREAMWIRE_THREADS_FOLDS as <name>.sse and <name>.json: the SDK's
// readUIMessageStream, over the same body, ends with the same message.
const FOLDS = process.env.STREAMWIRE_THREADS_FOLDS;
const foldSkip = FOLDS ? false : 'run by tests/test_threads_node.py (STREAMWIRE_THREADS_FOLDS)';

test('the server folds a reply into the message the SDK ends with', { skip: foldSkip }, async () => {
  const { readFile, readdir } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const { readUIMessageStream } = await import('ai');
  const names = (await readdir(FOLDS)).filter((f) => f.endsWith('.sse')).map((f) => f.slice(0, -4));
  assert.ok(names.length >= 4);
  for (const name of names) {
    const body = await readFile(join(FOLDS, `${name}.sse`));
    const t = new DefaultChatTransport({
      api: 'http://streamwire.test/api/chat',
      fetch: async () => new Response(body, { headers: {
        'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' } }),
    });
    const stream = await t.sendMessages({ chatId: name, messages: [], trigger: 'submit-message',
                                          messageId: undefined });
    let message;
    for await (const m of readUIMessageStream({ stream, onError: () => {} })) message = m;
    const folded = JSON.parse(await readFile(join(FOLDS, `${name}.json`), 'utf8'));
    assert.deepEqual(plain(message), folded, name);
  }
});
