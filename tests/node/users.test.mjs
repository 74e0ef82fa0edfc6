// Two users of `streamwire serve --agent demo --jwt-secret SECRET` through the AI SDK's own client
// code (run by tests/test_threads_node.py, which starts the server on a backend and passes its
// address in STREAMWIRE_USERS_URL and a JWT for user A and one for user B, minted by `streamwire
// token`, in STREAMWIRE_TOKEN_A and STREAMWIRE_TOKEN_B; the SDK sends them as the transport's
// headers). User A's thread is A's alone: to B (and to anonymous callers) every thread route
// answers exactly what it answers for a chat that does not exist -- 404 on its messages, stop,
// delete and its run's stream, 204 (no reply running) on resume -- while A sees all of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Chat, RecordingTransport, plain, refusal, runOf, stored, streaming, textOf }
  from './sdk_chat.mjs';

const BASE = process.env.STREAMWIRE_USERS_URL;
const skip = BASE ? false : 'run by tests/test_threads_node.py (STREAMWIRE_USERS_URL)';
const A = { authorization: `Bearer ${process.env.STREAMWIRE_TOKEN_A}` };
const B = { authorization: `Bearer ${process.env.STREAMWIRE_TOKEN_B}` };
const RUN = Math.random().toString(36).slice(2, 8);

const transport = (headers) => new RecordingTransport({
  api: `${BASE}/api/chat`, headers, body: { pace: 0.002 } });
const enc = encodeURIComponent;

/** What a route answers: its status and its body (JSON when it is JSON). */
async function answer(method, path, headers = {}) {
  const response = await fetch(`${BASE}${path}`, { method, headers });
  const text = await response.text();
  let body = text;
  try { body = JSON.parse(text); } catch { /* an event stream, or empty */ }
  return { status: response.status, body };
}

/** Every thread route of chat `id` and of its run's streams, as [method, path]. */
const routes = (id, runId) => [
  ['GET', `/api/chat/${enc(id)}/messages`],
  ['GET', `/api/chat/${enc(id)}/stream`],
  ['POST', `/api/chat/${enc(id)}/stop`],
  ['DELETE', `/api/chat/${enc(id)}`],
  ['GET', `/streams/${enc(runId)}/sse`],
  ['GET', `/streams/${enc(`chat:${id}`)}/sse`],
];

async function listed(headers) {
  const { status, body } = await answer('GET', '/api/chats?limit=200', headers);
  assert.equal(status, 200);
  return body.threads.map((t) => t.id);
}

async function streams(headers) {
  const { status, body } = await answer('GET', '/streams', headers);
  assert.equal(status, 200);
  return body.streams.map((s) => s.streamId);
}

