// D-4's "no terminal" case through the AI SDK's own client, in two phases driven by
// tests/test_aisdk_node.py (stdout lines out, stdin lines in):
//   1. read a reply until 20 text deltas, print CUT; the test SIGKILLs the server: the SDK's stream
//      must fail (no finish chunk, never a clean end); print the phase's JSON, wait for GO;
//   2. the server is back on the same SQLite file: reconnectToStream gets the reply again, which
//      now ends as D-4 says (its writer died: error, then finish{error}); print that JSON.
import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';

import { DefaultChatTransport, readUIMessageStream } from 'ai';

const BASE = process.env.STREAMWIRE_URL;
const headers = { authorization: `Bearer ${process.env.STREAMWIRE_TOKEN}` };
const transport = new DefaultChatTransport({ api: `${BASE}/api/chat`, headers, body: { pace: 0.05 } });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const textOf = (m) => (m ? m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('') : '');

const stream = await transport.sendMessages({
  chatId: 'node-drop', trigger: 'submit-message',
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'the server dies' }] }] });
const seen = [];
let deltas = 0;
let failure = null;
try {
  for await (const chunk of stream) {
    seen.push(chunk.type);
    if (chunk.type === 'text-delta' && ++deltas === 20) console.log('CUT');
  }
} catch (error) {
  failure = String(error);
}
assert.ok(failure, 'a body that ends with no terminal is an error, never a clean end');
assert.ok(!seen.includes('finish'), 'no finish chunk came');
console.log(JSON.stringify({ phase: 1, failure, deltas }));
assert.equal((await lines.next()).value, 'GO');

const again = await transport.reconnectToStream({ chatId: 'node-drop' });
assert.notEqual(again, null, 'the reply is still running: its stream is there');
const chunks = [];
for await (const chunk of again) chunks.push(chunk);
let message;
const errors = [];
const replay = new ReadableStream({ start(c) { chunks.forEach((x) => c.enqueue(x)); c.close(); } });
for await (const m of readUIMessageStream({ stream: replay, onError: (e) => errors.push(String(e)) })) {
  message = m;
}
console.log(JSON.stringify({ phase: 2, ending: chunks.slice(-2), text: textOf(message), errors }));
process.exit(0);
