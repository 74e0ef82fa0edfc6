// A new message while a reply runs, through the AI SDK's own client code (run by
// tests/test_threads_node.py, which starts one `streamwire serve --agent demo --chat-multitask
// POLICY` per policy on a backend and passes their addresses in STREAMWIRE_MULTITASK, a JSON
// object {policy: url}, and their token in STREAMWIRE_TOKEN). The first message asks for a /slow
// reply (about 20 s); while it streams, a second tab of the same user (a Chat started from the
// server's thread) sends the next message:
//   reject    -- the second tab's Chat ends in error with the server's 409 (naming the running
//                reply's run); the first reply completes; the thread holds the first exchange only
//   interrupt -- the first reply ends stopped (`abort`, then finish) with part of its text; the
//                second reply completes; the thread is: message, stopped reply, message, reply
//   enqueue   -- the second tab waits (no chunk) until the first reply has ended, then its reply
//                streams; both complete, in that order in the thread
// The three run at once (one server each): the /slow reply is the time they take.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Chat, RecordingTransport, plain, refusal, runOf, stored as storedAt, streaming, textOf }
  from './sdk_chat.mjs';

const SERVERS = JSON.parse(process.env.STREAMWIRE_MULTITASK || '{}');
const AUTH = { authorization: `Bearer ${process.env.STREAMWIRE_TOKEN}` };
const RUN = Math.random().toString(36).slice(2, 8);
const WORDS = 300; // the demo agent's reply, /slow or not
const SLOW = 'Tell me everything about durable streams /slow';

const skipUnless = (policy) => (SERVERS[policy] ? false
  : `run by tests/test_threads_node.py (STREAMWIRE_MULTITASK.${policy})`);
// the demo agent's words 2 ms apart (a /slow reply keeps its own pace)
const transport = (base, options = {}) => new RecordingTransport({
  api: `${base}/api/chat`, headers: AUTH, body: { pace: 0.002 }, ...options });
const words = (message) => textOf(message).trim().split(/\s+/).length;
const status = async (base, runId) => (await fetch(
  `${base}/runs/${encodeURIComponent(runId)}/status`, { headers: AUTH })).json();

/** The first tab: its Chat has sent the /slow message and its reply is streaming. */
async function slowReply(base, id) {
  const tab = transport(base);
  const chat = new Chat({ id, transport: tab });
  const done = chat.sendMessage({ text: SLOW });
  await streaming(chat, () => words(chat.lastMessage) > 5, 'the /slow reply streaming');
  return { chat, tab, done, runId: runOf(chat.lastMessage) };
}

/** The same user's second tab on the thread, as the server holds it now. */
async function secondTab(base, id, options) {
  const tab = transport(base, options);
  return { tab, chat: new Chat({ id, transport: tab, messages: await storedAt(base, id, AUTH) }) };
}

const finishes = (tab) => tab.chunks.filter((c) => c.type === 'finish').map((c) => c.finishReason);

describe('a message while a reply runs', { concurrency: true }, () => {
  test('reject: the SDK gets the 409 and the first reply completes', { skip: skipUnless('reject') },
       async () => {
    const base = SERVERS.reject;
    const id = `mt-reject-${RUN}`;
    const first = await slowReply(base, id);
    const second = await secondTab(base, id);
    await second.chat.sendMessage({ text: 'a second question' });
    assert.equal(second.chat.status, 'error');
    const refused = refusal(second.chat.error);
    assert.equal(refused.status, 409, second.chat.error.message);
    assert.equal(refused.runId, first.runId, 'it names the running reply');
    assert.deepEqual(second.tab.chunks, [], 'no reply streamed to the refused tab');
    assert.equal(first.chat.status, 'streaming', 'the first reply goes on');
    await first.done;
    assert.equal(first.chat.status, 'ready', String(first.chat.error));
    assert.ok(!first.tab.types().includes('abort'));
    assert.deepEqual(finishes(first.tab), ['stop']);
    assert.equal(words(first.chat.lastMessage), WORDS, 'the whole reply');
    assert.equal((await status(base, first.runId)).status, 'completed');
    assert.deepEqual(await storedAt(base, id, AUTH), plain(first.chat.messages),
                     'the thread: the first message and its reply, nothing of the refused one');
  });

  test('interrupt: the second message stops the first reply and gets its own',
       { skip: skipUnless('interrupt') }, async () => {
    const base = SERVERS.interrupt;
    const id = `mt-interrupt-${RUN}`;
    const first = await slowReply(base, id);
    const second = await secondTab(base, id);
    await second.chat.sendMessage({ text: 'never mind, a short one' });
    assert.equal(second.chat.status, 'ready', String(second.chat.error));
    await first.done;
    // the first tab's reply ended as stopped: abort then finish, with the text so far
    assert.equal(first.chat.status, 'ready', String(first.chat.error));
    const types = first.tab.types();
    assert.ok(types.includes('abort'), `the reply ended: ${types.slice(-3).join(' ')}`);
    assert.ok(types.indexOf('abort') < types.lastIndexOf('finish'));
    assert.ok(words(first.chat.lastMessage) < WORDS, 'cut short');
    assert.equal((await status(base, first.runId)).status, 'interrupted');
    // the second reply is whole
    assert.ok(!second.tab.types().includes('abort'));
    assert.deepEqual(finishes(second.tab), ['stop']);
    assert.equal(words(second.chat.lastMessage), WORDS);
    assert.equal((await status(base, runOf(second.chat.lastMessage))).status, 'completed');
    // the thread: each message, then its reply, as each tab's SDK holds them
    const thread = await storedAt(base, id, AUTH);
    assert.deepEqual(thread.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.deepEqual(thread.slice(0, 2), plain(first.chat.messages));
    assert.deepEqual([thread[2], thread[3]], plain(second.chat.messages.slice(-2)));
  });

  test('enqueue: the second reply starts after the first ends, both complete, in order',
       { skip: skipUnless('enqueue') }, async () => {
    const base = SERVERS.enqueue;
    const id = `mt-enqueue-${RUN}`;
    const first = await slowReply(base, id);
    let firstAtStart; // the first run's status when the second reply's first chunk came
    const second = await secondTab(base, id, {
      onChunk: () => { firstAtStart ??= status(base, first.runId); } });
    const secondDone = second.chat.sendMessage({ text: 'and after that?' });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(second.chat.status, 'submitted', 'the second tab waits');
    assert.deepEqual(second.tab.chunks, []);
    assert.equal(first.chat.status, 'streaming');
    await Promise.all([first.done, secondDone]);
    for (const tab of [first, second]) {
      assert.equal(tab.chat.status, 'ready', String(tab.chat.error));
      assert.ok(!tab.tab.types().includes('abort'));
      assert.deepEqual(finishes(tab.tab), ['stop']);
      assert.equal(words(tab.chat.lastMessage), WORDS, 'the whole reply');
    }
    assert.equal((await firstAtStart).status, 'completed',
                 'the first reply had ended when the second began');
    const thread = await storedAt(base, id, AUTH);
    assert.deepEqual(thread.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.deepEqual(thread.slice(0, 2), plain(first.chat.messages));
    assert.deepEqual([thread[2], thread[3]], plain(second.chat.messages.slice(-2)));
  });
});