test('user A\'s thread is invisible to user B on every thread route, and all A\'s',
     { skip }, async () => {
  const id = `users-${RUN}`;
  const ghost = `users-none-${RUN}`; // a chat nobody started: what "missing" answers
  const mine = transport(A);
  const a = new Chat({ id, transport: mine });
  const done = a.sendMessage({ text: 'Tell me about users /slow' });
  await streaming(a, () => textOf(a.lastMessage).length > 20, 'A\'s reply streaming');
  const runId = runOf(a.lastMessage);

  // B, and an anonymous caller, get what a missing chat answers them, word for word (ids aside)
  const ghostRun = `chat:${ghost}:nothing`;
  const ask = (who, chat, run) => Promise.all(routes(chat, run).map(([m, p]) => answer(m, p, who)));
  for (const [label, who] of [['B', B], ['anonymous', {}]]) {
    const [got, missing] = [await ask(who, id, runId), await ask(who, ghost, ghostRun)];
    routes(id, runId).forEach(([method, path], i) => {
      const route = `${label}: ${method} ${path}`;
      assert.equal(got[i].status, missing[i].status, route);
      if (typeof got[i].body === 'object') {
        const same = JSON.stringify(missing[i].body).replaceAll(ghostRun, runId)
          .replaceAll(ghost, id);
        assert.deepEqual(got[i].body, JSON.parse(same), route);
      }
    });
    if (who === B) assert.deepEqual(got.map((r) => r.status), [404, 204, 404, 404, 404, 404]);
    else assert.deepEqual(got.map((r) => r.status), [404, 204, 401, 401, 404, 404],
                          'an anonymous caller may not write at all');
  }
  assert.ok(!(await listed(B)).includes(id), 'B\'s GET /api/chats');
  for (const who of [B, {}]) {
    const seen = await streams(who);
    assert.deepEqual(seen.filter((s) => s.startsWith('chat:') || s === runId), [],
                     'GET /streams lists no chat or run stream but the caller\'s own');
  }
  // B's own SDK: resuming A's chat finds no reply, sending to it is a 404
  const theirs = new Chat({ id, transport: transport(B) });
  await theirs.resumeStream();
  assert.equal(theirs.status, 'ready', String(theirs.error));
  assert.deepEqual(theirs.messages, []);
  await theirs.sendMessage({ text: 'let me in' });
  assert.equal(theirs.status, 'error');
  const refused = refusal(theirs.error);
  assert.equal(refused.status, 404, theirs.error.message);
  assert.equal(refused.error, `no chat with id '${id}'`);
  // none of that touched A's reply
  assert.equal(a.status, 'streaming');

  // A sees all of it: the thread so far, the reply (resumed by a second tab), the streams
  assert.deepEqual(await stored(BASE, id, A), plain(a.messages.slice(0, 1)));
  assert.ok((await listed(A)).includes(id));
  const ownStreams = await streams(A);
  assert.ok(ownStreams.includes(runId) && ownStreams.includes(`chat:${id}`), ownStreams.join());
  const other = new Chat({ id, transport: transport(A), messages: a.messages.slice(0, 1) });
  const resumed = other.resumeStream();
  await streaming(other, () => textOf(other.lastMessage).length > 0,
                  'A\'s second tab resuming the reply');
  assert.equal(other.lastMessage.id, a.lastMessage.id);
  const stop = await answer('POST', `/api/chat/${enc(id)}/stop`, A);
  assert.deepEqual([stop.status, stop.body.status], [200, 'interrupted']);
  await Promise.all([done, resumed]);
  for (const chat of [a, other]) assert.equal(chat.status, 'ready', String(chat.error));
  assert.ok(mine.types().includes('abort'), 'A\'s reply ended stopped');
  const replay = await answer('GET', `/streams/${enc(runId)}/sse`, A);
  assert.equal(replay.status, 200);
  assert.match(replay.body, /interrupted/);
  assert.deepEqual(await stored(BASE, id, A), plain(a.messages));

  // after the reply: still nothing for B, and B's delete deleted nothing
  for (const [method, path] of routes(id, runId)) {
    const got = await answer(method, path, B);
    assert.equal(got.status, path.endsWith('/stream') ? 204 : 404, `B: ${method} ${path}`);
  }
  assert.deepEqual(await stored(BASE, id, A), plain(a.messages));
  const deleted = await answer('DELETE', `/api/chat/${enc(id)}`, A);
  assert.deepEqual([deleted.status, deleted.body], [200, { deleted: true }]);
  assert.equal((await answer('GET', `/api/chat/${enc(id)}/messages`, A)).status, 404);
  assert.ok(!(await listed(A)).includes(id));
});

test('each user lists their own threads only', { skip }, async () => {
  const ids = { A: `users-a-${RUN}`, B: `users-b-${RUN}` };
  for (const [who, headers] of [['A', A], ['B', B]]) {
    const chat = new Chat({ id: ids[who], transport: transport(headers) });
    await chat.sendMessage({ text: `hello from ${who}` });
    assert.equal(chat.status, 'ready', String(chat.error));
    assert.deepEqual(await stored(BASE, ids[who], headers), plain(chat.messages));
  }
  const a = await listed(A);
  const b = await listed(B);
  assert.ok(a.includes(ids.A) && !a.includes(ids.B), a.join());
  assert.ok(b.includes(ids.B) && !b.includes(ids.A), b.join());
  assert.deepEqual(await listed({}), [], 'an anonymous caller lists no one\'s threads');
});
