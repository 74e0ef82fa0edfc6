// Tool replies through the AI SDK's own client code (run by tests/test_aisdk_tools_node.py, which
// writes the UI message streams streamwire's encoder produces for them and passes their folder in
// STREAMWIRE_TOOL_REPLIES). Each body goes through DefaultChatTransport (a fetch that answers with
// the file), which validates every chunk against the real `uiMessageChunkSchema` (ai v6), then
// through readUIMessageStream, which throws on a tool chunk out of order.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';

import { DefaultChatTransport, readUIMessageStream } from 'ai';

const DIR = process.env.STREAMWIRE_TOOL_REPLIES;
const skip = DIR ? false : 'run by tests/test_aisdk_tools_node.py (STREAMWIRE_TOOL_REPLIES)';
const HEADERS = { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' };

async function reply(name) {
  const body = await readFile(join(DIR, `${name}.sse`));
  const transport = new DefaultChatTransport({
    api: 'http://streamwire.test/api/chat',
    fetch: async () => new Response(body, { headers: HEADERS }),
  });
  const chunks = [];
  for await (const chunk of await transport.sendMessages({
    chatId: name, messages: [], trigger: 'submit-message', messageId: undefined })) {
    chunks.push(chunk);
  }
  const stream = new ReadableStream({ start(c) { chunks.forEach((x) => c.enqueue(x)); c.close(); } });
  let message;
  const errors = [];
  for await (const m of readUIMessageStream({ stream, onError: (e) => errors.push(e.message) })) {
    message = m;
  }
  return { chunks, message, errors };
}

const kinds = (message) => message.parts.map((p) => p.type);

test('a two-step tool reply: a step-start per step, the tool part with its output, then the text',
     { skip }, async () => {
  const { message, errors } = await reply('two-steps');
  assert.deepEqual(errors, []);
  assert.equal(message.id, 'reply-1');
  assert.deepEqual(kinds(message), ['step-start', 'text', 'tool-get_weather', 'step-start', 'text']);
  const [, before, tool, , after] = message.parts;
  assert.equal(before.text, 'Let me check the weather.');
  assert.equal(before.state, 'done');
  assert.equal(tool.toolCallId, 'call-1');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.input, { city: 'Paris' });
  assert.deepEqual(tool.output, { city: 'Paris', celsius: 18, sky: 'clear' });
  assert.equal(after.text, 'It is 18 °C in Paris.');
  assert.equal(after.state, 'done');
});

test('an approval request: the tool part waits with its approval id', { skip }, async () => {
  const { message, chunks, errors } = await reply('approval');
  assert.deepEqual(errors, []);
  assert.deepEqual(kinds(message), ['step-start', 'tool-delete_file']);
  const tool = message.parts[1];
  assert.equal(tool.state, 'approval-requested');
  assert.deepEqual(tool.approval, { id: 'approval-1' });
  assert.deepEqual(tool.input, { path: 'notes.txt' });
  assert.deepEqual(chunks.at(-1), { type: 'finish', finishReason: 'stop' });
});

test('a denied call: output-denied, then the text of the next step', { skip }, async () => {
  const { message, errors } = await reply('denied');
  assert.deepEqual(errors, []);
  assert.deepEqual(kinds(message), ['step-start', 'tool-delete_file', 'step-start', 'text']);
  assert.equal(message.parts[1].state, 'output-denied');
  assert.equal(message.parts[1].approval.id, 'approval-2');
  assert.equal(message.parts[3].text, 'I left notes.txt alone.');
});

test('D-4 while a tool runs: the tool part ends output-error, then error, then finish{error}',
     { skip }, async () => {
  const { message, chunks, errors } = await reply('failed');
  // the user's words (streamwire.aisdk.REPLY_ERROR_WORDS), not the server's text; the code for
  // machines in the message's metadata
  const reason = 'The reply was interrupted by a server restart. Please send your message again.';
  assert.deepEqual(errors, [reason]);
  assert.deepEqual(kinds(message), ['step-start', 'tool-get_weather']);
  assert.deepEqual(message.metadata.error, { code: 'WORKER_SHUTDOWN', recoverable: true });
  const tool = message.parts[1];
  assert.equal(tool.state, 'output-error');
  assert.equal(tool.errorText, reason);
  assert.deepEqual(chunks.slice(-4).map((c) => c.type),
                   ['finish-step', 'message-metadata', 'error', 'finish']);
  assert.deepEqual(chunks.at(-1), { type: 'finish', finishReason: 'error' });
});
